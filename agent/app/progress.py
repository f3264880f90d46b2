"""A live progress display (rich) for one run: candidates by state, elapsed against budget."""

from __future__ import annotations

import threading
import time
from collections import Counter
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.text import Text

from ooda.agent.core.loop import Attempt
from ooda.agent.support.textsafe import printable

STATE_STYLE = {
    "generating": "cyan",
    "verifying": "yellow",
    "passed": "bold green",
    "failed": "red",
    "invalid_edit": "magenta",
    "timeout": "red",
    "cancelled": "dim",
    "error": "bold red",
}


class RunProgress:
    """Call it as the loop's progress hook; use it as a context manager around the run."""

    def __init__(self, task_id: str, budget_s: float, rounds: int, console: Console) -> None:
        self.task_id = task_id
        self.budget_s = budget_s
        self.rounds = rounds
        self.console = console
        self.started = time.monotonic()
        self.states: dict[str, str] = {}
        self.round = 0
        self._lock = threading.Lock()
        self._live = Live(self._render(), console=console, refresh_per_second=8, transient=False)

    def __call__(self, attempt: Attempt, state: str) -> None:
        with self._lock:
            self.states[attempt.attempt_id] = state
            self.round = max(self.round, attempt.round)
            if state in ("passed", "failed", "invalid_edit", "timeout", "error"):
                line = Text(f"  {attempt.attempt_id:<7} ", style="dim")
                line.append(f"{state:<13}", style=STATE_STYLE.get(state, ""))
                reason = attempt.reason.splitlines()[0][:100] if attempt.reason else ""
                line.append(printable(reason))
                self._live.console.print(line)
        self._live.update(self._render())

    def _render(self) -> Text:
        counts = Counter(self.states.values())
        elapsed = time.monotonic() - self.started
        text = Text(f"{self.task_id}  round {self.round}/{self.rounds}  ")
        for state in STATE_STYLE:
            if counts.get(state):
                text.append(f"{state} {counts[state]}  ", style=STATE_STYLE[state])
        text.append(f"{elapsed:5.1f}s / {self.budget_s:.0f}s", style="bold")
        return text

    def __enter__(self) -> RunProgress:
        self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._live.update(self._render())
        self._live.stop()
        if not self.console.is_terminal:
            self.console.print()  # Live leaves the last status line open off a terminal
