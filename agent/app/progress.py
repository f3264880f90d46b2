"""The live display of one run (rich Live): a status line that ticks while the model
generates (elapsed against budget, candidates by state, tokens sent and received so far, the
cost when prices are known) and one line per streaming candidate with its token count; each
finished candidate is printed above it with its full reason.

Off a terminal Live is not started: only the finished candidates' lines and the last status
line are printed, never wrapped or cropped (the console is soft-wrapped)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from ooda.agent.app.charts import human_tokens, money
from ooda.agent.core.loop import Attempt
from ooda.agent.support.reasons import headline
from ooda.agent.support.text import CHARS_PER_TOKEN
from ooda.agent.support.textsafe import printable

STATE_STYLE = {
    "generating": "cyan",
    "queued": "dim yellow",
    "verifying": "yellow",
    "passed": "bold green",
    "failed": "red",
    "invalid_edit": "magenta",
    "timeout": "red",
    "cancelled": "dim",
    "error": "bold red",
}
FINAL = ("passed", "failed", "invalid_edit", "timeout", "error")
# streamed text is counted at CHARS_PER_TOKEN until the endpoint's count arrives at its end


def _shown_state(attempt: Attempt, state: str) -> str:
    """The state the display shows: an answer that has finished arriving is no longer
    "generating" while it waits for a verification slot ("queued")."""
    if state == "generating" and attempt.t_generated is not None:
        return "queued"
    return state


def tokens_phrase(sent: int, received: int, cost: float | None, estimated: bool = False,
                  counted: bool = False) -> str:
    """`tokens 6.7k sent, 611 received, cost $0.0034` (the cost only when priced; `tokens ~6.7k
    sent, ~611 received (estimated: ...)` when some counts are estimates: all of them when
    the endpoint counted none, else only the answers it never finished)."""
    about = "~" if estimated else ""
    text = f"tokens {about}{human_tokens(sent)} sent, {about}{human_tokens(received)} received"
    if estimated:
        text += (" (partly estimated: the answers cut short came without counts)" if counted
                 else " (estimated: no answer came with the endpoint's counts)")
    return text + (f", cost {money(cost)}" if cost is not None else "")


class RunProgress:
    """Call it as the loop's progress hook; use it as a context manager around the run."""

    def __init__(self, task_id: str, budget_s: float, rounds: int, console: Console,
                 prices: tuple[float | None, float | None] = (None, None)) -> None:
        self.task_id = task_id
        self.budget_s = budget_s
        self.rounds = rounds
        self.console = console
        self.prices = prices
        self.started = time.monotonic()
        self.states: dict[str, str] = {}
        self.attempts: dict[str, Attempt] = {}
        self.round = 0
        self._lock = threading.Lock()
        self._live = Live(console=console, refresh_per_second=8, transient=False,
                          get_renderable=self._render, redirect_stderr=True,
                          redirect_stdout=False)  # other stderr lines print above it
        self._discarded = False
        self._held: list[Text] | None = None
        """Finished candidates' lines kept back until the plan is settled (see hold)."""

    def discard(self) -> None:
        """Leave nothing on screen at the end: the run ended on bad input before any answer
        (its one error line is all there is to say)."""
        with self._lock:
            self._discarded = True
            self._held = None
        self._live.transient = True

    def hold(self) -> None:
        """Keep finished candidates' lines back until release() (the base check still runs:
        if it fails, its one error line is all there is to say: discard())."""
        with self._lock:
            self._held = []

    def release(self) -> None:
        """Print the lines held back, and the next ones as they come."""
        with self._lock:
            held, self._held = self._held or [], None
        for line in held:
            self.console.print(line)

    def __call__(self, attempt: Attempt, state: str) -> None:
        with self._lock:
            self.states[attempt.attempt_id] = state
            self.attempts[attempt.attempt_id] = attempt
            self.round = max(self.round, attempt.round)
        if state in FINAL and not self._discarded:  # printed outside the lock: Live renders
            line = Text(f"  {attempt.attempt_id:<7} ", style="dim")
            line.append(f"{state:<13}", style=STATE_STYLE.get(state, ""))
            line.append(printable(headline(attempt.reason)))
            with self._lock:
                if self._held is not None:
                    self._held.append(line)
                    return
            self.console.print(line)
        if self._live.is_started:
            self._live.refresh()

    def tokens(self) -> tuple[int, int]:
        """(sent, received) so far: the endpoint's counts, plus the streaming answers'
        estimated from their length."""
        with self._lock:
            attempts = list(self.attempts.values())
        sent = sum(a.prompt_tokens for a in attempts)
        received = sum(a.completion_tokens or a.streamed_chars // CHARS_PER_TOKEN
                       for a in attempts)
        return sent, received

    def cost(self) -> float | None:
        price_prompt, price_completion = self.prices
        if price_prompt is None and price_completion is None:
            return None
        sent, received = self.tokens()
        return (sent * (price_prompt or 0.0) + received * (price_completion or 0.0)) / 1e6

    def _render(self) -> Group:
        with self._lock:
            shown = {i: _shown_state(self.attempts[i], state) for i, state in self.states.items()}
            counts = Counter(shown.values())
            streaming = [a for i, a in self.attempts.items() if shown.get(i) == "generating"]
        elapsed = time.monotonic() - self.started
        crop = self.console.is_terminal  # a terminal's status lines fit its width
        status = Text(f"{self.task_id}  round {self.round}/{self.rounds}  ", no_wrap=crop,
                      overflow="ellipsis" if crop else None)
        for state in STATE_STYLE:
            if counts.get(state):
                status.append(f"{state} {counts[state]}  ", style=STATE_STYLE[state])
        status.append(f"{elapsed:5.1f}s / {self.budget_s:.0f}s", style="bold")
        sent, received = self.tokens()
        status.append("  " + tokens_phrase(sent, received, self.cost()), style="dim")
        lines = [status]
        for attempt in streaming:
            tokens = attempt.streamed_chars // CHARS_PER_TOKEN
            line = Text(f"  {attempt.attempt_id:<7} ", style="dim", no_wrap=crop,
                        overflow="ellipsis" if crop else None)
            line.append("generating", style="cyan")
            line.append(f"  {human_tokens(tokens)} tokens" if tokens else "  waiting for the "
                        "first token")
            lines.append(line)
        return Group(*lines)

    def __enter__(self) -> RunProgress:
        if self.console.is_terminal:
            self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            self.states = {i: s for i, s in self.states.items() if s != "generating"}
        if self.console.is_terminal:
            self._live.refresh()
            self._live.stop()
        elif not self._discarded:  # Live would crop the last status line to 80 columns
            self.console.print(self._render())
