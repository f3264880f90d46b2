"""`ooda doctor`'s look at the model itself: one short streaming request, then two at once,
through the same client a run uses, and what they showed (finish_reason, whether usage came,
time to the first token, tokens a second, the context window, whether the endpoint cut a
stream short while another waited).

Apart from the machine checks (agent/app/doctor.py) because it talks to the model: a few
seconds and a few dozen tokens of the endpoint's time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ooda.agent.app.doctor import Check
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.models.openai_model import ModelCompletion, ModelConfig, ModelError, OpenAIModel

PROBE = [{"role": "user", "content": "Reply with one short sentence about rivers."}]
PROBE_TOKENS = 48
PROBE_DEADLINE_S = 90.0


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
        return [Check("model stream", False, f"{name}: {exc}",
                      "check the model name (`--model`) and the server's log")]
    first = Check("model stream", one.finish_reason is not None, _describe(name, one, client))
    return [first, _two_at_once(client)]


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


def _two_at_once(client: OpenAIModel) -> Check:
    """Two streams at once: both finished side by side, one after the other, or cut short."""
    results: list[Any] = [None, None]

    def one(i: int) -> None:
        try:
            results[i] = client.complete(PROBE, deadline=time.monotonic() + PROBE_DEADLINE_S)
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
                     "the server's log says why")
    cut = client.report()["concurrency"]["streams_cut"]
    a, b = sorted(results, key=lambda r: r.t_first_token or 0.0)
    serial = (b.t_first_token or 0.0) >= (a.t_done or 0.0) - 0.01
    if cut:
        detail = ("the endpoint cut a stream short (no finish_reason) while the other waited, "
                  "as llama-cpp-python does by default (--interrupt_requests): ooda lowers its "
                  "requests at once by itself and sends the cut one again; start the server "
                  "with --interrupt_requests False, or run with --concurrency 1, to spare that")
    elif serial:
        detail = ("both finished, one after the other: the endpoint generates one answer at a "
                  "time (llama.cpp --parallel, Ollama OLLAMA_NUM_PARALLEL serve more); "
                  "candidates will wait for their first token")
    else:
        detail = "both finished side by side"
    return Check("two streams at once", True, detail)
