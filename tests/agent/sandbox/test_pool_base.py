"""SandboxPool(base=...): a released slot is emptied and refilled with the base in the
background, so the next candidate's workspace holds the base (and nothing a previous candidate
left) before `fill` runs; a slot never holds half a base (a fake resettable backend: no engine)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sandbox_helpers import RecordingBackend, RecordingBox

from ooda.agent.sandbox.pool import SandboxPool


class Base:
    """Copies a one-file 'repository'; counts calls and the threads they ran on."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls = 0
        self.threads: list[str] = []
        self.fail_after = fail_after

    def __call__(self, workspace: Path) -> None:
        assert list(workspace.iterdir()) == []  # always an empty workspace
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        (workspace / "module.py").write_text("base")
        if self.fail_after is not None and self.calls > self.fail_after:
            raise OSError("no space left on device")


def listing(workspace: Path) -> list[str]:
    return sorted(p.name for p in workspace.iterdir())


def candidate(workspace: Path) -> list[str]:
    """A fill: sees the base, adds the candidate's file."""
    seen = listing(workspace)
    (workspace / "patch.txt").write_text("candidate")
    return seen


def test_the_next_workspace_holds_the_base_refilled_in_the_background(tmp_path: Path) -> None:
    base = Base()
    backend = RecordingBackend()
    pool = SandboxPool(backend, tmp_path / "slots", size=1, base=base)  # type: ignore[arg-type]
    try:
        box, seen = pool.acquire(candidate)
        assert seen == ["module.py"] and base.calls == 1
        (box.workspace / "module.py").write_text("changed by the candidate")
        (box.workspace / "left.txt").write_text("left by the candidate")
        pool.release(box)  # type: ignore[arg-type]
        pool.settle()
        assert base.calls == 2 and base.threads[-1] == "ooda-pool-recycle"
        again, seen = pool.acquire(candidate)
        assert again is box and seen == ["module.py"] and base.calls == 2  # no copy on acquire
        assert (box.workspace / "module.py").read_text() == "base"
        pool.release(again)  # type: ignore[arg-type]
    finally:
        pool.close()
    assert box.closed and list((tmp_path / "slots").iterdir()) == []


def test_warm_sandboxes_get_the_base_before_they_are_handed_out(tmp_path: Path) -> None:
    base = Base()
    backend = RecordingBackend()
    pool = SandboxPool(backend, tmp_path / "slots", size=2, base=base)  # type: ignore[arg-type]
    try:
        pool.warm()
        first, seen_first = pool.acquire(candidate)
        second, seen_second = pool.acquire(candidate)
        assert seen_first == seen_second == ["module.py"]
        assert base.calls == 2 and first.workspace != second.workspace
        # refresh: emptied and based again, synchronously, before the fill
        (first.workspace / "left.txt").write_text("x")
        fresh, seen = pool.refresh(first, candidate)
        assert fresh is first and seen == ["module.py"] and base.calls == 3
        pool.release(fresh)  # type: ignore[arg-type]
        pool.release(second)  # type: ignore[arg-type]
    finally:
        pool.close()


def test_an_adopted_sandbox_gets_the_base_in_the_background(tmp_path: Path) -> None:
    """A sandbox started elsewhere (the daemon's warm container) gets the base right away, in
    the background, not when the first candidate takes it."""
    base = Base()
    pool = SandboxPool(RecordingBackend(), tmp_path / "slots", size=2, base=base)  # type: ignore[arg-type]
    slot = tmp_path / "adopted"
    slot.mkdir()
    adopted = RecordingBox(slot)
    try:
        pool.adopt(adopted)  # type: ignore[arg-type]
        pool.settle()
        assert base.calls == 1 and base.threads == ["ooda-pool-adopt"]
        box, seen = pool.acquire(candidate)
        assert box is adopted and seen == ["module.py"] and base.calls == 1
        pool.release(box)  # type: ignore[arg-type]
    finally:
        pool.close()
    assert adopted.closed and not slot.exists()


def test_a_failed_base_leaves_no_half_copy_and_the_sandbox_is_replaced(tmp_path: Path) -> None:
    base = Base(fail_after=1)
    backend = RecordingBackend()
    pool = SandboxPool(backend, tmp_path / "slots", size=1, base=base)  # type: ignore[arg-type]
    try:
        box, _ = pool.acquire(candidate)
        pool.release(box)  # type: ignore[arg-type]
        pool.settle()
        assert box.closed  # the recycle's copy failed: discarded, not kept with half a base
        with pytest.raises(OSError, match="no space"):
            pool.acquire(candidate)  # the replacement's copy fails too: said, not hidden
        pool.settle()
        assert not any(list(p.iterdir()) for p in (tmp_path / "slots").iterdir() if p.is_dir())
    finally:
        pool.close()


def test_without_base_fill_gets_an_empty_workspace(tmp_path: Path) -> None:
    backend = RecordingBackend()
    pool = SandboxPool(backend, tmp_path / "slots", size=1)  # type: ignore[arg-type]
    try:
        box, seen = pool.acquire(candidate)
        assert seen == []
        pool.release(box)  # type: ignore[arg-type]
    finally:
        pool.close()
