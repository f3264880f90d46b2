"""`ooda doctor`'s look at the model itself: one short streaming request, then two at once,
through the same client a run uses, and what they showed (finish_reason, whether usage came,
time to the first token, tokens a second, the context window, whether the endpoint cut a
stream short while another waited).

Apart from the machine checks (agent/app/doctor.py) because it talks to the model: a few
seconds and a few dozen tokens of the endpoint's time.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from ooda.agent.app.doctor import Check
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.models.openai_model import ModelCompletion, ModelConfig, ModelError, OpenAIModel

PROBE = [{"role": "user", "content": "Reply with one short sentence about rivers."}]
PROBE_TOKENS = 48
PROBE_DEADLINE_S = 90.0
PAIR_SECONDS = 1.0
"""How long each of the two streams at once should last at the first stream's rate: long
enough to overlap at 1,000+ tokens/s (a 48-token answer lasts 0.05 s there)."""
PAIR_TOKENS = (64, 2048)
"""Bounds of the two streams' length in tokens."""
MIN_SPAN_S = 0.2
"""Streams shorter than this cannot show whether they overlapped."""


def stream_checks(base_url: str, model: str | None, listed: list[str]) -> list[Check]:
    """The two checks (one stream, two at once) of `model` (default: the first one listed)."""
    name = model or (listed[0] if listed else None)
    if name is None:
        return [Check("model stream", False, "no model named and the endpoint lists none",
                      "`ooda doctor --model NAME`", optional=True)]
    client = OpenAIModel(ModelConfig(name=name, base_url=base_url, concurrency=2,
                                     max_tokens=PROBE_TOKENS, max_retries=1,
                                     idle_timeout_s=PROBE_DEADLINE_S))
    try:
        client.check_reachable()
        one = client.complete(PROBE, deadline=time.monotonic() + PROBE_DEADLINE_S)
    except (ModelError, InfraError, UsageError) as exc:
        return [_failure(name, exc)]
    first = Check("model stream", one.finish_reason is not None, _describe(name, one, client))
    tokens = _pair_tokens(_rate(one))
    while True:  # streams too short to tell: once more, longer (the first rate was off)
        pair = OpenAIModel(ModelConfig(name=name, base_url=base_url, concurrency=2,
                                       max_tokens=tokens, max_retries=1,
                                       idle_timeout_s=PROBE_DEADLINE_S))
        check, conclusive = _two_at_once(pair, tokens)
        if conclusive or tokens >= PAIR_TOKENS[1]:
            return [first, check]
        tokens = min(PAIR_TOKENS[1], tokens * 8)


def _pair_tokens(rate: float | None) -> int:
    """Tokens for each of the two streams at once: PAIR_SECONDS at `rate`, bounded."""
    low, high = PAIR_TOKENS
    return max(low, min(high, int((rate or 0.0) * PAIR_SECONDS)))


def _failure(name: str, exc: Exception) -> Check:
    """A stream that failed; the client's own hint to run `ooda doctor` is dropped here."""
    said = re.sub(r"(; )?`ooda doctor` sends a test stream", "", str(exc))
    return Check("model stream", False, f"{name}: {said}",
                 "check the model name (`--model`) and the server's log (why it ended the "
                 "stream: a crash, an output limit, a proxy's timeout)")


def _describe(name: str, done: ModelCompletion, client: OpenAIModel) -> str:
    ttft = (done.t_first_token - done.t_request
            if done.t_first_token is not None and done.t_request is not None else None)
    rate = _rate(done)
    window = client.window.report()
    parts = [
        f"{name}: finish_reason {done.finish_reason}",
        "usage not sent (token counts will be estimates)" if done.tokens_estimated
        else f"usage sent ({done.prompt_tokens} + {done.completion_tokens} tokens)",
        f"first token after {ttft:.2f} s" if ttft is not None else "no text",
        f"{rate:.1f} tokens/s" if rate is not None else "",
        f"context window {window['tokens']:,} tokens" if window["tokens"]
        else "context window not stated (learned when a prompt is too long)",
    ]
    return "; ".join(p for p in parts if p)


def _rate(done: ModelCompletion) -> float | None:
    if done.t_first_token is None or done.t_done is None or done.completion_tokens < 2:
        return None
    span = done.t_done - done.t_first_token
    return (done.completion_tokens - 1) / span if span > 0 else None


def _two_at_once(client: OpenAIModel, tokens: int) -> tuple[Check, bool]:
    """Two streams at once, each asked for about `tokens` tokens: both finished side by side,
    one after the other, or cut short; or too quickly to tell (the bool: not that)."""
    results: list[Any] = [None, None]
    ask = [{"role": "user", "content": f"Count from 1 to {tokens}, the numbers separated by "
                                       "spaces, with nothing else."}]

    def one(i: int) -> None:
        try:
            results[i] = client.complete(ask, deadline=time.monotonic() + PROBE_DEADLINE_S)
        except (ModelError, InfraError, UsageError) as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [r for r in results if not isinstance(r, ModelCompletion)]
    if failed:
        return Check("two streams at once", False, f"failed: {failed[0]}",
                     "the server's log says why"), True
    cut = client.report()["concurrency"]["streams_cut"]
    a, b = sorted(results, key=lambda r: r.t_first_token or 0.0)
    span = max(_span(a), _span(b))
    # one after the other: the second's first token came when the first had (nearly) ended
    serial = (b.t_first_token or 0.0) >= (a.t_done or 0.0) - 0.25 * _span(a)
    if cut:
        detail = ("the endpoint cut a stream short (no finish_reason) while the other waited, "
                  "as llama-cpp-python does by default (--interrupt_requests): ooda lowers its "
                  "requests at once by itself and sends the cut one again; start the server "
                  "with --interrupt_requests False, or run with --concurrency 1, to spare that")
    elif span < MIN_SPAN_S:
        detail = (f"both finished within {span:.2f} s of their first token ({a.completion_tokens}"
                  f" and {b.completion_tokens} tokens): too quickly to tell whether the endpoint "
                  "generates answers side by side")
    elif serial:
        detail = ("both finished, one after the other: the endpoint generates one answer at a "
                  "time (llama.cpp --parallel, Ollama OLLAMA_NUM_PARALLEL serve more); "
                  "candidates will wait for their first token")
    else:
        detail = "both finished side by side"
    return Check("two streams at once", True, detail), bool(cut) or span >= MIN_SPAN_S


def _span(done: ModelCompletion) -> float:
    """Seconds from a stream's first token to its end."""
    if done.t_first_token is None or done.t_done is None:
        return 0.0
    return max(0.0, done.t_done - done.t_first_token)
