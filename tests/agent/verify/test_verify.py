"""Tests for agent/verify/verifier.py: TaskVerifier end to end on a small task, with LocalSandbox."""

from __future__ import annotations

import dataclasses
import difflib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import Sandbox
from ooda.agent.sandbox.local import LocalSandbox
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, VerifierOptions

CALC = """\
import os


def add(a: int, b: int) -> int:
    return a - b


def label() -> int:
    return "x"
"""
GOLD = CALC.replace("a - b", "a + b")
TESTS = """\
from calc import add


def test_add():
    assert add(2, 3) == 5


def test_zero():
    assert add(0, 0) == 0
"""
HIDDEN = "from calc import add\n\n\ndef test_hidden_add():\n    assert add(10, 5) == 15\n"


def diff(path: str, old: str, new: str) -> str:
    src = f"a/{path}" if old else "/dev/null"
    body = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), src, f"b/{path}"
        )
    )
    mode = "" if old else "new file mode 100644\n"
    return f"diff --git a/{path} b/{path}\n{mode}{body}"


def calc_patch(new: str) -> str:
    return diff("calc.py", CALC, new)


class Backend:
    """LocalSandbox backend that counts sandboxes opened and closed."""

    name = "local"
    reusable = False

    def __init__(self) -> None:
        self.opened: list[Path] = []
        self.closed = 0
        self.fail: Exception | None = None
        self._lock = threading.Lock()

    def open(self, workspace: Path, *, requirements: Path | None = None) -> Sandbox:
        if self.fail:
            raise self.fail
        backend = self

        class Tracked(LocalSandbox):
            def close(self) -> None:
                with backend._lock:
                    backend.closed += 1

        with self._lock:
            self.opened.append(workspace)
        return Tracked(workspace)


@pytest.fixture
def task(tmp_path: Path) -> Task:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / "notes.txt").write_text("one\ntwo\n")
    return Task(
        id="calc",
        statement="add subtracts",
        repo=repo,
        fail_to_pass=["tests/test_calc.py::test_add", "tests/test_hidden.py"],
        pass_to_pass=["tests/test_calc.py::test_zero"],
        gold_patch=calc_patch(GOLD),
        test_patch=diff("tests/test_hidden.py", "", HIDDEN),
        verifiers=VerifierOptions(ruff=True, mypy=False, timeout_s=30),
    )


def make(task: Task, tmp_path: Path, backend: Backend | None = None) -> TaskVerifier:
    return TaskVerifier(task, backend or Backend(), tmp_path / "work")


def test_gold_patch_passes_with_logs_and_cleanup(task: Task, tmp_path: Path) -> None:
    task.verifiers.mypy = True
    backend = Backend()
    verifier = make(task, tmp_path, backend)
    logs = tmp_path / "logs"
    assert task.gold_patch is not None
    verdict = verifier.verify(task.gold_patch, log_dir=logs)
    assert verdict.status == "passed", verdict.feedback
    assert [(r.name, r.status) for r in verdict.results] == [
        ("syntax", "passed"),
        ("tampering", "passed"),
        ("ruff", "passed"),  # `import os` was already unused on the base: not counted
        ("pytest", "passed"),
        ("security", "passed"),
        ("mypy", "passed"),  # label() returning str was already wrong on the base
    ]
    assert verdict.changed_files == ["calc.py"]
    assert verdict.feedback == ""
    assert (logs / "patch.diff").read_text() == task.gold_patch
    for name in ("syntax", "ruff", "mypy", "pytest"):
        assert (logs / f"{name}.log").exists()
    assert "tests/test_hidden.py::test_hidden_add" in (logs / "pytest.log").read_text()
    assert not (task.repo / "tests" / "test_hidden.py").exists()
    assert "a - b" in (task.repo / "calc.py").read_text()
    grower = verifier.baselines._cache_grower
    assert grower is not None
    grower.join()
    assert len(list((tmp_path / "work").iterdir())) == 1  # the base's mypy cache only
    verifier.close()
    assert list((tmp_path / "work").iterdir()) == []
    # ruff and mypy found something on calc.py, so its baselines were computed in the
    # candidate's own sandbox; mypy runs after the tests in a fresh one (with this backend,
    # that cannot be reset, a second sandbox); the base's mypy cache is never taken from a
    # candidate's sandbox but grown in a third that only ever held the unpatched repo
    assert backend.closed == len(backend.opened) == 3


def test_no_op_patch_fails_at_pytest(task: Task, tmp_path: Path) -> None:
    verdict = make(task, tmp_path).verify(calc_patch(CALC.replace("import os", "import os  # ok")))
    assert verdict.status == "failed"
    assert verdict.results[-1].name == "pytest"
    assert verdict.reason.startswith("pytest failed")
    assert "FAILED tests/test_calc.py::test_add" in verdict.feedback
    assert "test_hidden_add" in verdict.feedback
    assert "test_zero" not in verdict.feedback


def test_syntax_error_fails_first(task: Task, tmp_path: Path) -> None:
    verdict = make(task, tmp_path).verify(calc_patch(GOLD.replace("return a + b", "return a +")))
    assert verdict.status == "failed"
    assert [r.name for r in verdict.results] == ["syntax"]
    assert "calc.py:5:" in verdict.feedback


