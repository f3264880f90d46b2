"""A real terminal for tests where the output is the point: a command run in a tmux pane of a
server of its own, its screen (scrollback included, folds joined) read back when it ends."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Terminal:
    """One tmux session (`width` columns) on its own server."""

    def __init__(self, name: str) -> None:
        self.name = name

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.name, *args], check=True,
                              capture_output=True, text=True)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.name).stdout

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
            cwd: Path = ROOT, timeout: float = 120) -> tuple[int, str]:
        """Run `argv` in the pane (a clean environment: PATH, HOME, TERM and `env`); its exit
        status and what the screen shows once it ended."""
        base = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"),
                "TERM": "xterm-256color", "OODA_DAEMON": "0", **(env or {})}
        marker = f"EXIT-{uuid.uuid4().hex[:6]}="
        line = (f"clear; cd {shlex.quote(str(cwd))} && env -i "
                + " ".join(f"{k}={shlex.quote(v)}" for k, v in base.items())
                + f" {shlex.join(argv)}; echo {marker}$?")
        self.tmux("send-keys", "-t", self.name, "clear", "Enter")
        time.sleep(0.3)
        self.tmux("clear-history", "-t", self.name)
        self.tmux("send-keys", "-t", self.name, line, "Enter")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen()
            ends = [ln for ln in text.splitlines() if ln.startswith(marker)]
            if ends:
                return int(ends[-1][len(marker):]), text
            time.sleep(0.2)
        raise AssertionError(f"timed out; the pane shows:\n{self.screen()}")


@contextmanager
def terminal(width: int = 100, height: int = 50) -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/setup.sh installs it)")
    name = f"ooda-t-{uuid.uuid4().hex[:8]}"
    subprocess.run(["tmux", "-L", name, "new-session", "-d", "-s", name, "-x", str(width),
                    "-y", str(height)], check=True)
    try:
        yield Terminal(name)
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], check=False)
