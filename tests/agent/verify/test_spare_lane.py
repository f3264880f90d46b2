"""The after-tests stages beside the tests (agent/verify/spare.py), on the real Docker backend:
with a second sandbox idle, security and mypy (and ruff, when the tests come first: only the
verdict matters) run there on a fresh copy while the tests run,
and the verdict is the one the stages in their one order give (the first that does not pass
decides); with none idle, or another candidate under way, they run after the tests as before.
Also SandboxPool.try_acquire, with a fake resettable backend."""

from __future__ import annotations

import difflib
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import RecordingBackend, backend_or_skip

from ooda.agent.contracts.protocols import VerifierResult
from ooda.agent.sandbox.pool import SandboxPool
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, VerifierOptions

CALC = "def add(a: int, b: int) -> int:\n    return a - b\n"
GOLD = CALC.replace("a - b", "a + b")
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TYPE_ERROR = "\n\ndef name() -> str:\n    return 1\n"


def calc_patch(new: str) -> str:
    body = "".join(difflib.unified_diff(CALC.splitlines(True), new.splitlines(True),
                                        "a/calc.py", "b/calc.py"))
    return f"diff --git a/calc.py b/calc.py\n{body}"


@pytest.fixture
def verifier(tmp_path: Path) -> Any:
    made = _verifier(tmp_path, TESTS)
    yield made
    made.close()


def _verifier(tmp_path: Path, tests: str) -> Any:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(tests)
    task = Task(id="calc", statement="s", repo=repo, fail_to_pass=["tests/test_calc.py"],
                verifiers=VerifierOptions(ruff=True, mypy=True, timeout_s=60))
    made = TaskVerifier(task, backend_or_skip("docker"), tmp_path / "work", concurrency=2)
    lanes: list[bool] = []
    taken = made.pool.try_acquire

    def spy(fill: Any) -> Any:
        got = taken(fill)
        lanes.append(got is not None)
        return got

    made.pool.try_acquire = spy  # type: ignore[method-assign]
    made.lanes = lanes  # type: ignore[attr-defined]
    made.warm()
    return made


def _both_idle(pool: SandboxPool) -> None:
    deadline = time.monotonic() + 60
    while len(pool._idle) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)


def test_late_stages_beside_the_tests_give_the_same_verdicts(verifier: Any) -> None:
    _both_idle(verifier.pool)
    verdict = verifier.verify(calc_patch(GOLD))
    assert [(r.name, r.status) for r in verdict.results] == [
        ("syntax", "passed"), ("tampering", "passed"), ("ruff", "passed"),
        ("pytest", "passed"), ("security", "passed"), ("mypy", "passed"),
    ]
    assert verifier.lanes == [True]
    # tests pass, mypy does not: mypy decides, from the lane
    _both_idle(verifier.pool)
    verdict = verifier.verify(calc_patch(GOLD + TYPE_ERROR))
    assert verdict.status == "failed" and verdict.results[-1].name == "mypy", verdict.reason
    assert "return-value" in verdict.feedback and verifier.lanes == [True, True]
    # tests fail: the lane's mypy finding is dropped, the tests decide as before
    _both_idle(verifier.pool)
    verdict = verifier.verify(calc_patch(CALC + TYPE_ERROR))
    assert verdict.status == "failed" and verdict.results[-1].name == "pytest", verdict.reason
    assert "return-value" not in verdict.feedback and verifier.lanes == [True, True, True]
    # the syntax stage fails: no lane is started at all
    verdict = verifier.verify(calc_patch(GOLD.replace("a + b", "a +")))
    assert [r.name for r in verdict.results] == ["syntax"] and len(verifier.lanes) == 3
    # only the verdict matters: the tests first, ruff after them, in the lane with mypy
    _both_idle(verifier.pool)
    verdict = verifier.verify(calc_patch("import os\n" + GOLD), verdict_only=True)
    assert [r.name for r in verdict.results][:4] == ["syntax", "tampering", "pytest", "ruff"]
    assert verdict.status == "failed" and verdict.reason.startswith("ruff"), verdict.reason
    assert verifier.lanes == [True, True, True, True]
    # the tests failed while the lane's mypy ran: its command is interrupted, so that the
    # sandbox goes back to the pool for the candidates waiting, not once mypy finished
    verifier.verifiers = [SlowMypy() if v.name == "mypy" else v for v in verifier.verifiers]
    _both_idle(verifier.pool)
    verdict = verifier.verify(calc_patch(CALC + "\n"), verdict_only=True)
    assert verdict.status == "failed" and verdict.results[-1].name == "pytest", verdict.reason
    assert verifier.lanes == [True] * 5
    deadline = time.monotonic() + 20  # (the sleep would hold it 30 s)
    while len(verifier.pool._idle) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(verifier.pool._idle) == 2


