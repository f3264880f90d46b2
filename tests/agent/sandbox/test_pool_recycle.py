"""SandboxPool.release: the reset and the emptying of the slot happen in the background, and the
sandbox is handed out again only once they are done (a fake resettable backend: no engine)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from ooda.agent.sandbox.pool import SandboxPool


class SlowResetBox:
    def __init__(self, workspace: Path, gate: threading.Event) -> None:
        self.workspace = workspace
        self.gate = gate
        self.resets = 0
        self.closed = False

    def reset(self) -> bool:
        self.gate.wait(10)
        self.resets += 1
        return True

    def lend(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class Backend:
    reusable = True

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.opened: list[SlowResetBox] = []

    def open(self, workspace: Path, requirements: Any = None) -> SlowResetBox:
        box = SlowResetBox(workspace, self.gate)
        self.opened.append(box)
        return box


def fill(workspace: Path) -> None:
    (workspace / "given.txt").write_text("fresh")


def test_release_returns_before_the_reset_and_the_next_caller_waits_for_it(
    tmp_path: Path,
) -> None:
    backend = Backend()
    pool = SandboxPool(backend, tmp_path / "slots", size=2)  # type: ignore[arg-type]
    try:
        pool.acquire(fill)
        box = backend.opened[0]
        (box.workspace / "left.txt").write_text("by the candidate")
        pool.release(box)  # type: ignore[arg-type]
        assert box.resets == 0  # returned while the reset is still blocked on the gate
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(pool.acquire(fill)[0]))
        waiter.start()
        time.sleep(0.3)
        assert not got  # waiting for the one on its way back, not opening a second one
        backend.gate.set()
        waiter.join(10)
        assert got == [box] and len(backend.opened) == 1 and box.resets == 1
        assert sorted(p.name for p in box.workspace.iterdir()) == ["given.txt"]
        pool.release(got[0])
    finally:
        pool.close()
    assert box.closed and list((tmp_path / "slots").iterdir()) == []


def test_close_waits_for_a_sandbox_being_recycled_and_removes_it(tmp_path: Path) -> None:
    backend = Backend()
    pool = SandboxPool(backend, tmp_path / "slots", size=1)  # type: ignore[arg-type]
    pool.acquire(fill)
    box = backend.opened[0]
    pool.release(box)  # type: ignore[arg-type]
    threading.Timer(0.2, backend.gate.set).start()
    pool.close()
    assert box.closed and list((tmp_path / "slots").iterdir()) == []


def test_a_sandbox_still_resetting_when_the_pool_closes_gets_no_new_base(tmp_path: Path) -> None:
    """The pool closed while a released sandbox was on its way back: it is discarded without
    its slot being emptied and given the base again (closing it ends what runs in it, and
    its slot goes)."""
    backend = Backend()
    copies: list[Path] = []

    def base(workspace: Path) -> None:
        copies.append(workspace)
        (workspace / "base.txt").write_text("base")

    pool = SandboxPool(backend, tmp_path / "slots", size=1, base=base)  # type: ignore[arg-type]
    pool.acquire(fill)
    box = backend.opened[0]
    assert len(copies) == 1
    pool.release(box)  # type: ignore[arg-type]  # its reset waits for the gate
    threading.Timer(0.3, backend.gate.set).start()
    pool.close()  # meanwhile
    assert box.resets == 1 and box.closed
    assert len(copies) == 1  # no second copy of the base into a slot about to go
    assert list((tmp_path / "slots").iterdir()) == []
