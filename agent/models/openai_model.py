"""The model client: streaming chat completions from an OpenAI-compatible endpoint.

Built on the `openai` SDK (imported lazily: it takes over half a second to import; the daemon
and agent/startup/prestart.py warm it ahead) with the SDK's own retries off; `tenacity` retries
instead (the rules: agent/models/retry.py), so that no wait ever crosses the caller's deadline.
Not retried: other 4xx (`ModelError`). Every attempt refused at connect time -> `InfraError`
(exit 3). Deadline reached -> `ModelDeadline`, with the text received.

Local servers as they come (docs/LOCAL_MODELS.md):
- requests in flight follow the endpoint's capacity (agent/models/capacity.py): a stream cut
  without a finish_reason while others run lowers the limit and is sent again, no retry spent;
- each request's answer cap is fitted to the model's context window (agent/models/context.py),
  learned from `--context-window`, `GET /v1/models` or the endpoint's own error; a prompt that
  does not fit is `ContextOverflow`, never sent again;
- a stream that comes back empty while no other request runs is asked again once without
  streaming (max_tokens=1) to read the endpoint's real error (llama-cpp-python answers a prompt
  too long for its window with an empty 200 stream, and a 400 saying so when not streaming).
What the client adapted is said once each (`notices`) and reported (`report()`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import tenacity

from ooda.agent.contracts.errors import EndpointRefused, InfraError, UsageError
from ooda.agent.contracts.protocols import Completion
from ooda.agent.models.capacity import AdaptiveLimit, Slot
from ooda.agent.models.context import (
    ContextWindow,
    looks_truncated,
    message_chars,
    overflow_facts,
    window_from_listing,
)
from ooda.agent.models.endpoint import (
    DEFAULT_BASE_URL,
    LOCAL_API_KEY,
    ModelConfig,
    estimate_tokens,
    resolve_endpoint,
)
from ooda.agent.models.http_client import tls_context, warm_http_client
from ooda.agent.models.retry import (
    ModelDeadline,
    ModelError,
    RetryWait,
    StopBeforeDeadline,
    StreamBroken,
    describe,
    is_connect_error,
    missing_model,
    missing_model_message,
    retryable,
    root_cause,
    status_message,
)
from ooda.agent.models.streaming import read_stream

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

MAX_RESENDS = 16
"""Times one answer may be sent again for the endpoint's capacity or a refitted answer cap
before a cut stream counts as a failed attempt."""

CAPACITY_NOTICE = (
    "the endpoint ends streams without a finish_reason while other requests are in flight: it "
    "serves fewer at once (llama-cpp-python's server does so by default, --interrupt_requests; "
    "`--concurrency 1` avoids it); ooda lowers its requests at once and sends the cut ones again")


@dataclass
class ModelCompletion(Completion):
    """A Completion with what the client knows about how it ended."""

    attempts: int = 1
    """HTTP requests it took, retries and capacity re-sends included."""


class _SendAgain(Exception):
    """Send the same request again at once: the endpoint's capacity or the answer cap changed
    (not a failed attempt)."""


@dataclass
class _Tries:
    """What one answer's requests have met so far."""

    resent: int = 0
    probed: bool = False
    refits: int = 0


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
        self._limit = AdaptiveLimit(config.concurrency)
        self.window = ContextWindow(config.context_window, "--context-window")
        self.notices: list[str] = []
        """What the client adapted to, one line each, in order."""
        self.on_notice: Callable[[str], None] | None = None
        """Called with each new notice (the live display prints it)."""
        self._notice_lock = threading.Lock()
        self._client: openai.OpenAI | None = None
        self._client_lock = threading.Lock()
        self._stream_options = True
        self.listed: list[str] | None = None
        """The model names `GET /models` listed at the start (None: it did not answer)."""

    def _get_client(self) -> openai.OpenAI:
        with self._client_lock:
            if self._client is None:
                import openai

                kwargs: dict[str, Any] = {
                    "api_key": self._key,
                    "max_retries": 0,
                    "timeout": self.config.idle_timeout_s,
                }
                if self._url is not None:
                    kwargs["base_url"] = self._url
                kwargs["http_client"] = openai.DefaultHttpxClient(verify=tls_context())
                self._client = openai.OpenAI(**kwargs)
            return self._client

    def notice(self, text: str) -> None:
        """Say `text` once (`notices`, the on_notice hook, the log with -v)."""
        with self._notice_lock:
            if text in self.notices:
                return
            self.notices.append(text)
        log.info("%s: %s", self.base_url, text)
        if self.on_notice is not None:
            self.on_notice(text)

    def context_window(self) -> int | None:
        """The model's context window in tokens, when known (contracts.KnowsWindow)."""
        return self.window.window

    def report(self) -> dict[str, Any]:
        """What run.json keeps of the endpoint: where, its window, requests in flight."""
        return {
            "base_url": self.base_url,
            "context_window": self.window.report(),
            "max_tokens": self.config.max_tokens,
            "concurrency": self._limit.report(),
            "notices": list(self.notices),
        }

    # ---------------------------------------------------------------- reachability

    def check_reachable(self, timeout_s: float = 5.0) -> None:
        """InfraError when the endpoint cannot be reached at all (refused, DNS, no answer
        within timeout_s); UsageError when it rejects the API key (401), so that a wrong key
        is said before the tests of the base run, not after them. Any other HTTP answer, even
        404, counts as reachable. The model listing's context window, when it states one, is
        learned here."""
        import openai

        client = self._get_client()
        try:
            page = client.models.list(timeout=timeout_s)
        except openai.AuthenticationError as err:
            raise self._give_up(err, [err], 1, time.monotonic() + timeout_s) from None
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
            return
        try:
            entries = [m.model_dump() for m in page.data]
        except Exception:  # noqa: BLE001 - a listing we cannot read states nothing
            return
        self.listed = [str(e["id"]) for e in entries if e.get("id")]
        self.learn_from_listing(entries)

    def learn_from_listing(self, entries: list[dict[str, Any]]) -> None:
        """Take the context window from `GET /models` entries: the entry of this model, or
        the only one listed (a local server serving one model under its own alias)."""
        mine = [e for e in entries if e.get("id") == self.name] or (
            entries if len(entries) == 1 else [])
        window = window_from_listing(mine[0]) if mine else None
        if window is not None and self.window.learn(window, f"listed by {self.base_url}/models"):
            log.info("%s: context window %d tokens (model listing)", self.base_url, window)

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
        tries = _Tries()
        max_attempts = self.config.max_retries + 1

        def attempt() -> ModelCompletion:
            while True:
                try:
                    result = self._attempt(client, messages, deadline, on_text, tries)
                except _SendAgain:
                    continue
                except BaseException as err:
                    failures.append(err)
                    raise
                result.attempts = len(failures) + tries.resent + tries.refits + 1
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
        except (ModelError, UsageError):
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
        partial = err.partial if isinstance(err, StreamBroken) else ""
        first = err.t_first_token if isinstance(err, StreamBroken) else None
        if failures and all(is_connect_error(f) for f in failures):
            return InfraError(
                f"endpoint {self.base_url} unreachable after {tries}: {root_cause(err)}"
            )
        if retryable(err) and (n < max_attempts or time.monotonic() >= deadline):
            return ModelDeadline(
                f"deadline reached after {tries}; last error: {describe(err)}", partial, first)
        if isinstance(err, openai.AuthenticationError):  # the same for every sample: bad input
            return EndpointRefused(
                f"{self.base_url} rejected the API key (HTTP 401: {status_message(err)}); "
                "set OPENAI_API_KEY to a key this endpoint accepts"
            )
        if isinstance(err, openai.NotFoundError) and missing_model(err, self.name, self.listed):
            # a wrong model name: every request would meet it, said once, naming what is there
            return EndpointRefused(missing_model_message(self.base_url, self.name,
                                                    status_message(err), self.listed))
        if isinstance(err, openai.NotFoundError):
            return UsageError(
                f"HTTP 404 from {self.base_url}: {status_message(err)} "
                f"(check the model name {self.name!r} and the base URL)"
            )
        if isinstance(err, StreamBroken):
            return ModelError(f"gave up after {tries}: {describe(err)} (alone on the endpoint: "
                              "its log says why; `ooda doctor` sends a test stream)", partial,
                              first)
        if retryable(err):
            return ModelError(f"gave up after {tries}: {describe(err)}", partial, first)
        return ModelError(f"{self.base_url}: {describe(err)}")

    def _attempt(
        self,
        client: openai.OpenAI,
        messages: list[dict[str, str]],
        deadline: float,
        on_text: Callable[[str], bool] | None,
        tries: _Tries,
    ) -> ModelCompletion:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ModelDeadline("deadline reached before the request could start")
        self.window.answer_cap(messages, self.config.max_tokens)  # no wait for a hopeless one
        slot = self._limit.acquire(remaining)
        if slot is None:
            raise ModelDeadline(
                f"deadline reached waiting for a request slot ({self._limit.limit} in flight)"
            )
        released = False
        try:
            try:
                result = self._send(client, messages, deadline, on_text, tries)
            except StreamBroken as err:
                if not err.partial and not tries.probed and not self._limit.overlapped(slot):
                    tries.probed = True
                    self._probe(client, messages, deadline, tries)
                released = True
                if self._capacity_cut(slot) and tries.resent < MAX_RESENDS:
                    tries.resent += 1
                    raise _SendAgain() from err
                raise
            released = True
            self._limit.release(slot, finished=True)
            if self._limit.cuts:  # cut streams, and the endpoint answers fine at a lower level
                self.notice(CAPACITY_NOTICE)
            return result
        finally:
            if not released:
                self._limit.release(slot)

    def _capacity_cut(self, slot: Slot) -> bool:
        """Give back the slot of a stream cut short; True when that was the endpoint's
        capacity speaking (said once a stream then finishes: an endpoint that cuts every
        stream has another problem)."""
        return self._limit.release(slot, cut=True)

    def _send(
        self,
        client: openai.OpenAI,
        messages: list[dict[str, str]],
        deadline: float,
        on_text: Callable[[str], bool] | None,
        tries: _Tries,
    ) -> ModelCompletion:
        """One streamed request, start to end."""
        import openai

        max_tokens = self.window.answer_cap(messages, self.config.max_tokens)
        t_request = time.monotonic()
        try:
            stream = self._create(client, messages, deadline, max_tokens)
        except openai.BadRequestError as err:
            self._refit(err, messages, tries)
            raise
        limit = self.config.request_timeout_s
        try:
            read = read_stream(
                stream, deadline=deadline, on_text=on_text,
                request_end=t_request + limit if limit else None,
                connection_errors=(openai.APIConnectionError,),
            )
        finally:
            stream.close()
        t_done = time.monotonic()
        usage = read.usage
        if usage is not None and not read.stopped:
            prompt_tokens = int(usage.prompt_tokens or 0)
            completion_tokens = int(usage.completion_tokens or 0)
            estimated = False
            chars = message_chars(messages)
            if looks_truncated(chars, prompt_tokens):
                self.notice(f"the endpoint counted {prompt_tokens:,} prompt tokens for a prompt "
                            f"of {chars:,} characters: it drops the start of long prompts (Ollama "
                            "does past its context length: raise OLLAMA_CONTEXT_LENGTH), so the "
                            "model does not see the whole task; --context-window N makes ooda "
                            "fit prompts to N tokens")
            else:
                self.window.calibrate(chars, prompt_tokens)
        else:
            prompt_tokens = sum(estimate_tokens(str(m.get("content") or "")) for m in messages)
            completion_tokens = estimate_tokens(read.text)
            estimated = True
        return ModelCompletion(
            text=read.text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            t_first_token=read.t_first_token,
            t_done=t_done,
            stopped_early=read.stopped,
            finish_reason=None if read.stopped else read.finish_reason,
            tokens_estimated=estimated,
            t_request=t_request,
        )

    def _create(
        self,
        client: openai.OpenAI,
        messages: list[dict[str, str]],
        deadline: float,
        max_tokens: int | None,
        *,
        stream: bool = True,
    ) -> Any:
        """Send the request; falls back to no stream_options when the endpoint rejects them."""
        import openai

        remaining = max(deadline - time.monotonic(), 0.001)
        wait = min(self.config.idle_timeout_s, remaining)
        if self.config.request_timeout_s:
            wait = min(wait, self.config.request_timeout_s)
        kwargs: dict[str, Any] = {
            "model": self.config.name,
            "messages": messages,
            "temperature": self.config.temperature,
            "stream": stream,
            "timeout": openai.Timeout(wait, connect=min(wait, 10.0)),
        }
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if stream and self._stream_options:
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

    def _refit(self, err: openai.BadRequestError, messages: list[dict[str, str]],
               tries: _Tries) -> None:
        """A 400 about the context: learn the window (and the prompt's real size) from it, then
        send again with a fitted answer cap (_SendAgain), or raise ContextOverflow when the
        prompt itself does not fit. Returns for any other 400."""
        facts = overflow_facts(status_message(err), err.body)
        if facts is None:
            return
        if facts.prompt_tokens:
            self.window.calibrate(message_chars(messages), facts.prompt_tokens)
        else:
            self.window.tighten()
        if facts.window and self.window.learn(facts.window, "stated by the endpoint's error",
                                              overrides=True):
            self.notice(f"context window {facts.window:,} tokens (stated by the endpoint); "
                        "answers are capped to fit it")
        if self.window.window is None:
            return
        self.window.answer_cap(messages, self.config.max_tokens)
        if tries.refits < 2:
            tries.refits += 1
            raise _SendAgain() from None

    def _probe(self, client: openai.OpenAI, messages: list[dict[str, str]], deadline: float,
               tries: _Tries) -> None:
        """The stream came back empty with no other request in flight: ask once more without
        streaming, for one token, to read the endpoint's real error. Returns when the prompt
        is fine (the empty stream then counts as a broken one)."""
        import openai

        try:
            response = self._create(client, messages, deadline, 1, stream=False)
        except openai.BadRequestError as err:
            self._refit(err, messages, tries)
            raise ModelError(f"{self.base_url} sent an empty stream; asked without streaming "
                             f"it says {describe(err)}") from None
        except openai.APIStatusError as err:
            if retryable(err):
                return
            raise ModelError(f"{self.base_url} sent an empty stream; asked without streaming "
                             f"it says {describe(err)}") from None
        except openai.OpenAIError:
            return
        usage = getattr(response, "usage", None)
        if usage is not None and usage.prompt_tokens:
            self.window.calibrate(message_chars(messages), int(usage.prompt_tokens))
