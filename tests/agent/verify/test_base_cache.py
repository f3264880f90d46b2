"""The base check's facts kept per base (agent/verify/basecache.py): a second plan of the same
unpatched code reads them instead of running the tests again; any change to a file of the
repository, to the tests or to where they run makes another key. A real pytest run in a
local sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.verify import basecache
from ooda.agent.verify.plan import BaseFacts, TaskPlan, draft_plan
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, VerifierOptions


@pytest.fixture(autouse=True)
def cache_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OODA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OODA_BASE_CACHE", "1")  # the test suite turns it off elsewhere


def make_task(root: Path, **lists: list[str]) -> Task:
    repo = root / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_zero():\n    assert add(0, 0) == 0\n")
    return Task(id="calc", statement="add adds", repo=repo,
                verifiers=VerifierOptions(ruff=False, mypy=False, timeout_s=60),
                test_cmd=None if lists else "pytest tests", **lists)


def counted_plan(task: Task, work: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TaskPlan, int]:
    runs: list[object] = []
    original = TaskVerifier.run_base

    def run_base(self: TaskVerifier, *args: object, **kwargs: object) -> object:
        runs.append(args)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(TaskVerifier, "run_base", run_base)
    plan, verifier = make_plan(task, lambda p: TaskVerifier(p, LocalBackend(), work))
    verifier.close()
    return plan, len(runs)


def test_the_same_base_is_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = make_task(tmp_path)
    first, ran = counted_plan(task, tmp_path / "w1", monkeypatch)
    assert ran == 1 and first.tests.fail_to_pass == ("tests/test_calc.py::test_add",)
    again, ran = counted_plan(task, tmp_path / "w2", monkeypatch)
    assert ran == 0
    assert again.base == first.base and again.tests == first.tests
    (task.repo / "calc.py").write_text("def add(a, b):\n    return a - b - 1\n")
    changed, ran = counted_plan(task, tmp_path / "w3", monkeypatch)
    assert ran == 1  # a changed file is another base: checked again
    assert changed.tests.fail_to_pass == ("tests/test_calc.py::test_add",
                                          "tests/test_calc.py::test_zero")


def test_the_key_follows_what_the_facts_depend_on(tmp_path: Path) -> None:
    task = make_task(tmp_path / "a")
    same = make_task(tmp_path / "b")  # the same content elsewhere: the same base
    key = basecache.base_key(draft_plan(task), "docker")
    assert key is not None
    assert basecache.base_key(draft_plan(same), "docker") == key
    assert basecache.base_key(draft_plan(task), "bwrap") != key
    listed = make_task(tmp_path / "c", fail_to_pass=["tests/test_calc.py::test_add"])
    assert basecache.base_key(draft_plan(listed), "docker") != key
    (same.repo / "tests" / "test_calc.py").chmod(0o755)
    assert basecache.base_key(draft_plan(same), "docker") != key
    (same.repo / "tests" / "test_calc.py").chmod(0o644)
    (same.repo / "__pycache__").mkdir()  # what a workspace leaves out changes nothing
    (same.repo / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"x")
    assert basecache.base_key(draft_plan(same), "docker") == key


def test_only_complete_runs_are_kept_and_the_cache_can_be_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = BaseFacts(outcomes={"t::a": "failed"}, messages={"t::a": "E assert 1 == 2"})
    basecache.store("k1", facts)
    assert basecache.load("k1") == facts
    basecache.store("k2", BaseFacts(timed_out=True, error="the tests did not finish"))
    basecache.store("k3", BaseFacts(error="pytest left no report"))
    assert basecache.load("k2") is None and basecache.load("k3") is None
    (basecache.cache_dir() / "k4.json").write_text("{not json")
    assert basecache.load("k4") is None
    monkeypatch.setenv("OODA_BASE_CACHE", "0")
    assert basecache.base_key(draft_plan(make_task(tmp_path)), "docker") is None
