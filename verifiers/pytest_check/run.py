"""Pytest stage: run the task's tests in the sandbox and grade them from pytest's JUnit XML.

Outcomes come only from the structured report (parsed with the `junitparser` library), never
from the console output, which the candidate's code can print anything into. The report is
written inside the workspace (`.ooda/junit-<random>.xml`, a directory no patch may touch,
emptied before each run) and read on the host without following symbolic links.

Grading (SPEC): every fail_to_pass and pass_to_pass id must have run and passed; a file id
means all its tests (at least one); a function id matches all its parametrizations; missing,
skipped, xfailed or never-run tests fail. The exit code must agree with the report. A test
command is graded the same way, per test, and only a plain pytest call is accepted
(`not_gradable`): a shell command's exit status alone proves nothing, since code under test
can end the process with status 0.

Pinned runner: pytest starts under verifiers/pytest_check/guard.py (`python3 -s -B`: no user site,
no bytecode), with plugin autoload off, PYTEST_ADDOPTS empty and the cache plugin off; the
configuration files come from the trusted base (the edit policy). The guard's own record of
the run and a fingerprint of the files that decide how tests run are cross-checked with the
report (verifiers/pytest_check/integrity.py): a run the code under test tampered with fails, whatever the
report says, and is never retried. `-o enable_assertion_pass_hook=true` sends passing asserts
through the guard's probes (an operand that equals anything).

Also here: `run_tests`, the per-test outcomes of a run, used on the unpatched code to derive
which tests fail (fail_to_pass) and pass (pass_to_pass) there.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import stat
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from junitparser import Attr, Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult
from ooda.agent.support.fstree import remove_workspace
from ooda.verifiers import SUMMARY_LIMIT, clip, relative_to_workdir, tail
from ooda.verifiers.pytest_check import integrity

REPORT_DIR = ".ooda"
MAX_REPORT_BYTES = 64 * 1024 * 1024
ARGS_FILE_THRESHOLD = 400
"""Above this many ids, they go to pytest in an @argsfile instead of on the command line."""
MAX_LISTED = 8
"""Most failing tests described in a summary."""
PER_TEST_LIMIT = 600
PYTEST_ENV = {
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTEST_ADDOPTS": "",
    "PYTHONDONTWRITEBYTECODE": "1",
}
OUTCOME_RANK = {"passed": 0, "xfailed": 1, "skipped": 2, "failed": 3, "error": 4}
"""When one test has several report entries (call + teardown error), the worst wins."""
FAILING = frozenset({"failed", "error"})
SESSION_RAN = frozenset({0, 1, 2, 5})
"""pytest.main exit codes after which the JUnit report has been written (the session ran)."""

_NOT_FOUND = re.compile(
    r"^ERROR: (?:not found: |file or directory not found: |found no collectors for )(.+?)\s*$",
    re.M,
)
_PYTHON = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
_SHELL_CHARS = set("|&;<>()$`\\\n*?")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class TestRunError(Exception):
    """A test run that produced no usable report (timeout, crash, usage error)."""

    __test__ = False


# --------------------------------------------------------------------------- the report


class _PytestCase(TestCase):
    file = Attr()


class _PytestSuite(TestSuite):
    testcase = _PytestCase


class _PytestReport(JUnitXml):
    testsuite = _PytestSuite


@dataclass
class TestRun:
    """What one pytest run did, read from its JUnit report."""

    __test__ = False

    outcomes: dict[str, str] = field(default_factory=dict)
    """pytest node id -> passed | failed | error | skipped | xfailed."""
    messages: dict[str, str] = field(default_factory=dict)
    """node id -> assertion message and traceback tail, for tests that did not pass."""
    not_found: list[str] = field(default_factory=list)
    """Requested ids pytest said it could not find."""
    exit_code: int | None = None
    timed_out: bool = False
    report_found: bool = False
    output: str = ""
    duration_s: float = 0.0
    commands: list[str] = field(default_factory=list)
    cases: dict[tuple[str, str], str] = field(default_factory=dict)
    """(classname, name) as the JUnit report has them -> outcome (the worst one)."""
    tampered: list[str] = field(default_factory=list)
    """Why the run cannot be trusted (verifiers/pytest_check/integrity.py); empty for an honest run."""
    pytest_exit_code: int | None = None
    """What pytest.main itself returned, per the guard's record (None: no record)."""


