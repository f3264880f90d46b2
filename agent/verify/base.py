"""The facts about the unpatched code, and what they settle in a task's plan.

Before the first model request, the task's tests run once on the unpatched code (plus the
hidden tests), in the plan's environment: `examine_base` says which fail, which pass, which
cannot be collected and why. `settle` then turns a draft plan into the one candidates are
judged by, or stops the run with one line (UsageError, exit 2) when the base cannot judge
anything:

- a test file that cannot be imported because a module is missing that is not the
  repository's own (nor named by the task): the environment's fault, never a bug for the model
  (the message names the module and what to do: `--environment`, a requirements file);
- given test ids that match no test, tests that do not run at all;
- a test command that collects nothing, or whose every test passes (nothing to fix).

With only a test command, the tests failing on the base become fail_to_pass and the passing
ones pass_to_pass (`ooda run --test-cmd`, `ooda verify`, `ooda ci`). FAIL_TO_PASS ids that pass
on the base already are kept as a fact (a warning, a record): such a task cannot tell a fix
from no change (SWE-bench's requests-2674).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from ooda.agent.contracts.errors import UsageError
from ooda.agent.verify.plan import BaseFacts, TaskPlan, Uncollectable
from ooda.verifiers.pytest_check import TestRun, TestRunError, match_id, normalize_id

SKIP_DIRS = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules",
                       "__pycache__", "build", "dist"})
_IMPORT_ERROR = re.compile(r"^(?:E\s+)?((?:ModuleNotFoundError|ImportError): .+)$", re.M)
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '\w+' from '([\w.]+)'")


class BaseRunner(Protocol):
    """What runs the task's tests on the unpatched code (the task verifier)."""

    def run_base(self, target: list[str] | str, *, timeout_s: float | None = None) -> TestRun:
        ...


def examine_base(plan: TaskPlan, runner: BaseRunner) -> BaseFacts:
    """Run the plan's tests (its ids, else its test command) on the unpatched code and say
    what they do there."""
    tests = plan.tests
    target: list[str] | str | None = list(tests.ids) if tests.ids else tests.test_cmd
    if target is None:
        return BaseFacts()
    try:
        run = runner.run_base(target)
    except TestRunError as exc:
        return BaseFacts(timed_out=exc.timed_out, error=_first_lines(exc),
                         uncollectable=_from_output(str(exc), plan))
    except ValueError as exc:  # NotGradable: a command the runner cannot grade per test
        return BaseFacts(error=_first_lines(exc))
    outcomes = dict(run.outcomes)
    uncollectable = tuple(_uncollectable(node, run.messages.get(node, ""), plan)
                          for node in plan.runner.collection_errors(run))
    return BaseFacts(
        outcomes=outcomes,
        messages={n: m for n, m in run.messages.items() if outcomes.get(n) != "passed"},
        uncollectable=uncollectable,
        fail_to_pass_passing=_all_passed(tests.fail_to_pass, outcomes, tests.ids),
        pass_to_pass_passing=tuple(normalize_id(i) for i in _all_passed(
            tests.pass_to_pass, outcomes, tests.ids)),
    )


def settle(plan: TaskPlan, facts: BaseFacts) -> TaskPlan:
    """The plan with its base facts (and, with only a test command, the test lists derived
    from them); UsageError, one line, when the unpatched code cannot judge a candidate."""
    missing_module = facts.missing_modules
    if missing_module:
        raise UsageError(missing_module_message(missing_module[0], len(missing_module)))
    tests = plan.tests
    if tests.ids:
        if facts.error is not None and not facts.timed_out:
            raise UsageError(f"the task's tests do not run on the unpatched code: {facts.error}")
        missing = [i for i in tests.ids if facts.outcomes.get(i) == "missing"]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise UsageError(
                f"test id {missing[0]!r}{more} matches no test on the unpatched code: "
                "check its spelling (`pytest --collect-only -q` lists the ids)"
            )
        return dataclasses.replace(plan, base=facts)
    cmd = tests.test_cmd
    if cmd is None:
        return dataclasses.replace(plan, base=facts)
    if facts.error is not None:
        raise UsageError(f"the test command {cmd!r} does not run on the unpatched code: "
                         f"{facts.error}{_hang_hint(facts, plan)}")
    if not facts.outcomes:
        raise UsageError(f"{cmd!r} collects no test on the unpatched code: check the paths "
                         "and ids it names")
    failing, passing = sorted(facts.failing), sorted(facts.passing)
    if not failing:
        raise UsageError(f"every test of {cmd!r} passes on the unpatched code: nothing to fix")
    derived = dataclasses.replace(tests, fail_to_pass=tuple(failing),
                                  pass_to_pass=tuple(passing), derived=True)
    # its pass_to_pass passed on the base by construction
    facts = dataclasses.replace(facts, pass_to_pass_passing=tuple(passing))
    return dataclasses.replace(plan, tests=derived, base=facts)


