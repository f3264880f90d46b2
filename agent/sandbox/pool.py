"""Warm sandboxes for one environment (backend + requirements), reused across candidates.

`acquire(fill)` hands out a sandbox whose workspace `fill` has just populated (a copy of the
repository with the candidate's patch); `release()` takes it back. With a backend whose
sandboxes can be reset (Docker: `reusable = True`, sandboxes with `reset()` and `lend()`), the
pool keeps up to `size` sandboxes alive, each bound to its own slot directory: `warm()` starts
them ahead of need (while the model is still generating), and between two candidates the
container is reset (no process left, empty /tmp, /dev/shm, IPC) and the slot emptied on the host,
so nothing a candidate leaves reaches the next one; a sandbox that cannot be reset is discarded
and replaced in the background. `release()` does that reset and emptying in the background (a
SWE-bench workspace is thousands of files: a second or more the verdict need not wait for); the
sandbox is handed out again only once it is done, and a caller waiting meanwhile waits for it.

A pool made with `base` (a function filling an empty workspace with what every candidate starts
from: the repository's copy) hands out workspaces already holding it; `fill` then adds to it.
The base goes into a slot right after the slot is emptied, in the same background step, so a
warm candidate does not wait for a copy of thousands of files; it is put there by this process
from the trusted repository while no process runs in the sandbox, exactly as `fill` would have
done on acquire. Other backends get a fresh directory and a fresh sandbox per candidate, both
removed on release. `close()` removes every sandbox and slot.

A pool made with `shared` too (agent/sandbox/overlay.py: the repository mounted once, read-only)
gives each sandbox it starts a copy-on-write workspace of it instead of a copy: the slot is an
overlay mounted before the sandbox opens on it, a released sandbox's workspace is restored from
what its candidate changed, and `fill`'s writes are handed to the sandbox user. Containers
started ahead of need are not adopted then (their workspace would need the copy).
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ooda.agent.contracts.protocols import Resettable, Sandbox, SandboxBackend
from ooda.agent.sandbox.overlay import SharedBase
from ooda.agent.support.fstree import remove_workspace

T = TypeVar("T")


def empty_dir(path: Path) -> None:
    """Remove everything inside `path`, keeping `path` itself (a bind-mounted slot)."""
    try:
        entries = list(path.iterdir())
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            remove_workspace(entry)
        else:
            entry.unlink(missing_ok=True)


class SandboxPool:
    """Sandboxes for candidates of one environment; thread-safe."""

    def __init__(
        self,
        backend: SandboxBackend,
        work_root: Path,
        *,
        requirements: Path | None = None,
        size: int = 2,
        base: Callable[[Path], None] | None = None,
        shared: SharedBase | None = None,
    ) -> None:
        self.backend = backend
        self.base = base
        """Fills an empty workspace with what every one starts from (None: `fill` does all)."""
        self.shared = shared if base is not None else None
        """The base mounted copy-on-write on every slot this pool opens (None: copied)."""
        self.work_root = work_root
        self.requirements = requirements
        self.size = max(1, size)
        self.reusable = backend.reusable
        self._cond = threading.Condition()
        self._filling = threading.Lock()
        """Held while a workspace gets the base: copies of a large repository made side by
        side share the disk and the interpreter, so none is ready before all of them."""
        self._idle: list[Sandbox] = []
        self._busy: set[int] = set()
        self._waiting = 0
        """Callers blocked in acquire()."""
        self._opening = 0
        """Sandboxes acquire() is opening for its own caller."""
        self._alive = 0
        """Sandboxes alive or being started (reusable backends only)."""
        self._starters: list[threading.Thread] = []
        self._recyclers: list[threading.Thread] = []
        """Threads resetting and emptying released sandboxes (counted in _alive, neither idle
        nor busy: on their way back, as a starting one is)."""
        self._based: set[int] = set()
        """Sandboxes (by id) whose workspace holds `base` and nothing else."""
        self._keepers: dict[int, Callable[[Sandbox], bool]] = {}
        """Who takes an adopted sandbox back when the pool closes with it idle (adopt())."""
        self._error: BaseException | None = None
        self._closed = False
        self.started = 0
        """How many sandboxes this pool has opened (for tests and benchmarks)."""

    # ------------------------------------------------------------------ warming

    def warm(self, count: int | None = None) -> None:
        """Start sandboxes in the background until `count` (default: size) are alive."""
        if not self.reusable:
            return
        want = min(self.size, count if count is not None else self.size)
        with self._cond:
            missing = want - self._alive
            self._alive += max(missing, 0)
        for _ in range(max(missing, 0)):
            self._start_in_background()

    def _start_in_background(self) -> None:
        thread = threading.Thread(target=self._start_one, name="ooda-pool-start", daemon=True)
        with self._cond:
            self._starters = [t for t in self._starters if t.is_alive()] + [thread]
        thread.start()

    def _start_one(self) -> None:
        """Open one sandbox (its slot counted in _alive already) and make it idle."""
        try:
            sandbox = self._open_slot()
        except BaseException as exc:  # noqa: BLE001 - handed to the next acquire()
            with self._cond:
                self._alive -= 1
                self._error = exc
                self._cond.notify_all()
            return
        self._settle_in(sandbox)

    def _settle_in(self, sandbox: Sandbox) -> None:
        """Give a sandbox running nothing (counted in _alive) the base, then make it idle (or
        discard it, the pool being closed)."""
        with contextlib.suppress(Exception):  # else acquire() puts it there (and says why)
            self._put_base(sandbox)
        with self._cond:
            if not self._closed:
                self._idle.append(sandbox)
                self._cond.notify_all()
                return
            self._alive -= 1
        self._discard(sandbox)

    def _open_slot(self) -> Sandbox:
        self.work_root.mkdir(parents=True, exist_ok=True)
        slot = Path(tempfile.mkdtemp(prefix="slot-", dir=self.work_root))
        try:
            if self.shared is not None:
                with contextlib.suppress(OSError):  # else the slot gets a copy, as without
                    self.shared.mount(slot)  # before the sandbox binds the slot
            sandbox = self.backend.open(slot, requirements=self.requirements)
        except BaseException:
            self._unmount(slot)
            remove_workspace(slot)
            raise
        with self._cond:
            self.started += 1
        return sandbox

    def adopt(self, sandbox: Sandbox, keep: Callable[[Sandbox], bool] | None = None) -> None:
        """Take in a sandbox opened elsewhere (on an empty slot of its own, e.g. started early
        by agent/startup/prestart.py) as one of this pool's; closed with the pool. It gets the
        base in the background, as a sandbox the pool starts does (a candidate arriving
        meanwhile waits for that copy rather than making it on its own critical path).
        `keep`: offered the sandbox instead of closing it when the pool closes with it idle
        (reset, running nothing: the daemon's warm containers go back to it); True when it
        took the sandbox and its slot, False when the pool is to close and remove them."""
        if self.shared is not None:  # its workspace would need a copy of the repository
            if keep is not None:
                with self._cond:
                    self._keepers[id(sandbox)] = keep
            self._discard(sandbox, idle=True)  # unused: back to whoever gave it, if it takes it
            return
        with self._cond:
            if keep is not None:
                self._keepers[id(sandbox)] = keep
            self._alive += 1
            self.started += 1
            closed = self._closed
            if closed:
                self._alive -= 1
            elif self.base is None:
                self._idle.append(sandbox)
                self._cond.notify_all()
                return
            else:
                thread = threading.Thread(target=self._settle_in, args=(sandbox,),
                                          name="ooda-pool-adopt", daemon=True)
                self._starters = [t for t in self._starters if t.is_alive()] + [thread]
        if closed:
            self._discard(sandbox)
            return
        thread.start()

    # ------------------------------------------------------------------ lending

    def acquire(self, fill: Callable[[Path], T]) -> tuple[Sandbox, T]:
        """A sandbox whose workspace `fill(workspace)` populated (as this process's user).

        If `fill` raises, the slot goes back to the pool and the exception propagates."""
        if not self.reusable:
            return self._acquire_fresh(fill)
        sandbox = self._take()
        return sandbox, self._lend(sandbox, fill)

    def try_acquire(self, fill: Callable[[Path], T]) -> tuple[Sandbox, T] | None:
        """acquire()'s, when a sandbox is idle and no caller waits for one; else None at once
        (always None for backends whose sandboxes are not reused)."""
        if not self.reusable:
            return None
        with self._cond:
            if self._closed or self._waiting or not self._idle:
                return None
            sandbox = self._idle.pop()
            self._busy.add(id(sandbox))
        return sandbox, self._lend(sandbox, fill)

    def _lend(self, sandbox: Sandbox, fill: Callable[[Path], T]) -> T:
        """Fill a taken sandbox's workspace and lend it; given back if `fill` raises."""
        try:
            if id(sandbox) not in self._based:  # opened for this caller, or adopted
                self._put_base(sandbox)
            with self._cond:
                self._based.discard(id(sandbox))
            value = fill(sandbox.workspace)
            self._own(sandbox)
            assert isinstance(sandbox, Resettable)
            sandbox.lend()
        except BaseException:
            self.release(sandbox)
            raise
        return value

    def _take(self) -> Sandbox:
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    if self._closed:
                        raise RuntimeError("the sandbox pool is closed")
                    if self._idle:
                        sandbox = self._idle.pop()
                        self._busy.add(id(sandbox))
                        return sandbox
                    idle, busy, own = len(self._idle), len(self._busy), self._opening
                    starting = self._alive - idle - busy - own  # warm() starts, unclaimed
                    if starting < self._waiting and self._alive < self.size:
                        self._alive += 1  # no sandbox on its way for this caller: open one
                        self._opening += 1
                        break
                    if self._error is not None and self._alive == 0:
                        error, self._error = self._error, None
                        raise error
                    self._cond.wait(timeout=1.0)
            finally:
                self._waiting -= 1
        try:
            sandbox = self._open_slot()
        except BaseException:
            with self._cond:
                self._alive -= 1
                self._opening -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            self._opening -= 1
            self._busy.add(id(sandbox))
        return sandbox

    def _acquire_fresh(self, fill: Callable[[Path], T]) -> tuple[Sandbox, T]:
        self.work_root.mkdir(parents=True, exist_ok=True)
        workspace = Path(tempfile.mkdtemp(prefix="ws-", dir=self.work_root))
        if self.shared is not None:
            shared = self._acquire_shared(workspace, fill)
            if shared is not None:
                return shared
        try:
            if self.base is not None:
                self.base(workspace)
            value = fill(workspace)
            sandbox = self.backend.open(workspace, requirements=self.requirements)
        except BaseException:
            remove_workspace(workspace)
            raise
        with self._cond:
            self.started += 1
        return sandbox, value

    def _acquire_shared(self, workspace: Path, fill: Callable[[Path], T]
                        ) -> tuple[Sandbox, T] | None:
        """A fresh sandbox (bwrap: its mounts are made per command) on `workspace`, then the
        base mounted there as its uid sees it; None, the sandbox closed, when it would not
        mount (the caller copies)."""
        assert self.shared is not None
        sandbox = self.backend.open(workspace, requirements=self.requirements)
        owner: tuple[int, int] | None = getattr(sandbox, "workspace_owner", None)
        try:
            if owner is None:
                raise OSError("the sandbox names no owner for its workspace")
            self.shared.mount(workspace, owner)
        except OSError:
            sandbox.close()
            return None
        try:
            value = fill(workspace)
            self.shared.own(workspace)
        except BaseException:
            self.release(sandbox)
            raise
        with self._cond:
            self.started += 1
        return sandbox, value

    def refresh(self, sandbox: Sandbox, fill: Callable[[Path], T]) -> tuple[Sandbox, T]:
        """The sandbox as fresh as a newly acquired one, its workspace filled again (after
        candidate code ran in it); possibly another sandbox, which the caller then releases."""
        if not self.reusable:
            self.release(sandbox)
            return self._acquire_fresh(fill)
        assert isinstance(sandbox, Resettable)
        if not sandbox.reset():
            self.release(sandbox)  # discarded (and replaced) there
            return self.acquire(fill)
        try:
            self._renew(sandbox)
            with self._cond:
                self._based.discard(id(sandbox))
            value = fill(sandbox.workspace)
            self._own(sandbox)
            sandbox.lend()
        except BaseException:
            self.release(sandbox)
            raise
        return sandbox, value

    def release(self, sandbox: Sandbox) -> None:
        """Take a sandbox back: reset and keep it, or discard it (and start a replacement)."""
        if not self.reusable:
            try:
                self._unmount(sandbox.workspace)  # first: the lease then gives back an empty slot
                sandbox.close()
            finally:
                remove_workspace(sandbox.workspace)
            return
        with self._cond:
            self._busy.discard(id(sandbox))
            self._based.discard(id(sandbox))
            if not self._closed:
                thread = threading.Thread(target=self._recycle, args=(sandbox,),
                                          name="ooda-pool-recycle", daemon=True)
                self._recyclers = [t for t in self._recyclers if t.is_alive()] + [thread]
                thread.start()
                return
        self._recycle(sandbox)

    def settle(self, timeout_s: float = 30.0) -> None:
        """Wait for the released sandboxes to be reset, emptied (and given the base), and for
        the ones starting (a benchmark's next measurement should not share the machine with
        them)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._cond:
                running = [t for t in self._recyclers + self._starters if t.is_alive()]
            if not running:
                return
            for thread in running:
                thread.join(max(0.0, deadline - time.monotonic()))

    def _recycle(self, sandbox: Sandbox) -> None:
        """Reset a released sandbox and empty its slot, then make it idle (or discard it)."""
        assert isinstance(sandbox, Resettable)
        # Once the pool is closed the sandbox is discarded as it is, whichever step the closing
        # came in (closing it ends every process in it before its slot is removed).
        try:
            clean = not self._closed and sandbox.reset()  # no process is left after this,
            if clean and not self._closed:
                self._renew(sandbox, background=True)  # so the slot can be emptied
        except Exception:  # noqa: BLE001 -- (the engine went away? no room for the copy?)
            clean = False  # discarded below, not kept
        with self._cond:
            keep = clean and not self._closed
            if keep:
                self._idle.append(sandbox)
            else:
                self._alive -= 1
            self._cond.notify_all()
        if keep:
            return
        self._discard(sandbox, idle=clean or self._closed)  # (a keeper resets it again)
        if not self._closed:
            self.warm()  # bring the pool back to size in the background

    def _renew(self, sandbox: Sandbox, *, background: bool = False) -> None:
        """The workspace of a sandbox running nothing back to the base: a shared one restored
        from its changes, else emptied and (unless `background` and the pool closed meanwhile)
        given the base again."""
        if self.shared is not None and self.shared.holds(sandbox.workspace):
            self.shared.restore(sandbox.workspace)
            with self._cond:
                self._based.add(id(sandbox))
            return
        empty_dir(sandbox.workspace)
        if not (background and self._closed):
            self._put_base(sandbox)

    def _own(self, sandbox: Sandbox) -> None:
        """Hand what `fill` wrote in a shared workspace to the sandbox user."""
        if self.shared is not None and self.shared.holds(sandbox.workspace):
            self.shared.own(sandbox.workspace)

    def _unmount(self, slot: Path) -> None:
        if self.shared is not None:
            self.shared.unmount(slot)

    def _put_base(self, sandbox: Sandbox) -> None:
        """Fill the (empty) workspace of a sandbox running nothing with `base`, if any (a
        shared workspace holds it from the start)."""
        if self.base is None:
            return
        if self.shared is not None and self.shared.holds(sandbox.workspace):
            with self._cond:
                self._based.add(id(sandbox))
            return
        try:
            with self._filling:  # one copy at a time: the first sandbox is ready in one
                self.base(sandbox.workspace)  # copy's time, not in all of theirs
        except BaseException:
            empty_dir(sandbox.workspace)  # no half copy is ever handed out
            raise
        with self._cond:
            self._based.add(id(sandbox))

    def _discard(self, sandbox: Sandbox, idle: bool = False) -> None:
        """Close a sandbox and remove its slot, or hand an `idle` one (running nothing) to its
        keeper (adopt())."""
        with self._cond:
            self._based.discard(id(sandbox))
            keep = self._keepers.pop(id(sandbox), None)
        with contextlib.suppress(Exception):  # else closed and removed, as any other
            if idle and keep is not None and keep(sandbox):
                return
        try:
            sandbox.close()
        finally:
            self._unmount(sandbox.workspace)
            remove_workspace(sandbox.workspace)

    # ------------------------------------------------------------------ teardown

    def close(self, timeout_s: float = 30.0) -> None:
        """Remove every idle sandbox now (in parallel), busy ones when released."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._alive -= len(idle)
            starters = list(self._starters) + list(self._recyclers)
            self._cond.notify_all()
        closers = [threading.Thread(target=self._discard, args=(s, True), daemon=True)
                   for s in idle]
        for thread in closers:
            thread.start()
        deadline = time.monotonic() + timeout_s
        for thread in closers + starters:  # a recycled sandbox is discarded once it is clean
            with contextlib.suppress(RuntimeError):
                thread.join(max(0.0, deadline - time.monotonic()))
        if self.shared is not None:
            self.shared.close()  # lazily: a busy sandbox's overlay keeps the base meanwhile

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