def _outcome(case: TestCase) -> tuple[str, str]:
    outcome, message = "passed", ""
    for result in case.result:
        if isinstance(result, Error):
            kind = "error"
        elif isinstance(result, Failure):
            kind = "failed"
        elif isinstance(result, Skipped):
            kind = "xfailed" if (result.type or "") == "pytest.xfail" else "skipped"
        else:
            continue
        if OUTCOME_RANK[kind] >= OUTCOME_RANK[outcome]:
            outcome = kind
            message = _describe(result.message or "", result.text or "")
    return outcome, message


def _describe(message: str, text: str) -> str:
    """The failing source line, the error lines ('E ...') and where it was raised; the last
    lines of the traceback (or the report's message) when pytest gave no error lines."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    if errors:
        source = [line for line in lines if line.startswith(">")][-1:]
        body = source + errors[:12] + lines[-1:]
    else:
        body = ([message.strip()] if message.strip() else []) + lines[-8:]
    return clip("\n".join(body), PER_TEST_LIMIT)


def _node_id(
    classname: str, name: str, file: str | None, known_files: Sequence[str], workspace: Path
) -> str:
    """Map a JUnit xunit1 testcase back to the pytest node id it was made from.

    pytest writes classname = the node id's path with '/' -> '.' and '.py' dropped, then the
    classes; name = the test name with its parameters; file = where the test is defined."""
    if not classname:
        return file or name
    candidates = list(dict.fromkeys(([file] if file else []) + list(known_files)))
    candidates.sort(key=len, reverse=True)
    for path in candidates:
        module = (path[:-3] if path.endswith(".py") else path).replace("/", ".")
        if classname == module:
            return f"{path}::{name}"
        if classname.startswith(module + "."):
            classes = classname[len(module) + 1 :].split(".")
            return "::".join([path, *classes, name])
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (workspace / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return f"{file}::{name}" if file else f"{classname}::{name}"


def _read_report(workspace: Path, name: str) -> bytes | None:
    """The report's bytes, or None when it is missing, odd (a link, not a file) or too big."""
    try:
        dir_fd = os.open(workspace / REPORT_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_REPORT_BYTES:
            return None
        return handle.read(MAX_REPORT_BYTES + 1)


def parse_report(data: bytes, known_files: Sequence[str], workspace: Path) -> TestRun | None:
    """Per-test outcomes from JUnit XML bytes (None when they are not a JUnit report)."""
    try:
        report = _PytestReport.fromstring(data)
    except Exception:  # junitparser raises several types (ParseError, JUnitXmlError, ...)
        return None
    run = TestRun(report_found=True)
    for suite in report:
        for case in suite:
            classname, name = case.classname or "", case.name or ""
            file = case.file if isinstance(case, _PytestCase) else None
            node = _node_id(classname, name, file, known_files, workspace)
            outcome, message = _outcome(case)
            earlier = run.cases.get((classname, name))
            if earlier is None or OUTCOME_RANK[outcome] > OUTCOME_RANK[earlier]:
                run.cases[(classname, name)] = outcome
            previous = run.outcomes.get(node)
            if previous is None or OUTCOME_RANK[outcome] > OUTCOME_RANK[previous]:
                run.outcomes[node] = outcome
                if message:
                    run.messages[node] = message
    return run


# --------------------------------------------------------------------------- running


def _reset_report_dir(workspace: Path) -> Path:
    """Remove whatever sits at .ooda (planted reports, a link) so only this run writes there."""
    directory = workspace / REPORT_DIR
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return directory
    if stat.S_ISDIR(info.st_mode):
        remove_workspace(directory)
    else:
        directory.unlink()
    return directory


@functools.cache
def _guard_source() -> str:
    # read by path, not imported: importing it would import pytest on the host (~0.1 s of
    # every ooda start-up) for a script that only ever runs inside the sandbox
    return Path(__file__).with_name("guard.py").read_text(encoding="utf-8")


def _report_dir(workspace: Path) -> Path:
    """A fresh .ooda/, owned like the workspace root (the sandbox user writes its reports)."""
    directory = _reset_report_dir(workspace)
    directory.mkdir(mode=0o755)
    info = workspace.stat()
    if os.geteuid() == 0 and (info.st_uid, info.st_gid) != (0, 0):
        os.chown(directory, info.st_uid, info.st_gid)
    return directory


def run_pytest(
    sandbox: Sandbox,
    args: Sequence[str],
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    known_files: Sequence[str] = (),
    changed_files: Sequence[str] = (),
) -> TestRun:
    """Run pytest under the guard with `<report flags> <args>` in the sandbox, read its
    report and check the run for tampering (`changed_files`: what the candidate changed)."""
    before = integrity.manifest(sandbox.workspace)
    directory = _report_dir(sandbox.workspace)
    nonce = uuid.uuid4().hex
    name = f"junit-{nonce}.xml"
    workdir = sandbox.workdir.rstrip("/") or "/"
    in_dir = PurePosixPath(workdir) / REPORT_DIR
    (directory / f"guard-{nonce}.py").write_text(_guard_source(), encoding="utf-8")
    config = {"changed_files": list(changed_files)}
    (directory / f"guard-{nonce}.json").write_text(json.dumps(config), encoding="utf-8")
    args = list(args)
    if len(args) > ARGS_FILE_THRESHOLD:
        args_name = f"args-{nonce}.txt"
        (directory / args_name).write_text("\n".join(args) + "\n", encoding="utf-8")
        args = ["@" + str(in_dir / args_name)]
    argv = [
        "python3",
        "-s",
        "-B",
        str(in_dir / f"guard-{nonce}.py"),
        str(in_dir / f"record-{nonce}.json"),
        str(in_dir / f"guard-{nonce}.json"),
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        "-o",
        "enable_assertion_pass_hook=true",  # the guard probes the operands of passing asserts
        f"--junitxml={in_dir / name}",
        f"--rootdir={workdir}",
        "--continue-on-collection-errors",
        "-q",
        *args,
    ]
    result = sandbox.run(argv, timeout_s=max(timeout_s, 0.1), env={**PYTEST_ENV, **(env or {})})
    data = None if result.timed_out else _read_report(sandbox.workspace, name)
    run = parse_report(data, known_files, sandbox.workspace) if data is not None else None
    run = run or TestRun()
    run.exit_code = result.exit_code
    run.timed_out = result.timed_out
    run.output = result.output
    run.duration_s = result.duration_s
    run.commands.append(shlex.join(argv))
    if not result.timed_out:
        record = integrity.parse_record(_read_report(sandbox.workspace, f"record-{nonce}.json"))
        run.pytest_exit_code = record["exit_code"] if record is not None else None
        changes = integrity.changed_files(before, integrity.manifest(sandbox.workspace))
        if changes:
            run.tampered.append(integrity.describe_files(changes))
        if run.report_found:
            run.tampered += integrity.cross_check(record, run.cases, result.exit_code)
        elif record is not None and record["exit_code"] in SESSION_RAN:
            run.tampered.append(
                "pytest finished its session (so it wrote its JUnit report) but the report is "
                "missing or unreadable: deleted or overwritten by the code under test?"
            )
    _reset_report_dir(sandbox.workspace)
    return run


def run_pytest_ids(
    sandbox: Sandbox,
    ids: Sequence[str],
    timeout_s: float,
    changed_files: Sequence[str] = (),
    options: Sequence[str] = (),
) -> TestRun:
    """Run exactly these node ids, in this order (`options`, e.g. -x, go first). Ids pytest
    cannot find are noted and the run is repeated without them (one missing id would otherwise
    stop pytest from running any); a run that was tampered with is never repeated."""
    deadline = time.monotonic() + timeout_s
    wanted = list(dict.fromkeys(normalize_id(i) for i in ids))
    known = list(dict.fromkeys(i.split("::", 1)[0] for i in wanted))
    not_found: list[str] = []
    extra: list[str] = []
    commands: list[str] = []
    carried: dict[str, str] = {}
    messages: dict[str, str] = {}
    for _attempt in range(3):
        run = run_pytest(
            sandbox,
            [*options, *extra, *wanted],
            deadline - time.monotonic(),
            known_files=known,
            changed_files=changed_files,
        )
        commands += run.commands
        if run.timed_out or run.exit_code != 4 or run.pytest_exit_code != 4 or run.tampered:
            break  # only pytest's own usage error is worth another run
        missing = _not_found(run.output, sandbox.workdir, wanted)
        if missing:
            # keep what the first run learnt about them (a collection error, say)
            not_found += missing
            wanted = [i for i in wanted if i not in missing]
            carried.update(run.outcomes)
            messages.update(run.messages)
        elif not extra and not run.outcomes and "unrecognized arguments" in run.output:
            # the repository's addopts need a plugin that is not loaded: drop them
            extra = ["-o", "addopts="]
        else:
            break
        if not wanted or time.monotonic() >= deadline:
            break
    for node, outcome in carried.items():
        run.outcomes.setdefault(node, outcome)
    for node, message in messages.items():
        run.messages.setdefault(node, message)
    run.not_found = not_found
    run.commands = commands
    return run


def _not_found(output: str, workdir: str, wanted: Sequence[str]) -> list[str]:
    missing = []
    for match in _NOT_FOUND.finditer(output):
        path = normalize_id(relative_to_workdir(match.group(1), workdir.rstrip("/"), wanted))
        if path in wanted:
            missing.append(path)
    return missing


def normalize_id(test_id: str) -> str:
    """A node id as pytest prints it: no leading './', no trailing '/'."""
    test_id = test_id.strip()
    while test_id.startswith("./"):
        test_id = test_id[2:]
    return test_id.rstrip("/") if "::" not in test_id else test_id


def pytest_command(cmd: str) -> tuple[list[str], dict[str, str]] | None:
    """(pytest arguments, environment) when `cmd` is a plain pytest invocation
    (`pytest ...`, `python -m pytest ...`, optionally after VAR=value), else None."""
    if any(ch in _SHELL_CHARS for ch in cmd):
        return None
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    env: dict[str, str] = {}
    while words and _ENV_ASSIGN.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[:1] in (["pytest"], ["py.test"]):
        args = words[1:]
    elif len(words) >= 3 and _PYTHON.match(words[0]) and words[1:3] == ["-m", "pytest"]:
        args = words[3:]
    else:
        return None
    drop = ("--junitxml", "--junit-xml", "--junitprefix", "--junit-prefix")
    return [a for a in args if not a.startswith(drop)], env


def not_gradable(cmd: str) -> str:
    """Why a test command that is not a plain pytest run is refused: its exit status alone
    proves nothing (code under test can end the process with status 0)."""
    return (
        f"the test command {cmd!r} is not a plain pytest invocation (`pytest ARGS` or "
        "`python -m pytest ARGS`, optionally after VAR=value; no shell operators): ooda grades "
        "tests per test from pytest's own report, never by a command's exit status alone"
    )


def run_tests(
    sandbox: Sandbox, ids_or_cmd: Sequence[str] | str, timeout_s: float
) -> dict[str, str]:
    """Per-test outcomes (node id -> passed | failed | error | skipped | xfailed | missing).

    `ids_or_cmd` is a list of node ids (each id that matched nothing is reported 'missing')
    or a pytest command line. Use it on the unpatched code to derive fail_to_pass (tests
    that do not pass there) and pass_to_pass (tests that pass). Raises TestRunError when the
    run timed out or left no report, ValueError for a command that is not a pytest run."""
    if isinstance(ids_or_cmd, str):
        parsed = pytest_command(ids_or_cmd)
        if parsed is None:
            raise ValueError(f"not a pytest command, per-test outcomes unknown: {ids_or_cmd}")
        run = run_pytest(sandbox, parsed[0], timeout_s, env=parsed[1])
        wanted: list[str] = []
    else:
        wanted = [normalize_id(i) for i in ids_or_cmd]
        run = run_pytest_ids(sandbox, wanted, timeout_s)
    if run.timed_out:
        raise TestRunError(f"the tests did not finish within {timeout_s:.0f}s")
    if not run.report_found:
        raise TestRunError(
            f"pytest left no report (exit code {run.exit_code}):\n{tail(run.output)}"
        )
    outcomes = dict(run.outcomes)
    for test_id in wanted:
        if not match_id(test_id, outcomes):
            outcomes[test_id] = "missing"
    return outcomes


def split_outcomes(outcomes: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(ids that did not pass, ids that passed) of a run_tests result."""
    failing = [node for node, outcome in outcomes.items() if outcome != "passed"]
    passing = [node for node, outcome in outcomes.items() if outcome == "passed"]
    return failing, passing


# --------------------------------------------------------------------------- grading


def match_id(test_id: str, outcomes: Iterable[str]) -> list[str]:
    """The node ids of a run that `test_id` stands for.

    A file (or directory) id stands for every test in it; a function id also for each of its
    parametrizations; a class id for its methods. When the id's file failed to be collected,
    that collection error stands for it."""
    test_id = normalize_id(test_id)
    nodes = list(outcomes)
    if "::" not in test_id:
        return [n for n in nodes if _within(n.split("::", 1)[0], test_id)]
    last = test_id.rsplit("::", 1)[1]
    hits = [
        n
        for n in nodes
        if n == test_id
        or n.startswith(test_id + "::")
        or ("[" not in last and n.startswith(test_id + "["))
    ]
    if not hits:
        file = test_id.split("::", 1)[0]
        hits = [n for n in nodes if n == file]
    return hits


def _within(path: str, test_id: str) -> bool:
    return path == test_id or path.startswith(test_id + "/")


@dataclass
class Graded:
    """One required id's verdict."""

    test_id: str
    kind: str
    """'fail_to_pass' or 'pass_to_pass'."""
    outcome: str
    """passed | failed | error | skipped | xfailed | missing."""
    node: str
    """The node that decided it (the worst one), or the id itself."""


def grade(fail_to_pass: Sequence[str], pass_to_pass: Sequence[str], run: TestRun) -> list[Graded]:
    """Each required id with its outcome: the worst of the nodes it stands for."""
    graded: list[Graded] = []
    seen: set[str] = set()
    for kind, ids in (("fail_to_pass", fail_to_pass), ("pass_to_pass", pass_to_pass)):
        for raw in ids:
            test_id = normalize_id(raw)
            if test_id in seen:
                continue
            seen.add(test_id)
            nodes = match_id(test_id, run.outcomes)
            if not nodes:
                graded.append(Graded(test_id, kind, "missing", test_id))
                continue
            worst = max(nodes, key=lambda n: OUTCOME_RANK[run.outcomes[n]])
            graded.append(Graded(test_id, kind, run.outcomes[worst], worst))
    return graded


def _explain(item: Graded, run: TestRun) -> str:
    label = {"failed": "FAILED", "error": "ERROR", "missing": "MISSING"}.get(
        item.outcome, item.outcome.upper()
    )
    head = f"{label} {item.node}"
    if item.kind == "pass_to_pass":
        head += " (passed before the change)"
    if item.outcome == "missing":
        why = "pytest could not find it" if item.test_id in run.not_found else "it never ran"
        return f"{head}: {why}; the test must exist and run"
    if item.outcome in ("skipped", "xfailed"):
        detail = run.messages.get(item.node, "")
        what = "skipped" if item.outcome == "skipped" else "expected-to-fail (xfail)"
        return f"{head}: a {what} test counts as failed" + (f"\n{detail}" if detail else "")
    if item.node != item.test_id and "::" not in item.node:
        head += f" (collecting {item.node} failed, so {item.test_id} never ran)"
    detail = run.messages.get(item.node, "")
    return head + ("\n" + _indent(detail) if detail else "")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _summary(head: str, bad: Sequence[Graded], run: TestRun) -> str:
    parts = [head]
    for item in bad[:MAX_LISTED]:
        parts.append(_explain(item, run))
    if len(bad) > MAX_LISTED:
        parts.append(f"... and {len(bad) - MAX_LISTED} more")
    return clip("\n".join(parts), SUMMARY_LIMIT)


def _run_log(run: TestRun, lines: Sequence[str]) -> str:
    out = ["$ " + c for c in run.commands]
    out.append(f"exit code: {run.exit_code}; timed out: {run.timed_out}")
    out.append(f"report found: {run.report_found}")
    out += lines
    out += ["", "---- pytest output ----", run.output]
    return "\n".join(out)


# --------------------------------------------------------------------------- the verifier


class PytestVerifier:
    """Runs the task's tests (node ids, or a test command) and grades them per the SPEC."""

    name = "pytest"

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        if check.fail_to_pass or check.pass_to_pass:
            return self._verify_ids(sandbox, check)
        if check.test_cmd:
            parsed = pytest_command(check.test_cmd)
            if parsed is None:
                message = not_gradable(check.test_cmd)
                return VerifierResult(self.name, "error", 0.0, message, message)
            return self._verify_pytest_cmd(sandbox, check, parsed[0], parsed[1])
        message = "the task names no tests (fail_to_pass, pass_to_pass or a test command)"
        return VerifierResult(self.name, "error", 0.0, message, message)

    def _untrusted(self, run: TestRun) -> VerifierResult | None:
        """A failed result when the run was tampered with, whatever its report says."""
        if not run.tampered or run.timed_out:
            return None
        summary = clip(
            "the test run cannot be trusted, so it counts as failed: "
            + "; ".join(run.tampered)
            + ". Fix the code under test; do not change how the tests are run or reported.",
            SUMMARY_LIMIT,
        )
        lines = ["tampering: " + t for t in run.tampered]
        details: dict[str, object] = {"tampered": run.tampered, "exit_code": run.exit_code}
        return VerifierResult(
            self.name, "failed", run.duration_s, summary, _run_log(run, lines), details
        )

    def _no_report(self, run: TestRun, timeout_s: float) -> VerifierResult | None:
        if run.timed_out:
            summary = f"the tests did not finish within {timeout_s:.0f}s (a hang, an endless loop?)"
            if run.output.strip():
                summary += "\n" + tail(run.output, 800)
            return VerifierResult(
                self.name, "timeout", run.duration_s, summary, _run_log(run, [summary])
            )
        if not run.report_found:
            summary = (
                f"pytest produced no test report (exit code {run.exit_code}): the test run "
                f"crashed or was cut short before reporting. Output tail:\n{tail(run.output, 1500)}"
            )
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, _run_log(run, [summary])
            )
        return None

    def _verify_ids(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        ids = list(check.fail_to_pass) + list(check.pass_to_pass)  # the failing ones first
        options = ["-x"] if check.verdict_only else []  # no feedback needed: stop at the first
        run = run_pytest_ids(sandbox, ids, check.timeout_s, check.changed_files, options)
        early = self._untrusted(run) or self._no_report(run, check.timeout_s)
        if early:
            return early
        graded = grade(check.fail_to_pass, check.pass_to_pass, run)
        bad = [g for g in graded if g.outcome != "passed"]
        table = [f"{g.outcome:8} {g.kind:12} {g.test_id} -> {g.node}" for g in graded]
        details: dict[str, object] = {
            "outcomes": run.outcomes,
            "required": {g.test_id: g.outcome for g in graded},
            "exit_code": run.exit_code,
        }
        if bad:
            head = f"{len(bad)} of {len(graded)} required tests did not pass:"
            unrun = [g for g in bad if g.outcome == "missing"]
            if check.verdict_only and len(unrun) < len(bad):
                head = (f"{len(bad) - len(unrun)} of {len(graded)} required tests failed "
                        f"(stopped at the first failure; {len(unrun)} did not run):")
                bad = [g for g in bad if g.outcome != "missing"]
            summary = _summary(head, bad, run)
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, _run_log(run, table), details
            )
        if run.exit_code != 0:
            summary = (
                f"runner exit code disagrees: the report says all {len(graded)} required tests "
                f"passed but pytest exited with {run.exit_code}. Output tail:\n"
                + tail(run.output, 1200)
            )
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, _run_log(run, table), details
            )
        log = _run_log(run, table)
        return VerifierResult(self.name, "passed", run.duration_s, "", log, details)

    def _verify_pytest_cmd(
        self, sandbox: Sandbox, check: CheckSpec, args: list[str], env: dict[str, str]
    ) -> VerifierResult:
        run = run_pytest(sandbox, args, check.timeout_s, env=env, changed_files=check.changed_files)
        early = self._untrusted(run) or self._no_report(run, check.timeout_s)
        if early:
            return early
        base = check.baseline.get(self.name)
        passed_before = (
            {n for n, o in base.items() if o == "passed"} if isinstance(base, dict) else set()
        )
        bad = [
            Graded(n, "pass_to_pass" if n in passed_before else "fail_to_pass", o, n)
            for n, o in run.outcomes.items()
            if o in FAILING or (n in passed_before and o != "passed")
        ]
        bad += [
            Graded(n, "pass_to_pass", "missing", n) for n in passed_before if n not in run.outcomes
        ]
        passed = sum(1 for o in run.outcomes.values() if o == "passed")
        table = [f"{o:8} {n}" for n, o in run.outcomes.items()]
        details: dict[str, object] = {"outcomes": run.outcomes, "exit_code": run.exit_code}
        if bad:
            summary = _summary(f"{len(bad)} of {len(run.outcomes)} tests did not pass:", bad, run)
        elif passed == 0:
            summary = "no test passed: the test command collected no test that ran and passed"
        elif run.exit_code != 0:
            summary = (
                f"runner exit code disagrees: the report shows no failing test but pytest "
                f"exited with {run.exit_code}. Output tail:\n{tail(run.output, 1200)}"
            )
        else:
            return VerifierResult(
                self.name, "passed", run.duration_s, "", _run_log(run, table), details
            )
        return VerifierResult(
            self.name, "failed", run.duration_s, summary, _run_log(run, table), details
        )
