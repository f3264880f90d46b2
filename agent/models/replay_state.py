"""What the bundled endpoint's request threads share: which scripted answer a request gets,
which fault it meets, and the counters `/stats` reports, all behind one lock.

A request belongs to the task named by a `Task id: <id>` line in its first system/user message
that has one; its round is the number of user messages. The answers of that task whose round
matches (or, when none names this round, is absent) and whose `contains` occurs in the last
user message are served in turn, a counter per (model, task, round), so parallel samples
differ; a blind run's reproduction-test requests get only the answers marked for them. Answers that name a model go only to requests for that model; each served model may have
its own token rate and a price (ServedModel), so a fast and a strong model can be served side by
side.
"""

from __future__ import annotations

import json
import random
import re
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import CRITIC_REQUEST_LINE, REPRO_REQUEST_LINE
from ooda.agent.models.answer_styles import restyle
from ooda.agent.models.replay_behaviour import Behaviour
from ooda.agent.models.replay_scripts import Script, ScriptFiles

TASK_ID_RE = re.compile(r"^\s*Task id:\s*(\S+)\s*$", re.MULTILINE | re.IGNORECASE)
FAULTS = ("ok", "429", "500", "drop", "hang")

COUNT_RE = re.compile(r"\bCount from 1 to (\d+)\b")
"""A probe asking for a counted answer (`ooda doctor`'s two streams at once): answered."""


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after_s: float = 0.0


@dataclass(frozen=True)
class ServedModel:
    """One model the endpoint lists: its own token rate and its price (listed, not charged)."""

    name: str
    tokens_per_s: float | None = None
    """None: the server's rate."""
    price_in: float = 0.0
    """USD per million prompt tokens."""
    price_out: float = 0.0
    """USD per million completion tokens."""


def parse_served(spec: str) -> ServedModel:
    """`NAME[:TOKENS_PER_S[:PRICE_IN:PRICE_OUT]]` (prices in USD per million tokens)."""
    name, *rest = spec.strip().split(":")
    if not name or len(rest) not in (0, 1, 3):
        raise UsageError(f"model {spec!r}: use NAME[:TOKENS_PER_S[:PRICE_IN:PRICE_OUT]]")
    try:
        numbers = [float(x) for x in rest]
    except ValueError:
        raise UsageError(f"model {spec!r}: the rate and prices must be numbers") from None
    if any(n < 0 for n in numbers):
        raise UsageError(f"model {spec!r}: the rate and prices must not be negative")
    rate = numbers[0] if numbers else None
    price_in, price_out = numbers[1:] if len(numbers) == 3 else (0.0, 0.0)
    return ServedModel(name, rate, price_in, price_out)


def parse_fault(spec: str) -> Fault:
    kind, _, arg = spec.strip().lower().partition(":")
    if kind not in FAULTS:
        raise UsageError(f"unknown fault {spec!r}; use one of {', '.join(FAULTS)}")
    if arg and kind != "429":
        raise UsageError(f"fault {spec!r} takes no argument")
    try:
        retry_after = float(arg) if arg else 0.0
    except ValueError:
        raise UsageError(f"fault {spec!r}: the Retry-After must be a number") from None
    return Fault(kind, retry_after)


