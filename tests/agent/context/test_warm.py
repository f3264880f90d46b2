"""Issue 40 #13: a large repository's context index is built in a process of its own while the
run checks the unpatched code, so that the first prompt finds it in the cache."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ooda.agent.context import warm
from ooda.agent.context.choose import MAX_WHOLE_FILES


def many_modules(root: Path, count: int) -> Path:
    for k in range(count):
        folder = root / "pkg" / f"sub{k // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{k}.py").write_text(f"def value_{k}(x):\n    return x + {k}\n")
    return root


def test_the_index_built_ahead_is_the_one_the_prompt_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ooda.agent.context import index as index_module

    repo = many_modules(tmp_path / "repo", MAX_WHOLE_FILES + 1)
    child = warm.start(repo)
    assert child is not None
    warm.finish(child, 120)
    assert child.returncode == 0

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("built again: the child's index was not in the cache")

    monkeypatch.setattr(index_module, "_build", no_build)
    assert "value_7" in index_module.load_index(repo).by_name


def test_a_repository_shown_whole_needs_no_index(tmp_path: Path) -> None:
    assert warm.start(many_modules(tmp_path / "small", 3)) is None


def test_a_run_warms_the_index_once_from_its_set_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not for a source that asks no model (gold): it has no prompt. The set-up starts it
    (before the endpoint check); the base check's start finds it started."""
    from ooda.agent.app.session import RunSession

    started: list[Path] = []
    monkeypatch.setattr(warm, "start", lambda repo, task: started.append(repo) or repo)
    for asks in (True, False):
        run = SimpleNamespace(_base_started=[], _warming=None, stack=SimpleNamespace(
            callback=lambda *a: None), kind=SimpleNamespace(asks_endpoint=asks),
            task=SimpleNamespace(repo=tmp_path / str(asks)))
        RunSession._warm_index(run)  # type: ignore[arg-type]  # the set-up starts it
        run._warm_index = lambda run=run: RunSession._warm_index(run)  # type: ignore[misc]
        assert RunSession.base_started(run, "verifier") == "verifier"  # type: ignore[arg-type]
    assert started == [tmp_path / "True"]


def test_a_run_that_learns_its_failing_tests_checks_the_base_beside_the_endpoint(
        median: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run given only a test command learns its failing tests from the unpatched code's run:
    that run starts as soon as the sandbox is open, not once the endpoint has answered (the
    model clients open here only after it started)."""
    import dataclasses
    import threading

    from ooda.agent.app.run import RunOptions, run_task
    from ooda.agent.app.session import RunSession
    from ooda.agent.sandbox.local import LocalBackend
    from ooda.agent.verify import prepare
    from ooda.tasks.loader import load_task

    base_started = threading.Event()
    base_facts, open_answerers = prepare._base_facts, RunSession._open_answerers

    def noted(*args: Any, **kwargs: Any) -> Any:
        base_started.set()
        return base_facts(*args, **kwargs)

    def checked_after_the_base_started(self: RunSession) -> Any:
        assert base_started.wait(20), "the base run waited for the endpoint check"
        return open_answerers(self)

    monkeypatch.setattr(prepare, "_base_facts", noted)
    monkeypatch.setattr(RunSession, "_open_answerers", checked_after_the_base_started)
    task = dataclasses.replace(load_task(median), fail_to_pass=[], pass_to_pass=[],
                               test_cmd="python -m pytest -q")
    result, _ = run_task(task, RunOptions.of(model="gold", runs_dir=tmp_path / "runs"),
                         backend=LocalBackend(), show_progress=False)
    assert result.status == "passed"