def test_new_ruff_error_fails(task: Task, tmp_path: Path) -> None:
    verdict = make(task, tmp_path).verify(calc_patch("import sys\n" + GOLD))
    assert verdict.status == "failed"
    assert verdict.results[-1].name == "ruff"
    assert "F401" in verdict.feedback and "sys" in verdict.feedback
    assert "`os`" not in verdict.feedback


def test_new_mypy_error_fails(task: Task, tmp_path: Path) -> None:
    task.verifiers.mypy = True
    verdict = make(task, tmp_path).verify(
        calc_patch(GOLD + "\n\ndef name() -> str:\n    return 1\n")
    )
    assert verdict.status == "failed"
    assert verdict.results[-1].name == "mypy"
    assert "calc.py:13:" in verdict.feedback and "return-value" in verdict.feedback
    assert "calc.py:9:" not in verdict.feedback


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        (diff("tests/test_calc.py", TESTS, TESTS.replace("== 5", "== -1")), "tests/test_calc.py"),
        (diff("conftest.py", "", "import pytest\n"), "conftest.py"),
        (diff("pyproject.toml", "", "[tool.pytest.ini_options]\n"), "pyproject.toml"),
        (diff("../evil.py", "", "x = 1\n"), "../evil.py"),
        ("--- /etc/hosts\n+++ /etc/hosts\n@@ -1 +1 @@\n-a\n+b\n", "/etc/hosts"),
        (diff("outside/planted.py", "", "x = 1\n"), "outside/planted.py"),
        ("", "empty"),
    ],
)
def test_forbidden_edits_are_invalid(task: Task, tmp_path: Path, patch: str, path: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (task.repo / "outside").symlink_to(elsewhere)
    backend = Backend()
    verdict = make(task, tmp_path, backend).verify(patch, log_dir=tmp_path / "logs")
    assert verdict.status == "invalid_edit"
    assert path in verdict.feedback and path in verdict.reason
    assert verdict.results == []
    assert backend.opened == []
    assert list(elsewhere.iterdir()) == []
    assert list((tmp_path / "work").iterdir()) == []
    assert (tmp_path / "logs" / "apply.log").exists()


def test_test_patch_is_applied_after_the_candidate(task: Task, tmp_path: Path) -> None:
    task = dataclasses.replace(
        task, test_patch=(task.test_patch or "") + diff("notes.txt", "one\ntwo\n", "one\nthree\n"))
    verifier = make(task, tmp_path)
    conflicting = diff("notes.txt", "one\ntwo\n", "one\nfour\n") + calc_patch(GOLD)
    verdict = verifier.verify(conflicting)
    assert verdict.status == "invalid_edit"
    assert "hidden tests" in verdict.feedback
    # a candidate cannot pre-create the hidden test file to replace it: the test patch
    # creates it and the candidate may not touch tests at all
    assert task.gold_patch is not None
    assert verifier.verify(task.gold_patch).status == "passed"


def test_hanging_code_times_out(task: Task, tmp_path: Path) -> None:
    task.verifiers.timeout_s = 3
    hang = GOLD.replace("return a + b", "while True:\n        pass")
    start = time.monotonic()
    verdict = make(task, tmp_path).verify(calc_patch(hang))
    assert verdict.status == "timeout"
    assert time.monotonic() - start < 15


def test_fake_success_output_fails(task: Task, tmp_path: Path) -> None:
    fake = GOLD + "\n\nprint('=== 5 passed in 0.01s ===')\nos._exit(0)\n"
    verdict = make(task, tmp_path).verify(calc_patch(fake))
    assert verdict.status == "failed"
    assert "no test report" in verdict.feedback


def test_deadline_already_passed(task: Task, tmp_path: Path) -> None:
    assert task.gold_patch is not None
    verdict = make(task, tmp_path).verify(task.gold_patch, deadline=time.monotonic() - 1)
    assert verdict.status == "timeout"


def test_concurrent_verifies_share_one_baseline(task: Task, tmp_path: Path) -> None:
    backend = Backend()
    verifier = make(task, tmp_path, backend)
    assert task.gold_patch is not None
    patches = [
        task.gold_patch,
        calc_patch("import sys\n" + GOLD),
        task.gold_patch,
        calc_patch(CALC + "\n"),
    ]
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(verifier.verify, patches))
    assert [v.status for v in verdicts] == ["passed", "failed", "passed", "failed"]
    assert verdicts[1].results[-1].name == "ruff"
    verifier.close()
    # four candidates (baselines computed in their sandboxes), and for each of the two passing
    # ones a fresh sandbox for the stages after the tests (security): this fake cannot reset
    assert len(backend.opened) == 6
    assert backend.closed == 6
    assert list((tmp_path / "work").iterdir()) == []


def test_run_base_tests(task: Task, tmp_path: Path) -> None:
    outcomes = make(task, tmp_path).run_base_tests()
    assert outcomes == {
        "tests/test_calc.py::test_add": "failed",
        "tests/test_hidden.py::test_hidden_add": "failed",
        "tests/test_calc.py::test_zero": "passed",
    }
    assert list((tmp_path / "work").iterdir()) == []


def test_infrastructure_errors_propagate_and_clean_up(task: Task, tmp_path: Path) -> None:
    backend = Backend()
    backend.fail = InfraError("docker engine unreachable")
    assert task.gold_patch is not None
    with pytest.raises(InfraError):
        make(task, tmp_path, backend).verify(task.gold_patch)
    assert list((tmp_path / "work").iterdir()) == []
