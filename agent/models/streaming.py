"""Reading one streamed chat completion: the text as it arrives, the first token's time, the
finish_reason and the usage the endpoint sends (if any).

Apart from the client's retry and capacity rules (agent/models/openai_model.py) so that what
counts as a complete answer is read in one place: a stream is complete when a finish_reason
arrived; one that ends without (llama-cpp-python's `[DONE]` when another request waits, an
empty 200 for a prompt too long, a dropped connection) is `StreamBroken`, carrying the text
received. The deadline and the request's own timeout end the stream with `ModelDeadline`,
also carrying the text.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ooda.agent.models.retry import ModelDeadline, StreamBroken

log = logging.getLogger(__name__)


@dataclass
class StreamRead:
    """What one stream delivered."""

    text: str
    t_first_token: float | None
    finish_reason: str | None
    usage: Any
    """The endpoint's usage object, or None when it sent none."""
    stopped: bool
    """on_text asked to stop: the stream was closed before its end."""


def read_stream(
    stream: Iterable[Any],
    *,
    deadline: float,
    request_end: float | None,
    on_text: Callable[[str], bool] | None,
    connection_errors: tuple[type[BaseException], ...],
) -> StreamRead:
    """Read `stream` to its end (or until `on_text` returns False). `request_end`: when the
    request's own timeout passes (None: no timeout). `connection_errors`: the SDK's exception
    for a connection that broke mid-stream."""
    text = ""
    t_first: float | None = None
    finish: str | None = None
    usage: Any = None
    stopped = False
    try:
        for chunk in stream:
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
            if chunk.choices:
                choice = chunk.choices[0]
                piece = choice.delta.content if choice.delta is not None else None
                if piece:
                    if t_first is None:
                        t_first = time.monotonic()
                    text += piece
                    if on_text is not None and on_text(text) is False:
                        stopped = True
                        break
                if choice.finish_reason:
                    finish = choice.finish_reason
            if finish is None:
                now = time.monotonic()
                if now >= deadline:
                    raise ModelDeadline("deadline reached while the answer streamed", text,
                                        t_first)
                if request_end is not None and now >= request_end:
                    raise ModelDeadline("the request took longer than --request-timeout", text,
                                        t_first)
    except connection_errors:
        if finish is None:
            raise StreamBroken(_broken(text, "the connection broke"), text, t_first) from None
        # only the usage chunk and [DONE] are missing: keep the answer
        log.debug("stream broke off after its finish_reason")
    if not stopped and finish is None:
        raise StreamBroken(_broken(text, "the stream ended"), text, t_first)
    return StreamRead(text, t_first, finish, usage, stopped)


def _broken(text: str, how: str) -> str:
    if not text:
        return f"{how} without a finish_reason and without any text"
    return f"{how} without a finish_reason after {len(text):,} characters"