def _hang_hint(facts: BaseFacts, plan: TaskPlan) -> str:
    """What to do about tests that hung on the unpatched code: more time, or leave out the
    one that was running (pytest's --deselect)."""
    if not facts.timed_out:
        return ""
    named = re.search(r"\((\S+) was still running\)", facts.error or "")
    skip = (f", or leave that test out (add `--deselect {named[1]}` to the test command)"
            if named else "")
    return (f": give it more time (--verifier-timeout SECONDS; now "
            f"{plan.stages.timeout_s:.0f}){skip}")


def missing_module_message(first: Uncollectable, count: int = 1) -> str:
    """One line: which test file cannot be imported, the module it lacks, what to do."""
    more = f" (and {count - 1} more test file(s))" if count > 1 else ""
    return (f"the tests cannot run on the unpatched code: {first.where}{more} fails to import "
            f"({first.reason}); the environment lacks {first.missing_module!r}, which is not "
            "a bug to fix: give the tests their environment (--environment auto detects it "
            "from the repository's files, --environment PATH reads an [environment] table) "
            "or list the package in a requirements file (task.toml `requirements`, ooda ci "
            "--requirements)")


def _all_passed(ids: Iterable[str], outcomes: Mapping[str, str],
                listed: Sequence[str]) -> tuple[str, ...]:
    """The ids whose every matching test passed (`listed`: all the task's ids, which
    match_id shares parametrizations among)."""
    return tuple(i for i in ids
                 if (nodes := match_id(i, outcomes, listed))
                 and all(outcomes[n] == "passed" for n in nodes))


def _uncollectable(node: str, message: str, plan: TaskPlan) -> Uncollectable:
    errors = _IMPORT_ERROR.findall(message)
    reason = errors[-1].strip() if errors else (message.strip().splitlines() or ["error"])[-1]
    return Uncollectable(node, reason[:300], _missing_module(reason, plan))


def _from_output(output: str, plan: TaskPlan) -> tuple[Uncollectable, ...]:
    """A run that left no report because an import failed first (a conftest.py, a plugin)."""
    errors = _IMPORT_ERROR.findall(output)
    if not errors:
        return ()
    reason = errors[-1].strip()
    return (Uncollectable("conftest.py or a plugin", reason[:300],
                          _missing_module(reason, plan)),)


def _missing_module(reason: str, plan: TaskPlan) -> str | None:
    """The module `reason` says is missing, when it is not the repository's own (a file or
    package of it or of the hidden tests) nor a name the task's statement uses: then the
    environment lacks it. None otherwise (a new module may be the fix)."""
    found = _NO_MODULE.search(reason) or _CANNOT_IMPORT.search(reason)
    if found is None:
        return None
    module = found.group(1)
    top = module.split(".", 1)[0]
    hidden = {Path(p).stem for p in plan.tests.hidden_files} | {
        Path(p).parts[0] for p in plan.tests.hidden_files if Path(p).parts}
    if top in hidden or top in _own_names(plan.task.repo):
        return None
    if re.search(rf"\b{re.escape(top)}\b", plan.task.statement):
        return None
    return module


@functools.lru_cache(maxsize=64)
def _own_names(repo: Path, depth: int = 4) -> frozenset[str]:
    """The module names the repository itself provides: its .py files' stems and its
    directories' names, a few levels deep."""
    names: set[str] = set()
    root_depth = str(repo).rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        if dirpath.count(os.sep) - root_depth >= depth:
            dirnames[:] = []
        names.update(dirnames)
        names.update(f[:-3] for f in filenames if f.endswith(".py"))
    return frozenset(names)


def _first_lines(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n", 2)[:2])
    return text.strip() or type(exc).__name__