class ReplayState:
    """Everything the handler threads share, behind one lock."""

    def __init__(
        self,
        scripts: dict[str, list[Script]],
        *,
        tokens_per_s: float,
        ttft_s: float,
        faults: list[Fault],
        rates: dict[str, float],
        seed: int | None,
        api_key: str | None,
        models: list[str],
        accept_stream_options: bool,
        answer_as: str = "as-is",
        served: list[ServedModel] | None = None,
        behaviour: Behaviour | None = None,
        request_log: Path | None = None,
        strict_models: bool = False,
        script_files: ScriptFiles | None = None,
    ) -> None:
        self.scripts = scripts
        self.script_files = script_files
        """Where `scripts` came from, read again when they change (None: fixed)."""
        self.strict_models = strict_models
        """A request for a model not listed is HTTP 404 model_not_found (OpenAI's, vLLM's
        and Ollama's answer); otherwise any name is served (llama.cpp's)."""
        self.behaviour = behaviour or Behaviour()
        self.generating = threading.BoundedSemaphore(self.behaviour.slots or 1 << 20)
        """Generations at once (Behaviour.slots)."""
        self.waiting = 0
        """Chat requests waiting for a generation slot."""
        self.interrupted = 0
        """Streams ended early because another request waited."""
        self.overflows = 0
        self.request_log = request_log
        """Where each chat request's model and messages are appended, one JSON line each."""
        self.answer_as = answer_as
        self.restyled = 0
        """Answers rewritten so far ("mixed" alternates its styles by this count)."""
        self.tokens_per_s = tokens_per_s
        self.ttft_s = ttft_s
        self.faults = faults
        self.rates = rates
        self.random = random.Random(seed)
        self.api_key = api_key
        self.served = {m.name: m for m in served or []}
        self.models = [*self.served] if self.served else models
        self.accept_stream_options = accept_stream_options
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.counters: dict[tuple[str, str, int, str | None], int] = {}
        self.arrivals = 0
        self.requests = 0
        self.chat_requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.status: dict[str, int] = {}
        self.injected: dict[str, int] = {}
        self.connections: set[socket.socket] = set()

    def next_fault(self) -> Fault:
        with self.lock:
            index = self.arrivals
            self.arrivals += 1
            if self.faults:
                fault = self.faults[index % len(self.faults)]
                if fault.kind != "ok":
                    return fault
            for kind in ("429", "500", "drop"):
                rate = self.rates.get(kind, 0.0)
                if rate > 0 and self.random.random() < rate:
                    return Fault(kind)
        return Fault("ok")

    def wait_for_slot(self) -> bool:
        """Wait for a generation slot (counted as waiting meanwhile); False when stopping."""
        with self.lock:
            self.waiting += 1
        try:
            while not self.generating.acquire(timeout=0.05):
                if self.stopping.is_set():
                    return False
            return True
        finally:
            with self.lock:
                self.waiting -= 1

    def rate_for(self, model: str) -> float:
        """The token rate of `model` (its own, else the server's)."""
        served = self.served.get(model)
        if served is None or served.tokens_per_s is None:
            return self.tokens_per_s
        return served.tokens_per_s

    def pick_answer(self, messages: list[dict[str, Any]], model: str = "") -> tuple[str, str]:
        """(task id, answer) for a request's messages, sent to `model`."""
        if self.script_files is not None:
            self.scripts = self.script_files.current()
        task = None
        for message in messages:
            if message.get("role") in ("system", "user", "developer"):
                match = TASK_ID_RE.search(content_text(message.get("content")))
                if match:
                    task = match.group(1)
                    break
        users = [m for m in messages if m.get("role") == "user"]
        round_ = len(users)
        last_user = content_text(users[-1].get("content")) if users else ""
        if task is None:  # no task's prompt (a probe: `ooda doctor`, curl): a plain answer
            asked = COUNT_RE.search(last_user)
            if asked:  # as a model does: `ooda doctor`'s long probe asks for one
                return "?", " ".join(str(i) for i in range(1, min(int(asked[1]), 10_000) + 1))
            return "?", "no scripted answer: the prompt has no 'Task id: <id>' line"
        if task not in self.scripts:
            known = ", ".join(sorted(self.scripts)[:5]) + (", ..." if len(self.scripts) > 5
                                                          else "")
            raise UnknownTask(
                f"no scripted answer for task {task!r}: the scripts served here are for "
                f"{known or 'no task'} (a replay.jsonl answers the task named by its lines' "
                '"task", else by its folder)'
            )
        first_user = content_text(users[0].get("content")) if users else ""
        kind = ("reproduction" if first_user.startswith(REPRO_REQUEST_LINE) else
                "critic" if first_user.startswith(CRITIC_REQUEST_LINE) else None)
        matching = [
            s
            for s in self.scripts.get(task, [])
            if (s.round is None or s.round == round_)
            and (s.contains is None or s.contains in last_user)
            and (s.model is None or s.model == model)
            and s.kind == kind
        ]
        # answers written for this very round win over answers for any round
        candidates = [s for s in matching if s.round == round_] or matching
        if not candidates:
            what = kind or f"round {round_}"
            return task, f"no scripted answer for task {task} ({what})"
        with self.lock:
            count = self.counters.get((model, task, round_, kind), 0)
            self.counters[(model, task, round_, kind)] = count + 1
        answer = candidates[count % len(candidates)].answer
        if self.answer_as != "as-is" and kind is None:
            with self.lock:
                served = self.restyled
                self.restyled += 1
            answer = restyle(answer, first_user, self.answer_as, served)
        return task, answer

    def log_request(self, model: str, messages: list[dict[str, Any]]) -> None:
        """Append one chat request to the request log (when there is one)."""
        if self.request_log is None:
            return
        line = json.dumps({"model": model, "messages": messages}) + "\n"
        with self.lock, self.request_log.open("a", encoding="utf-8") as out:
            out.write(line)

    def count_status(self, status: int | str) -> None:
        with self.lock:
            key = str(status)
            self.status[key] = self.status.get(key, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "chat_requests": self.chat_requests,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "status": dict(self.status),
                "faults": dict(self.injected),
                "waiting": self.waiting,
                "interrupted": self.interrupted,
                "overflows": self.overflows,
            }


class UnknownTask(LookupError):
    """A request for a task no script answers: the endpoint's error, never a model answer."""


def content_text(content: object) -> str:
    """A message's text, whether a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        )
    return ""
