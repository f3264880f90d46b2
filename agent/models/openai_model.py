"""The model client: streaming chat completions from an OpenAI-compatible endpoint.

Built on the `openai` SDK (imported lazily: it takes over half a second to import; the daemon
and agent/startup/prestart.py warm it ahead) with the SDK's own retries off; `tenacity` retries
instead (the rules: agent/models/retry.py), so that no wait ever crosses the caller's deadline.
Not retried: other 4xx (`ModelError`). Every attempt refused at connect time -> `InfraError`
(exit 3). Deadline reached -> `ModelDeadline`.

One `OpenAIModel` may be shared by many threads; a bounded semaphore caps its requests in
flight (`ModelConfig.concurrency`), taken per attempt and released while waiting to retry.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import tenacity

from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import Completion
from ooda.agent.models.endpoint import (
    DEFAULT_BASE_URL,
    LOCAL_API_KEY,
    ModelConfig,
    estimate_tokens,
    resolve_endpoint,
)
from ooda.agent.models.retry import (
    ModelDeadline,
    ModelError,
    RetryWait,
    StopBeforeDeadline,
    StreamBroken,
    describe,
    is_connect_error,
    retryable,
    root_cause,
    status_message,
)

if TYPE_CHECKING:
    import openai

__all__ = [
    "LOCAL_API_KEY",
    "ModelCompletion",
    "ModelConfig",
    "ModelDeadline",
    "ModelError",
    "OpenAIModel",
    "estimate_tokens",
    "resolve_endpoint",
    "tls_context",
    "warm_http_client",
]
"""ModelConfig, the endpoint rules and the errors are re-exported: callers import the client's
whole surface from here."""

log = logging.getLogger(__name__)


@dataclass
class ModelCompletion(Completion):
    """A Completion with what the client knows about how it ended."""

    stopped_early: bool = False
    """True when `on_text` returned False and the stream was closed before its end."""
    finish_reason: str | None = None
    """The endpoint's finish_reason ("stop", "length", …); None when stopped early."""
    attempts: int = 1
    """HTTP requests it took, retries included."""
    usage_estimated: bool = False
    """True when the token counts are estimates (~4 characters a token), not the endpoint's."""



_warmed = False
_tls: ssl.SSLContext | None = None
_tls_lock = threading.Lock()


def tls_context() -> ssl.SSLContext:
    """The TLS settings of every client in this process, as the SDK's HTTP library builds them
    by default (SSL_CERT_FILE/SSL_CERT_DIR honoured): built once, since building them loads the
    CA bundle (~25 ms a client)."""
    global _tls
    with _tls_lock:
        if _tls is None:
            import httpx2

            _tls = httpx2.create_ssl_context()
        return _tls


def warm_http_client() -> None:
    """Import the `openai` SDK and what its first chat request loads (the HTTP stack, the chat
    resources: about a second on a small machine) so that the real client starts quickly:
    agent/startup/prestart.py does this in a thread at start-up, the daemon (agent/startup/daemon.py) once for
    all its commands."""
    global _warmed
    if _warmed:
        return
    import openai

    client = openai.OpenAI(
        api_key="warm-up",
        base_url="http://127.0.0.1:9/v1",
        http_client=openai.DefaultHttpxClient(verify=tls_context()),
    )
    _ = client.chat.completions  # imported on first use
    client.close()
    _warmed = True