class SlowMypy:
    name = "mypy"

    def verify(self, sandbox: Any, check: Any) -> VerifierResult:
        sandbox.run(["sleep", "30"], timeout_s=60)
        return VerifierResult(self.name, "passed", 0.0, "", "")


def test_without_an_idle_sandbox_the_late_stages_follow_the_tests(verifier: Any) -> None:
    _both_idle(verifier.pool)
    other, _ = verifier.pool.acquire(lambda workspace: None)  # another candidate holds one
    try:
        verdict = verifier.verify(calc_patch(GOLD + TYPE_ERROR))
    finally:
        verifier.pool.release(other)
    assert verdict.status == "failed" and verdict.results[-1].name == "mypy", verdict.reason
    assert verifier.lanes == [False]



@pytest.mark.parametrize("lane", [True, False])
def test_a_candidate_gets_a_mypy_cache_only_where_mypy_runs(tmp_path: Path, lane: bool) -> None:
    """mypy never runs in the workspace the tests run in (the pytest stage empties .ooda/,
    where the cache lives, anyway): a candidate's copy of the base's mypy cache goes only into
    the fresh copy for the after-tests stages, on the lane or after the tests."""
    verifier = _verifier(tmp_path, TESTS)
    copies: list[Path] = []
    filling = threading.local()
    fill, give = verifier._fill, verifier.baselines.give_mypy_cache

    def spy_fill(workspace: Path, patch: str, **kwargs: Any) -> Any:
        filling.on = True
        try:
            return fill(workspace, patch, **kwargs)
        finally:
            filling.on = False

    def spy_give(workspace: Path) -> None:
        if getattr(filling, "on", False):  # (the base's own runs get theirs too)
            copies.append(workspace)
        give(workspace)

    verifier._fill, verifier.baselines.give_mypy_cache = spy_fill, spy_give
    try:
        if not lane:
            verifier._alone = lambda: False  # the late stages follow the tests
            _both_idle(verifier.pool)
            verdict = verifier.verify(calc_patch(CALC + TYPE_ERROR))  # the tests fail
            assert verdict.results[-1].name == "pytest" and copies == []
        _both_idle(verifier.pool)
        verdict = verifier.verify(calc_patch(GOLD + TYPE_ERROR))
        assert [(r.name, r.status) for r in verdict.results][3:] == [
            ("pytest", "passed"), ("security", "passed"), ("mypy", "failed")], verdict.reason
        assert "return-value" in verdict.feedback  # from a warm copy of the base's cache
        assert len(copies) == 1 and verifier.lanes == ([True] if lane else [])
    finally:
        verifier.close()


# --------------------------------------------------------------------------- try_acquire


def test_try_acquire_takes_only_an_idle_sandbox_nobody_waits_for(tmp_path: Path) -> None:
    def fill(workspace: Path) -> str:
        (workspace / "given.txt").write_text("x")
        return "filled"

    pool = SandboxPool(RecordingBackend(), tmp_path / "slots", size=2)  # type: ignore[arg-type]
    try:
        assert pool.try_acquire(fill) is None  # none started yet: it does not open one
        first, _ = pool.acquire(fill)
        assert pool.try_acquire(fill) is None
        pool.release(first)
        pool.settle()
        got = pool.try_acquire(fill)
        assert got is not None and got[1] == "filled"
        assert (got[0].workspace / "given.txt").exists()
        pool.release(got[0])
    finally:
        pool.close()
    assert pool.try_acquire(fill) is None  # closed
