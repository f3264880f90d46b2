"""When a request to the model is tried again, and how long to wait first.

Retried: 429 (honouring Retry-After / retry-after-ms), 408, 409, 425, 5xx, timeouts, connection
errors and streams that break off (`StreamBroken`); a connect error waits at most 1 s so that
an endpoint that refuses connections is reported within seconds; no wait crosses the caller's
deadline. Also the one-line descriptions of failed attempts and the errors the client raises.

The `openai` SDK is imported inside the functions that test its exception types: it takes over
half a second to import, and `ooda --help` or the daemon's client must not pay for it.
"""

from __future__ import annotations

import random
import socket
import time
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

import tenacity

from ooda.agent.contracts.errors import GenerationError

if TYPE_CHECKING:
    import openai

MAX_RETRY_AFTER_S = 60.0


class ModelError(GenerationError):
    """The endpoint refused or kept failing the request; the message is one line, `partial`
    the text the last attempt received."""


class ModelDeadline(ModelError, TimeoutError):
    """The deadline (or the request's timeout) passed before a complete answer arrived."""


class StreamBroken(Exception):
    """The stream ended without a finish_reason: retried like a dropped connection (or, while
    other requests were in flight, sent again as the endpoint's capacity allows)."""

    def __init__(self, message: str, partial: str = "",
                 t_first_token: float | None = None) -> None:
        super().__init__(message)
        self.partial = partial
        self.t_first_token = t_first_token


def error_chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes / contexts, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def is_connect_error(exc: BaseException) -> bool:
    """True when the endpoint could not be connected to at all (refused, DNS, connect
    timeout), as opposed to failing once connected."""
    for item in error_chain(exc):
        if isinstance(item, ConnectionRefusedError | socket.gaierror):
            return True
        if type(item).__name__ in ("ConnectError", "ConnectTimeout"):
            return True
    return False


def root_cause(exc: BaseException) -> str:
    root = error_chain(exc)[-1]
    text = str(root) or type(root).__name__
    return text.splitlines()[0] if text else type(root).__name__


def status_message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"]).splitlines()[0] if inner["message"] else err.message
        if isinstance(body.get("message"), str):
            return str(body["message"]).splitlines()[0]
    return (err.message or "").splitlines()[0] if err.message else "no message"


def missing_model(err: openai.APIStatusError, model: str, listed: list[str] | None) -> bool:
    """Whether a 404 says the endpoint has no model of this name (OpenAI's and vLLM's
    `model_not_found`, Ollama's "model ... not found"), or the endpoint's own listing lacks it;
    not a wrong base URL (no route), which is also a 404."""
    body = err.body if isinstance(err.body, dict) else {}
    inner = body.get("error", body)
    if isinstance(inner, dict) and inner.get("code") == "model_not_found":
        return True
    said = status_message(err).lower()
    if "model" in said and any(w in said for w in ("not found", "does not exist", "not exist")):
        return True
    return listed is not None and model not in listed and model.lower() in said


def missing_model_message(base_url: str, model: str, said: str, listed: list[str] | None) -> str:
    """One line: the endpoint has no model `model`, and (when its listing answered) a few of
    the models it has."""
    line = f"{base_url} has no model {model!r} (HTTP 404: {said})"
    others = [name for name in listed or [] if name != model]
    if others:
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        line += f"; it lists {', '.join(others[:5])}{more} (GET {base_url}/models)"
    return line


def describe(exc: BaseException) -> str:
    """One line about a failed attempt."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {status_message(exc)}"
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error: {root_cause(exc)}"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text


def retryable(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, StreamBroken):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 425, 429) or exc.status_code >= 500
    if isinstance(exc, openai.APIConnectionError):
        return True
    # an error event in the middle of a stream
    return type(exc) is openai.APIError


def retry_after(exc: BaseException) -> float | None:
    """Seconds the endpoint asked us to wait, from retry-after-ms or Retry-After."""
    import openai

    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return min(max(float(value) * scale, 0.0), MAX_RETRY_AFTER_S)
        except ValueError:
            try:
                when = parsedate_to_datetime(value).timestamp()
            except (TypeError, ValueError):
                continue
            return min(max(when - time.time(), 0.0), MAX_RETRY_AFTER_S)
    return None


class RetryWait(tenacity.wait.wait_base):
    """Retry-After when given; else jittered exponential backoff, capped at 1 s for connect
    errors (an endpoint that refuses connections is reported within seconds)."""

    def __init__(self, base_s: float) -> None:
        self.base_s = base_s

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if exc is not None:
            asked = retry_after(exc)
            if asked is not None:
                return asked
        backoff = self.base_s * 2.0 ** (retry_state.attempt_number - 1)
        if exc is not None and is_connect_error(exc):
            return min(1.0, backoff / 2)
        return min(8.0, backoff) * random.uniform(0.5, 1.0)


class StopBeforeDeadline(tenacity.stop.stop_base):
    """Stop retrying when the coming wait would end at or past the deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return time.monotonic() + retry_state.upcoming_sleep >= self.deadline