class OpenAIModel:
    """A `Model` on an OpenAI-compatible chat completions endpoint (streaming)."""

    def __init__(self, config: ModelConfig) -> None:
        if config.concurrency < 1:
            raise UsageError("model concurrency must be at least 1")
        if config.max_retries < 0:
            raise UsageError("max_retries must not be negative")
        self.config = config
        self.name = config.name
        url, key = resolve_endpoint(config.base_url, config.api_key)
        self._url = url
        self._key = key
        self.base_url = url or DEFAULT_BASE_URL
        """The endpoint actually used."""
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._client: openai.OpenAI | None = None
        self._client_lock = threading.Lock()
        self._stream_options = True

    def _get_client(self) -> openai.OpenAI:
        with self._client_lock:
            if self._client is None:
                import openai

                kwargs: dict[str, Any] = {
                    "api_key": self._key,
                    "max_retries": 0,
                    "timeout": self.config.request_timeout_s,
                }
                if self._url is not None:
                    kwargs["base_url"] = self._url
                kwargs["http_client"] = openai.DefaultHttpxClient(verify=tls_context())
                self._client = openai.OpenAI(**kwargs)
            return self._client

    # ---------------------------------------------------------------- reachability

    def check_reachable(self, timeout_s: float = 5.0) -> None:
        """InfraError when the endpoint cannot be reached at all (refused, DNS, no answer
        within timeout_s). Any HTTP answer, even 404 or 401, counts as reachable."""
        import openai

        client = self._get_client()
        try:
            client.models.list(timeout=timeout_s)
        except openai.APIStatusError:
            return
        except openai.APITimeoutError:
            raise InfraError(
                f"endpoint {self.base_url} did not answer within {timeout_s:g}s"
            ) from None
        except openai.APIConnectionError as err:
            raise InfraError(f"endpoint {self.base_url} unreachable: {root_cause(err)}") from None
        except Exception as err:  # an odd /models body still means something answered
            log.debug("GET /models answered oddly: %s", err)

    # ---------------------------------------------------------------- completion

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        deadline: float,
        on_text: Callable[[str], bool] | None = None,
    ) -> ModelCompletion:
        """Stream one answer before `deadline` (time.monotonic()). `on_text(text_so_far)`
        is called as text arrives (after a retry the text starts over); returning False
        closes the stream and returns what arrived, with `stopped_early=True`."""
        client = self._get_client()
        failures: list[BaseException] = []
        max_attempts = self.config.max_retries + 1

        def attempt() -> ModelCompletion:
            try:
                result = self._attempt(client, messages, deadline, on_text)
            except BaseException as err:
                failures.append(err)
                raise
            result.attempts = len(failures) + 1
            return result

        def should_retry(exc: BaseException) -> bool:
            return retryable(exc) and time.monotonic() < deadline

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            log.info(
                "%s: attempt %d failed (%s); retrying in %.2fs",
                self.name,
                state.attempt_number,
                describe(exc) if exc is not None else "?",
                state.upcoming_sleep,
            )

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(should_retry),
            stop=tenacity.stop_after_attempt(max_attempts) | StopBeforeDeadline(deadline),
            wait=RetryWait(self.config.retry_backoff_s),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except ModelError:
            raise
        except Exception as err:
            import openai

            if not isinstance(err, openai.OpenAIError | StreamBroken):
                raise  # a bug (in on_text, say), not the endpoint's doing
            raise self._give_up(err, failures, max_attempts, deadline) from err

    def _give_up(
        self, err: Exception, failures: list[BaseException], max_attempts: int, deadline: float
    ) -> Exception:
        """The exception to raise once retrying is over."""
        import openai

        n = len(failures)
        tries = f"{n} attempt{'s' if n != 1 else ''}"
        if failures and all(is_connect_error(f) for f in failures):
            return InfraError(
                f"endpoint {self.base_url} unreachable after {tries}: {root_cause(err)}"
            )
        if retryable(err) and (n < max_attempts or time.monotonic() >= deadline):
            return ModelDeadline(f"deadline reached after {tries}; last error: {describe(err)}")
        if isinstance(err, openai.AuthenticationError):  # the same for every sample: bad input
            return UsageError(
                f"{self.base_url} rejected the API key (HTTP 401: {status_message(err)}); "
                "set OPENAI_API_KEY to a key this endpoint accepts"
            )
        if isinstance(err, openai.NotFoundError):
            return UsageError(
                f"HTTP 404 from {self.base_url}: {status_message(err)} "
                f"(check the model name {self.name!r} and the base URL)"
            )
        if retryable(err):
            return ModelError(f"gave up after {tries}: {describe(err)}")
        return ModelError(f"{self.base_url}: {describe(err)}")

    def _attempt(
        self,
        client: openai.OpenAI,
        messages: list[dict[str, str]],
        deadline: float,
        on_text: Callable[[str], bool] | None,
    ) -> ModelCompletion:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ModelDeadline("deadline reached before the request could start")
        if not self._slots.acquire(timeout=remaining):
            raise ModelDeadline(
                f"deadline reached waiting for a request slot "
                f"({self.config.concurrency} already in flight)"
            )
        try:
            return self._stream_once(client, messages, deadline, on_text)
        finally:
            self._slots.release()

    def _create(
        self, client: openai.OpenAI, messages: list[dict[str, str]], deadline: float
    ) -> Any:
        """Open the stream; falls back to no stream_options when the endpoint rejects them."""
        import openai

        remaining = max(deadline - time.monotonic(), 0.001)
        wait = min(self.config.request_timeout_s, remaining)
        kwargs: dict[str, Any] = {
            "model": self.config.name,
            "messages": messages,
            "temperature": self.config.temperature,
            "stream": True,
            "timeout": openai.Timeout(wait, connect=min(wait, 10.0)),
        }
        if self.config.max_tokens is not None:
            kwargs["max_tokens"] = self.config.max_tokens
        if self._stream_options:
            kwargs["stream_options"] = {"include_usage": True}
        try:
            return client.chat.completions.create(**kwargs)
        except openai.BadRequestError as err:
            if "stream_options" not in f"{err} {err.body}" or "stream_options" not in kwargs:
                raise
            log.info("%s: the endpoint rejects stream_options; retrying without", self.name)
            self._stream_options = False
            del kwargs["stream_options"]
            return client.chat.completions.create(**kwargs)

    def _stream_once(
        self,
        client: openai.OpenAI,
        messages: list[dict[str, str]],
        deadline: float,
        on_text: Callable[[str], bool] | None,
    ) -> ModelCompletion:
        import openai

        stream = self._create(client, messages, deadline)
        text = ""
        t_first: float | None = None
        finish: str | None = None
        usage: Any = None
        stopped = False
        try:
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
                    if finish is None and time.monotonic() >= deadline:
                        raise ModelDeadline("deadline reached while the answer streamed", text)
            except openai.APIConnectionError:
                if finish is None:
                    raise
                # only the usage chunk and [DONE] are missing: keep the answer
                log.debug("%s: stream broke off after its finish_reason", self.name)
        finally:
            stream.close()
        if not stopped and finish is None:
            raise StreamBroken("the stream ended without a finish_reason")
        t_done = time.monotonic()
        if usage is not None and not stopped:
            prompt_tokens = int(usage.prompt_tokens or 0)
            completion_tokens = int(usage.completion_tokens or 0)
            estimated = False
        else:
            prompt_tokens = sum(estimate_tokens(str(m.get("content") or "")) for m in messages)
            completion_tokens = estimate_tokens(text)
            estimated = True
        return ModelCompletion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            t_first_token=t_first,
            t_done=t_done,
            stopped_early=stopped,
            finish_reason=None if stopped else finish,
            usage_estimated=estimated,
        )
