"""pytest, run under the guard (verifiers/pytest_check): each test's outcome from pytest's own
JUnit report, the run cross-checked with the guard's record and failed when tampered with;
test ids are node ids (`path/to/test_file.py::Class::test_name[param]`). A test command is run
when it is a plain pytest call (`pytest_command`), refused otherwise (NotGradable)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from ooda.agent.contracts.protocols import Sandbox
from ooda.verifiers.pytest_check.parse import TestRun
from ooda.verifiers.pytest_check.run import (
    Watched,
    not_gradable,
    pytest_command,
    run_pytest,
    run_pytest_ids,
)
from ooda.verifiers.runners import base_run
from ooda.verifiers.runners.request import NotGradable, TestRequest


class PytestRunner:
    """The default runner."""

    kind = "pytest"
    id_format = "path/to/test_file.py::Class::test_name[param]"
    exit_status_checked = True
    stops_at_first_failure = True

    def run(self, sandbox: Sandbox, request: TestRequest) -> TestRun:
        if request.ids:
            # (not when whole files run: an unlisted test failing first would hide the listed)
            options = ["-x"] if request.stop_at_first_failure and not request.whole_files \
                else []
            return run_pytest_ids(sandbox, list(request.ids), request.timeout_s, options,
                                  whole_files=request.whole_files, pre_test=request.pre_test,
                                  watched=watched(request))
        command = request.command or request.runner_cmd
        parsed = pytest_command(command) if command else None
        if parsed is None:
            raise NotGradable(not_gradable(command) if command else
                              "the task names no tests (fail_to_pass, pass_to_pass or a test "
                              "command)")
        args, env = parsed
        return run_pytest(sandbox, args, request.timeout_s, env=env, pre_test=request.pre_test,
                          watched=watched(request))

    def still_running(self, sandbox: Sandbox, request: TestRequest, output: str) -> str | None:
        """After a run of `request` timed out with `output`: the test it was running, from
        pytest's `-q` progress (one character per finished test) and the order a
        `--collect-only` of the same request lists (None when that cannot tell).

        The listing gets COLLECT_TIMEOUT_S whatever the run's own limit (a short limit is
        what makes a test hang, and a loaded machine collects slowly). With no test finished
        the run may still have been collecting: the first test is named only when listing
        them took less than half the run's limit."""
        done = finished_count(output)
        if request.ids:
            args = list(request.ids)
        else:
            parsed = pytest_command(request.command or request.runner_cmd or "")
            if parsed is None:
                return None
            args = parsed[0]
        started = time.monotonic()
        listed = run_pytest(sandbox, [*args, *_one_id_a_line(args), "--collect-only"],
                            COLLECT_TIMEOUT_S, pre_test=request.pre_test)
        if listed.timed_out:
            return None
        if done == 0 and time.monotonic() - started >= request.timeout_s / 2:
            return None  # collecting took most of the run's time: it may not have got further
        ids = [ln.strip() for ln in listed.output.splitlines() if "::" in ln and " " not in
               ln.strip()]
        return ids[done] if done < len(ids) else None

    def collection_errors(self, run: TestRun) -> list[str]:
        """A file pytest could not collect is reported as an error whose node is the file."""
        return [node for node, outcome in run.outcomes.items()
                if outcome == "error" and "::" not in node]


def watched(request: TestRequest) -> Watched:
    """What the guard watches in a run of `request`."""
    return Watched(request.changed_files, request.test_files, request.changed_lines)


RUNNER = PytestRunner()

COLLECT_TIMEOUT_S = 60.0
"""How long listing the tests may take after a run timed out (only then: a hang is rare)."""

_PROGRESS = re.compile(r"^([.FEsxXpR]+)(?:\s+\[\s*\d+%\])?$")


def _one_id_a_line(args: Sequence[str]) -> list[str]:
    """The flags that bring `--collect-only`'s listing to one node id a line (verbosity -1:
    the run's own `-q` plus the command's -q/-v flags, evened out)."""
    level = 0
    for arg in args:
        if re.fullmatch(r"-[qv]+", arg):
            level += arg.count("v") - arg.count("q")
        elif arg in ("--verbose", "--quiet"):
            level += 1 if arg == "--verbose" else -1
    return ["-v"] * -level if level < 0 else ["-q"] * level


def finished_count(output: str) -> int:
    """How many tests pytest's `-q` progress says finished (one character each)."""
    return sum(len(m[1]) for ln in output.splitlines() if (m := _PROGRESS.match(ln.strip())))


def run_tests(
    sandbox: Sandbox, ids_or_cmd: Sequence[str] | str, timeout_s: float,
    whole_files: bool = False, pre_test: Sequence[str] = (),
) -> dict[str, str]:
    """Per-test outcomes (node id -> passed | failed | error | skipped | xfailed | missing)
    of pytest's `base_run` of node ids or a pytest command."""
    request = TestRequest(
        ids=tuple(ids_or_cmd) if not isinstance(ids_or_cmd, str) else (),
        command=ids_or_cmd if isinstance(ids_or_cmd, str) else None,
        whole_files=whole_files, timeout_s=timeout_s, pre_test=tuple(pre_test))
    return dict(base_run(RUNNER, sandbox, request).outcomes)
