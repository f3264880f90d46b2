"""Issue 40 #13: a large repository's context index is built in a process of its own while the
run checks the unpatched code, so that the first prompt finds it in the cache."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

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
