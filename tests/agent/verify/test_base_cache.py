"""The base check's facts kept per base (agent/verify/basecache.py): a second plan of the same
unpatched code reads them instead of running the tests again (and says so); any change to a
file of the repository, to the tests, to the sandbox's limits or to what they run on makes
another key; a runtime ooda cannot name is never cached. A real pytest run in a local
sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.sandbox import image
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.verify import basecache
from ooda.agent.verify.base import plan_line
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


class OtherBackend(LocalBackend):
    """A backend of a kind the cache cannot name the runtime of."""

    name = "other"


def counted_plan(task: Task, work: Path, monkeypatch: pytest.MonkeyPatch,
                 backend: LocalBackend | None = None) -> tuple[TaskPlan, int]:
    runs: list[object] = []
    original = TaskVerifier.run_base

    def run_base(self: TaskVerifier, *args: object, **kwargs: object) -> object:
        runs.append(args)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(TaskVerifier, "run_base", run_base)
    plan, verifier = make_plan(task, lambda p: TaskVerifier(p, backend or LocalBackend(), work))
    verifier.close()
    return plan, len(runs)


def test_the_same_base_is_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = make_task(tmp_path)
    first, ran = counted_plan(task, tmp_path / "w1", monkeypatch)
    assert ran == 1 and first.tests.fail_to_pass == ("tests/test_calc.py::test_add",)
    assert first.base is not None and first.base.kept_from is None
    again, ran = counted_plan(task, tmp_path / "w2", monkeypatch)
    assert ran == 0
    assert again.base == first.base and again.tests == first.tests
    assert again.base is not None and again.base.kept_from is not None
    assert f"as checked at {again.base.kept_from}" in (plan_line(again) or "")
    assert "as checked at" not in (plan_line(first) or "")
    _, ran = counted_plan(task, tmp_path / "w2b", monkeypatch, OtherBackend())
    assert ran == 1  # what it runs on has no name: never read from the cache
    (task.repo / "calc.py").write_text("def add(a, b):\n    return a - b - 1\n")
    changed, ran = counted_plan(task, tmp_path / "w3", monkeypatch)
    assert ran == 1  # a changed file is another base: checked again
    assert changed.tests.fail_to_pass == ("tests/test_calc.py::test_add",
                                          "tests/test_calc.py::test_zero")


def test_the_key_follows_what_the_facts_depend_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = make_task(tmp_path / "a")
    same = make_task(tmp_path / "b")  # the same content elsewhere: the same base
    key = basecache.base_digest(draft_plan(task), "docker")
    assert key is not None
    assert basecache.base_digest(draft_plan(same), "docker") == key
    assert basecache.base_digest(draft_plan(task), "bwrap") != key
    listed = make_task(tmp_path / "c", fail_to_pass=["tests/test_calc.py::test_add"])
    assert basecache.base_digest(draft_plan(listed), "docker") != key
    (same.repo / "tests" / "test_calc.py").chmod(0o755)
    assert basecache.base_digest(draft_plan(same), "docker") != key
    (same.repo / "tests" / "test_calc.py").chmod(0o644)
    (same.repo / "__pycache__").mkdir()  # what a workspace leaves out changes nothing
    (same.repo / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"x")
    assert basecache.base_digest(draft_plan(same), "docker") == key
    monkeypatch.setenv("OODA_SANDBOX_MEMORY_MB", "512")  # the sandbox's limits
    assert basecache.base_digest(draft_plan(same), "docker") != key


def test_the_key_names_what_the_tests_run_on(tmp_path: Path) -> None:
    digest = basecache.base_digest(draft_plan(make_task(tmp_path)), "local")
    host = basecache.runtime(LocalBackend(), None)
    assert host is not None and host[0] == "host" and any("pytest==" in n for n in host)
    assert basecache.key(digest, host) != basecache.key(digest, [*host, "numpy==2.0"])
    assert basecache.runtime(OtherBackend(), None) is None
    assert basecache.key(digest, None) is None
    rootfs = tmp_path / "rootfs"  # built aside, then renamed into place with its marker
    rootfs.mkdir()
    (rootfs / image.MARKER).write_text("tag\n")
    built = basecache._directory(rootfs)
    assert built is not None and basecache._directory(rootfs) == built
    rebuilt = tmp_path / "rootfs.tmp"
    rebuilt.mkdir()
    (rebuilt / image.MARKER).write_text("tag\n")
    (rootfs / image.MARKER).unlink()
    rootfs.rmdir()
    rebuilt.rename(rootfs)
    assert basecache._directory(rootfs) not in (None, built)
    (rootfs / image.MARKER).unlink()  # not ready: no name
    assert basecache._directory(rootfs) is None


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
    assert basecache.base_digest(draft_plan(make_task(tmp_path)), "docker") is None
