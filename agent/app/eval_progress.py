"""The live display of `ooda eval` (rich Live): tasks done of all, resolved / unresolved /
errors, the elapsed time, tokens and cost so far, and the tasks running now with their time.

In a terminal it redraws in place; off a terminal (CI logs) it prints one line per finished
task instead, never wrapped. The end summary (agent/cli/eval.py) lists the failures."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from ooda.agent.app.charts import human_tokens, money
from ooda.agent.support.reasons import failure_reason
from ooda.agent.support.textsafe import printable

STYLE = {"resolved": "green", "unresolved": "red", "error": "bold red"}
SHOWN_RUNNING = 6
"""Running tasks listed by name; more are counted."""


class EvalProgress:
    """`start(task_id)` when a task begins, `note(records)` after each finishes."""

    def __init__(self, console: Console, eval_id: str, total: int,
                 prices: tuple[float | None, float | None] = (None, None)) -> None:
        self.console = console
        self.eval_id = eval_id
        self.total = total
        self.prices = prices
        self.started = time.monotonic()
        self.running: dict[str, float] = {}
        self.records: list[dict[str, Any]] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self._live = Live(console=console, refresh_per_second=4, transient=False,
                          get_renderable=self.render, redirect_stdout=False,
                          redirect_stderr=True)  # other stderr lines print above it

    def start(self, task_id: str) -> None:
        with self._lock:
            self.running[task_id] = time.monotonic()

    def note(self, records: list[dict[str, Any]]) -> None:
        with self._lock:
            self.records = list(records)
            fresh = [r for r in records if r["task_id"] not in self._seen]
            self._seen.update(r["task_id"] for r in records)
            for record in fresh:
                self.running.pop(record["task_id"], None)
        for record in fresh:
            if self._printing:
                self.console.print(finished_line(record))

    _printing = False
    """True once the run began: earlier tasks (resume) are counted but not printed."""

    def counts(self) -> dict[str, int]:
        with self._lock:
            statuses = [r["status"] for r in self.records]
        return {s: statuses.count(s) for s in STYLE}

    def render(self) -> Group:
        counts = self.counts()
        with self._lock:
            done = len(self.records)
            running = sorted(self.running.items(), key=lambda item: item[1])
            sent = sum(int((r.get("tokens") or {}).get("prompt", 0)) for r in self.records)
            received = sum(int((r.get("tokens") or {}).get("completion", 0))
                           for r in self.records)
        crop = self.console.is_terminal
        line = Text(f"{self.eval_id}  {done}/{self.total} done  ", no_wrap=crop,
                    overflow="ellipsis" if crop else None)
        for status, style in STYLE.items():
            label = "errors" if status == "error" else status
            line.append(f"{label} {counts[status]}  ", style=style if counts[status] else "dim")
        line.append(f"{_clock(time.monotonic() - self.started)}", style="bold")
        line.append(f"  tokens {human_tokens(sent)} sent, {human_tokens(received)} received",
                    style="dim")
        price_prompt, price_completion = self.prices
        if price_prompt is not None or price_completion is not None:
            dollars = (sent * (price_prompt or 0.0) + received * (price_completion or 0.0)) / 1e6
            line.append(f", cost {money(dollars)}", style="dim")
        lines = [line]
        if running:
            now = time.monotonic()
            names = ", ".join(f"{printable(task)} {now - t0:.0f}s"
                              for task, t0 in running[:SHOWN_RUNNING])
            more = f" and {len(running) - SHOWN_RUNNING} more" if len(running) > SHOWN_RUNNING else ""
            lines.append(Text(f"  running: {names}{more}", style="cyan", no_wrap=crop,
                              overflow="ellipsis" if crop else None))
        return Group(*lines)

    @contextmanager
    def shown(self) -> Iterator[EvalProgress]:
        self._printing = True
        if self.console.is_terminal:
            with self._live:
                yield self
        else:
            yield self
            self.console.print(self.render())


def finished_line(record: dict[str, Any]) -> Text:
    """`  resolved    median  12.3s` (with the reason when it did not resolve)."""
    status = record["status"]
    line = Text(f"  {status:<11}", style=STYLE.get(status, ""))
    line.append(f"{printable(record['task_id'])}  {float(record.get('wall_s') or 0):.1f}s")
    if status != "resolved":
        line.append(f"  {printable(failure_reason(record))}", style="dim")
    return line


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}" if minutes < 60 else f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
