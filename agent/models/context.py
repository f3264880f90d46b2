"""The model's context window: where it is learned and how each request is fitted to it.

Learned from, in order: `--context-window` (the user's word), the endpoint's model listing
(`GET /v1/models`: vLLM's `max_model_len`, `context_length`/`context_window` elsewhere), and
the error an endpoint gives for a prompt too long for it (OpenAI's and vLLM's "maximum context
length is N tokens", llama-cpp-python's "exceed context window of N", llama-server's
"exceeds the available context size (N tokens)"). Such an error also says how many tokens the
prompt really had, which calibrates the estimate.

Fitting: the prompt's size is estimated from its characters (conservatively, ~3 a token, until
an endpoint's own count is seen), and the answer cap of each request is what the window leaves
after the prompt and a margin, never more than `--max-tokens`. A prompt that leaves less than
MIN_ANSWER_TOKENS is `ContextOverflow`: not sent, not retried.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ooda.agent.contracts.errors import ContextOverflow

LISTING_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length",
                "n_ctx", "max_context_tokens")
"""Keys of a `/v1/models` entry that give the model's context window, as servers name it."""

MIN_ANSWER_TOKENS = 256
"""Room an answer needs at least: a prompt leaving less does not fit."""

FIT_CHARS_PER_TOKEN = 3.0
"""Characters a token assumed when fitting a prompt, until the endpoint's own count is seen
(code tokenizes at about 3 to 4 characters a token; too low is safe, too high overflows)."""

TOKENS_PER_MESSAGE = 8
"""The chat template's tokens around each message (role markers, separators)."""

_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"context window of (\d+)", re.IGNORECASE),
    re.compile(r"available context size \((\d+)", re.IGNORECASE),
    re.compile(r"context (?:length|size|window)[^0-9]{0,20}(\d{3,})", re.IGNORECASE),
)
_PROMPT_PATTERNS = (
    re.compile(r"(\d+) in the messages", re.IGNORECASE),
    re.compile(r"Requested tokens \((\d+)\)", re.IGNORECASE),
    re.compile(r"request has (\d+) input tokens", re.IGNORECASE),
    re.compile(r"your messages resulted in (\d+) tokens", re.IGNORECASE),
    re.compile(r"request \((\d+) tokens\)", re.IGNORECASE),
)
_CONTEXT_WORDS = ("context length", "context window", "context size", "context_length",
                  "exceed_context", "maximum context", "too many tokens")


@dataclass(frozen=True)
class OverflowFacts:
    """What an endpoint's context error said."""

    window: int | None
    prompt_tokens: int | None


def overflow_facts(message: str, body: object = None) -> OverflowFacts | None:
    """The window and prompt size an error about the context states; None when the error is
    about something else."""
    text = message.lower()
    if not any(word in text for word in _CONTEXT_WORDS):
        return None
    window = _first_int(_WINDOW_PATTERNS, message)
    prompt = _first_int(_PROMPT_PATTERNS, message)
    if isinstance(body, Mapping):  # llama-server's error carries both as numbers
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            window = window or _positive(inner.get("n_ctx"))
            prompt = prompt or _positive(inner.get("n_prompt_tokens"))
    return OverflowFacts(window, prompt)


def looks_truncated(chars: int, prompt_tokens: int) -> bool:
    """Whether an endpoint's count of a long prompt is too small to be all of it (no tokenizer
    packs 6 characters a token over code and prose): it dropped part of the prompt, as Ollama
    does past its context length."""
    return chars >= 4000 and prompt_tokens * 6 < chars


def window_from_listing(entry: Mapping[str, object]) -> int | None:
    """The context window a `/v1/models` entry states, if any."""
    for key in LISTING_KEYS:
        value = _positive(entry.get(key))
        if value is not None:
            return value
    return None


def message_chars(messages: Sequence[Mapping[str, object]]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages)


class ContextWindow:
    """The window of one endpoint's model, as far as it is known, and the fitting rule."""

    def __init__(self, window: int | None = None, source: str = "") -> None:
        self.window = window
        self.source = source if window is not None else ""
        self.chars_per_token = FIT_CHARS_PER_TOKEN
        self.calibrated = False
        self._lock = threading.Lock()

    def learn(self, window: int, source: str, *, overrides: bool = False) -> bool:
        """Take a window from `source` unless one is known already (the user's `--context-window`
        or an earlier source wins), or, with `overrides` (the endpoint's own error), when it is
        smaller than the one known; True when the window changed."""
        with self._lock:
            if self.window is not None and not (overrides and window < self.window):
                return False
            self.window, self.source = window, source
            return True

    def calibrate(self, chars: int, prompt_tokens: int) -> None:
        """The endpoint counted `prompt_tokens` for a prompt of `chars` characters: estimate
        with its ratio from now on (the lowest seen: over-estimating is the safe side)."""
        if chars <= 0 or prompt_tokens <= 0:
            return
        with self._lock:
            ratio = chars / prompt_tokens
            if not self.calibrated or ratio < self.chars_per_token:
                self.chars_per_token = max(1.0, ratio)
                self.calibrated = True

    def tighten(self) -> None:
        """The endpoint found a prompt longer than estimated without saying by how much:
        count a fifth more tokens a character from now on."""
        with self._lock:
            self.chars_per_token = max(1.0, self.chars_per_token * 0.8)

    def estimate(self, messages: Sequence[Mapping[str, object]]) -> int:
        """The prompt's tokens, estimated on the safe (high) side."""
        chars = message_chars(messages)
        return math.ceil(chars / self.chars_per_token) + TOKENS_PER_MESSAGE * len(messages)

    def answer_cap(self, messages: Sequence[Mapping[str, object]], wanted: int | None) -> int | None:
        """The max_tokens to send: `wanted` (None: the endpoint's default), lowered to what
        the window leaves after the prompt; ContextOverflow when that is too little."""
        if self.window is None:
            return wanted
        prompt = self.estimate(messages)
        room = self.window - prompt - self.margin()
        if room < MIN_ANSWER_TOKENS:
            raise ContextOverflow(
                f"the prompt (~{prompt:,} tokens) leaves no room for an answer in the model's "
                f"context window of {self.window:,} tokens ({self.source}): give the server a "
                "larger context (llama.cpp -c / --n_ctx, Ollama num_ctx, vLLM "
                "--max-model-len) or the task less text", window=self.window,
                prompt_tokens=prompt)
        return room if wanted is None else min(wanted, room)

    def margin(self) -> int:
        """Tokens kept free for the estimate's error (about 3 % of the window)."""
        assert self.window is not None
        return max(64, self.window // 32)

    def report(self) -> dict[str, object]:
        return {"tokens": self.window, "source": self.source or None}


def _first_int(patterns: Sequence[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def _positive(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None
