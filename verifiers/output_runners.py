"""Django's `./tests/runtests.py` and sympy's `bin/test`: run in the sandbox, graded per test from
their console output (they write no JUnit report).

- django: unittest's verbosity-2 lines, `test_name (module.Class) ... ok|FAIL|ERROR|skipped ...`
  (Python >= 3.11 writes `(module.Class.test_name)`, read as the same id); a test with a
  docstring puts it on the next line before ` ... outcome`. Ids are `test_name (module.Class)`;
  the run's labels are the ids' modules (`module.Class` -> `module`), or with whole files the
  test files of the task turned into labels (`tests/admin_views/tests.py` -> `admin_views.tests`).
- sympy: `bin/test -C --verbose FILES` prints `test_name ok|F|E|f|s|X` per test; ids are
  `test_name`; the files are the task's test files (those its test patch touches).

The task's pre-test commands run first, in the same shell (verifiers/pretest.py); one that fails
raises PreTestFailed, as for pytest.

Unlike pytest under the guard, code under test could print a fake line: this grading is as
trustworthy as SWE-bench's own log parsing, no more (docs/SWEBENCH.md).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from ooda.agent.contracts.protocols import Sandbox
from ooda.verifiers import pretest, tail
from ooda.verifiers.pytest_check.parse import TestRun
from ooda.verifiers.pytest_check.run import PreTestFailed

DJANGO_CMD = "./tests/runtests.py --verbosity 2 --parallel 1"
SYMPY_CMD = "bin/test -C --verbose"
_DJANGO_LINE = re.compile(
    r"^(?P<name>\w+) \((?P<where>[\w.]+)\)(?:\n[^\n]*?)? \.\.\. "
    r"(?P<outcome>ok|FAIL|ERROR|skipped|expected failure|unexpected success)",
    re.MULTILINE,
)
_DJANGO_OUTCOMES = {"ok": "passed", "FAIL": "failed", "ERROR": "error", "skipped": "skipped",
                     "expected failure": "xfailed", "unexpected success": "failed"}
_SYMPY_LINE = re.compile(r"^(?P<name>_*test_\w+)\s+(?P<outcome>ok|F|E|f|s|X|T)\b", re.MULTILINE)
_SYMPY_OUTCOMES = {"ok": "passed", "F": "failed", "E": "error", "f": "xfailed", "s": "skipped",
                   "X": "failed", "T": "failed"}


def django_outcomes(output: str) -> dict[str, str]:
    """`test_name (module.Class)` -> outcome, from runtests.py's verbosity-2 output."""
    found: dict[str, str] = {}
    for match in _DJANGO_LINE.finditer(output):
        name, where = match.group("name"), match.group("where")
        if where.endswith("." + name):  # Python >= 3.11: (module.Class.test_name)
            where = where[: -len(name) - 1]
        found[f"{name} ({where})"] = _DJANGO_OUTCOMES[match.group("outcome")]
    return found


def sympy_outcomes(output: str) -> dict[str, str]:
    """`test_name` -> outcome, from `bin/test --verbose` output."""
    return {m.group("name"): _SYMPY_OUTCOMES[m.group("outcome")]
            for m in _SYMPY_LINE.finditer(output)}


def django_labels(ids: Sequence[str], test_files: Sequence[str], whole_files: bool) -> list[str]:
    """The test labels runtests.py is given."""
    if whole_files and test_files:
        labels = [_file_label(f) for f in test_files if f.endswith(".py")]
        return list(dict.fromkeys(label for label in labels if label))
    modules = []
    for test_id in ids:
        match = re.match(r"^\w+ \(([\w.]+)\)$", test_id.strip())
        if match:
            modules.append(match.group(1).rsplit(".", 1)[0])
    return list(dict.fromkeys(modules))


def _file_label(path: str) -> str | None:
    """`tests/admin_views/tests.py` -> `admin_views.tests` (None: not under tests/)."""
    parts = path.removesuffix(".py").split("/")
    if len(parts) < 2 or parts[0] != "tests":
        return None
    return ".".join(parts[1:])


def command(kind: str, test_cmd: str | None, ids: Sequence[str], test_files: Sequence[str],
            whole_files: bool) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) that run the task's tests with runner `kind` (django or sympy);
    VAR=value words in front of the runner's command become the environment."""
    words = shlex.split(test_cmd or (DJANGO_CMD if kind == "django" else SYMPY_CMD))
    env: dict[str, str] = {}
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if kind == "django":
        return ["python3", *words, *django_labels(ids, test_files, whole_files)], env
    return ["python3", *words, *[f for f in test_files if f.endswith(".py")]], env


def run(sandbox: Sandbox, kind: str, test_cmd: str | None, ids: Sequence[str],
        test_files: Sequence[str], whole_files: bool, timeout_s: float,
        pre_test: Sequence[str] = ()) -> TestRun:
    """Run the tests in `sandbox` (the task's `pre_test` commands first) and read each one's
    outcome from the output; PreTestFailed when a pre-test command failed."""
    argv, env = command(kind, test_cmd, ids, test_files, whole_files)
    wrapped, nonce = pretest.wrap(argv, pre_test)
    result = sandbox.run(wrapped, timeout_s=max(timeout_s, 0.1), env=env)
    failed = None if result.timed_out else pretest.failure(result.output, pre_test, nonce)
    if failed:
        raise PreTestFailed(f"{failed}:\n{tail(result.output, 1500)}")
    found = outcomes(kind, result.output)
    commands = [*(f"(pre-test) {c}" for c in pre_test), shlex.join(argv)]
    return TestRun(outcomes=found, exit_code=result.exit_code, timed_out=result.timed_out,
                   report_found=bool(found), output=result.output,
                   duration_s=result.duration_s, commands=commands, limit=result.limit)


def outcomes(kind: str, output: str) -> dict[str, str]:
    """Per-test outcomes of a `kind` run's output."""
    return django_outcomes(output) if kind == "django" else sympy_outcomes(output)
