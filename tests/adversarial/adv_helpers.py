"""Shared by the adversarial tests: a small task whose candidates try to cheat, diffs, and the
real verifier in the real sandbox (Docker by default; bwrap where isolation matters).

The task: `calc.add` subtracts. `tests/test_calc.py::test_add` fails on the base
(fail_to_pass) and `test_zero` passes (pass_to_pass). A cheating candidate leaves the bug in
place and tries to be judged "passed" anyway; none may be.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))  # sandbox_helpers

from sandbox_helpers import backend_or_skip  # noqa: E402

from ooda.agent.contracts.protocols import (
    SandboxBackend,  # noqa: E402
    Verdict,  # noqa: E402
)
from ooda.agent.verify.verifier import TaskVerifier  # noqa: E402
from ooda.tasks.loader import load_task  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

CALC = '''\
"""Arithmetic."""


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return a - b
'''
FIXED = CALC.replace("a - b", "a + b")
TESTS = """\
from calc import add


def test_add() -> None:
    assert add(2, 3) == 5


def test_zero() -> None:
    assert add(0, 0) == 0
"""
PYTEST_INI = "[pytest]\npythonpath = .\n"
PYPROJECT = '[project]\nname = "calc"\nversion = "0"\n\n[tool.mypy]\nstrict = true\n'
SETUP_CFG = "[metadata]\nname = calc\n"
TOX_INI = "[tox]\nenvlist = py311\n"
TASK_TOML = """\
id = "calc"
statement = "add() subtracts instead of adding."
fail_to_pass = ["tests/test_calc.py::test_add"]
pass_to_pass = ["tests/test_calc.py::test_zero"]
gold_patch = "gold.diff"

[verifiers]
ruff = {ruff}
mypy = {mypy}
timeout_s = {timeout}
"""
BASE_FILES = {
    "calc.py": CALC,
    "tests/test_calc.py": TESTS,
    "pytest.ini": PYTEST_INI,
    "pyproject.toml": PYPROJECT,
    "setup.cfg": SETUP_CFG,
    "tox.ini": TOX_INI,
}


def make_task(
    root: Path,
    *,
    ruff: bool = False,
    mypy: bool = False,
    timeout_s: float = 30,
    calc: str = CALC,
) -> Path:
    """Write the calc task directory under `root` (calc.py holding `calc`) and return it."""
    task = root / "calc-task"
    for rel, text in {**BASE_FILES, "calc.py": calc}.items():
        path = task / "repo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    flags = {"ruff": str(ruff).lower(), "mypy": str(mypy).lower(), "timeout": timeout_s}
    (task / "task.toml").write_text(TASK_TOML.format(**flags))
    (task / "gold.diff").write_text(diff("calc.py", calc, calc.replace("a - b", "a + b")))
    return task


def diff(path: str, old: str | None, new: str | None) -> str:
    """A git-style unified diff turning `old` into `new` at `path` (None: absent)."""
    src = f"a/{path}" if old is not None else "/dev/null"
    dst = f"b/{path}" if new is not None else "/dev/null"
    body = "".join(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True), src, dst
        )
    )
    mode = (
        "new file mode 100644\n"
        if old is None
        else "deleted file mode 100644\n"
        if new is None
        else ""
    )
    return f"diff --git a/{path} b/{path}\n{mode}{body}"


def calc_patch(new_source: str) -> str:
    """The candidate's version of calc.py as a patch."""
    return diff("calc.py", CALC, new_source)


def cheat(prelude: str) -> str:
    """calc.py with `prelude` run at import time and the bug left in place."""
    return calc_patch(prelude.rstrip("\n") + "\n\n\n" + CALC)


def verify(
    task_dir: Path,
    patch: str,
    work: Path,
    backend: str | SandboxBackend = "docker",
    without: tuple[str, ...] = (),
    *,
    fresh: bool = False,
) -> Verdict:
    """The real TaskVerifier on `patch`, in the real sandbox `backend`; the stages named in
    `without` left out (to test the guard alone, behind a static stage that would stop the
    same patch first). Its logs go to `work / "logs"`.

    One verifier judges every candidate of a run, so one is shared here by the calls on the
    same task (its files unchanged), backend and `without` within a test module (closed by
    conftest.py's fixture at the module's end): a candidate is judged as in a real run, where
    the ones before it ran in the same pool, and its verdict must not depend on them. `fresh`
    (or a backend object of the test's own) builds one for this call, under `work`, closed
    before returning (for a test that looks at what a verifier leaves behind)."""
    opened = backend_or_skip(backend) if isinstance(backend, str) else backend
    if fresh or not isinstance(backend, str):
        verifier = _verifier(task_dir, opened, work, without)
        try:
            return verifier.verify(patch, log_dir=work / "logs")
        finally:
            verifier.close()
    key = (str(task_dir.resolve()), _digest(task_dir), backend, without)
    verifier = _SHARED.pop(key, None)
    if verifier is None:
        verifier = _verifier(task_dir, opened, Path(tempfile.mkdtemp(prefix="ooda-adv-")), without)
    try:
        verdict = verifier.verify(patch, log_dir=work / "logs")
    except BaseException:
        _close(verifier)
        raise
    _SHARED[key] = verifier  # the most recently used last
    while len(_SHARED) > _KEEP:
        _close(_SHARED.pop(next(iter(_SHARED))))
    return verdict


_SHARED: dict[tuple[str, str, str, tuple[str, ...]], TaskVerifier] = {}
_KEEP = 4  # verifiers kept open (each holds a pool of up to two sandboxes)


def _verifier(
    task_dir: Path, backend: SandboxBackend, work: Path, without: tuple[str, ...]
) -> TaskVerifier:
    verifier = TaskVerifier(load_task(task_dir), backend, work)
    verifier.verifiers = [v for v in verifier.verifiers if v.name not in without]
    return verifier


def _digest(task_dir: Path) -> str:
    """Of every file of the task directory (a test may change the task between calls)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in task_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(task_dir)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _close(verifier: TaskVerifier) -> None:
    try:
        verifier.close()
    finally:
        shutil.rmtree(verifier.work_root, ignore_errors=True)


def close_shared() -> None:
    """Close the verifiers `verify` shared (conftest.py: at each test module's end)."""
    while _SHARED:
        _close(_SHARED.pop(next(iter(_SHARED))))


def assert_not_passed(verdict: Verdict, status: str, *words: str | tuple[str, ...]) -> None:
    """The verdict is `status` (never "passed") and its reason or feedback says each word (a
    tuple: one of its words, where which check stops a cheat depends on thread timing)."""
    text = f"{verdict.reason}\n{verdict.feedback}"
    assert verdict.status == status, f"{verdict.status}: {text}"
    for word in words:
        either = (word,) if isinstance(word, str) else word
        assert any(w.lower() in text.lower() for w in either), f"{word!r} not in: {text}"


def ooda(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """The real CLI as a user runs it (no OPENAI_* variables unless given in `env`)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(
        [sys.executable, "-m", "ooda.agent.cli", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def skip_unless_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (mounts, the Docker daemon)")
