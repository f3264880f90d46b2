"""Shared by the sandbox test files: real backends opened once per session, skipped when this
machine lacks them unless OODA_REQUIRE_SANDBOXES=1 (then a missing backend fails the test);
and a recording stand-in for a reusable backend, for pool tests that run the candidate themselves."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import ExecResult, Sandbox, SandboxBackend
from ooda.agent.sandbox.registry import get_backend

REQUIRED = os.environ.get("OODA_REQUIRE_SANDBOXES") == "1"
_backends: dict[str, SandboxBackend | str] = {}


def backend_or_skip(name: str) -> SandboxBackend:
    """The real backend `name` (built on first use), or skip/fail saying why it is missing."""
    if name not in _backends:
        try:
            _backends[name] = get_backend(name)
        except InfraError as exc:
            _backends[name] = str(exc)
    got = _backends[name]
    if isinstance(got, str):
        if REQUIRED:
            pytest.fail(f"OODA_REQUIRE_SANDBOXES=1 but the {name} sandbox is unavailable: {got}")
        pytest.skip(f"{name} sandbox unavailable: {got}")
    return got


def quick_sandbox_args() -> list[str]:
    """`--sandbox bwrap` where bwrap works (it starts in a fraction of Docker's time), else
    nothing (the default backend): for end-to-end tests whose point is not the backend."""
    import shutil

    works = shutil.which("bwrap") is not None and subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "true"], capture_output=True).returncode == 0
    return ["--sandbox", "bwrap"] if works else []


def open_sandbox(name: str, workspace: Path, requirements: Path | None = None) -> Iterator[Sandbox]:
    """Fixture body: a sandbox of backend `name` over `workspace`, closed afterwards."""
    workspace.mkdir(parents=True, exist_ok=True)
    box = backend_or_skip(name).open(workspace, requirements=requirements)
    try:
        yield box
    finally:
        box.close()


def py(box: Sandbox, source: str, timeout_s: float = 30.0) -> ExecResult:
    """Run Python source as the candidate inside the sandbox."""
    return box.run(["python3", "-c", source], timeout_s=timeout_s)


def host_processes_with(marker: str) -> list[str]:
    """Command lines of host processes (containers' included) whose argv contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def _docker_ps(label: str, include_stopped: bool) -> list[str]:
    """Ids of the containers carrying `label` (`key` or `key=value`)."""
    flags = "-aq" if include_stopped else "-q"
    out = subprocess.run(
        ["docker", "ps", flags, "--filter", f"label={label}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def containers_of(pid: int | str, *, include_stopped: bool = False) -> list[str]:
    """Ids of the Docker containers that the ooda process `pid` started (running ones only,
    unless include_stopped)."""
    return _docker_ps(f"ooda.owner_pid={pid}", include_stopped)


def all_ooda_containers(*, include_stopped: bool = False) -> set[str]:
    """Ids of the containers any ooda process started (running ones only, unless
    include_stopped)."""
    return set(_docker_ps("ooda=1", include_stopped))


def orphaned_ooda_containers() -> set[str]:
    """Ids of the running containers whose ooda owner process is gone: leaked (a daemon's warm
    container, owned by the live daemon, is not one)."""
    import json

    from ooda.agent.sandbox.docker import image

    ids = all_ooda_containers()
    if not ids:
        return set()
    out = subprocess.run(
        ["docker", "inspect", "--format", "{{.Id}} {{json .Config.Labels}}", *ids],
        capture_output=True,
        text=True,
        check=False,  # one may go meanwhile
    ).stdout
    orphans = set()
    for line in out.splitlines():
        container_id, _, labels = line.partition(" ")
        if not labels.strip():
            continue  # being removed as we look
        if not image.owner_alive(json.loads(labels) or {}):
            orphans.add(container_id[:12])
    return orphans


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll `predicate` until it is true; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class RecordingBox:
    """A stand-in for a reusable sandbox: the test runs the candidate itself; lends and close counted."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.closed = False
        self.lent = 0

    def reset(self) -> bool:
        return True

    def lend(self) -> None:
        self.lent += 1

    def close(self) -> None:
        self.closed = True


class RecordingBackend:
    """Opens RecordingBoxes and keeps them; `on_open` may check the workspace as it is bound."""

    reusable = True

    def __init__(self, on_open: Callable[[Path], None] | None = None) -> None:
        self.opened: list[RecordingBox] = []
        self.on_open = on_open

    def open(self, workspace: Path, requirements: object = None) -> RecordingBox:
        if self.on_open is not None:
            self.on_open(workspace)
        box = RecordingBox(workspace)
        self.opened.append(box)
        return box
