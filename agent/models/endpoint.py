"""Where the model is and how to sample from it: ModelConfig, and the endpoint and API key a
run uses (arguments, then $OPENAI_BASE_URL / $OPENAI_API_KEY, a fixed key for a loopback
endpoint such as `ooda serve`).

Apart from the client so that these rules (and the rough token estimate) can be read and
used without the HTTP machinery.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from ooda.agent.contracts.defaults import DEFAULTS
from ooda.agent.contracts.errors import UsageError
from ooda.agent.support.text import estimate_tokens

__all__ = ["DEFAULT_BASE_URL", "LOCAL_API_KEY", "ModelConfig", "estimate_tokens",
           "is_loopback", "resolve_endpoint"]

LOCAL_API_KEY = "ooda-local"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass
class ModelConfig:
    """How to reach the model and how to sample from it."""

    name: str
    """Model name sent to the endpoint."""
    base_url: str | None = None
    """Endpoint base URL (…/v1); None: $OPENAI_BASE_URL, else the OpenAI API."""
    api_key: str | None = None
    """API key; None: $OPENAI_API_KEY, else "ooda-local" for a loopback endpoint."""
    temperature: float = DEFAULTS.temperature
    """Sampling temperature (diversity across the N parallel samples)."""
    max_tokens: int | None = DEFAULTS.max_tokens
    """Cap on completion tokens per answer (lowered to what the context window leaves);
    None: the endpoint's default."""
    context_window: int | None = None
    """The model's context window in tokens, when the user knows it (else learned)."""
    request_timeout_s: float | None = None
    """Longest time one request may take, first token included; None: only the deadline."""
    idle_timeout_s: float = 120.0
    """Longest wait for the endpoint's next bytes (connect, first token, between chunks)."""
    max_retries: int = 6
    """Retries after the first attempt for transient failures (429, 5xx, broken streams)."""
    concurrency: int = DEFAULTS.concurrency
    """Requests in flight at once through one OpenAIModel, across all threads."""
    retry_backoff_s: float = 0.5
    """First wait before a retry without Retry-After; doubles each time, capped at 8 s."""


def is_loopback(base_url: str) -> bool:
    """Whether the endpoint is on this machine (then no API key is needed)."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_endpoint(base_url: str | None, api_key: str | None) -> tuple[str | None, str]:
    """(base URL or None for the OpenAI API, API key) from the arguments and environment;
    UsageError for a URL that is none, or when no key can be found for a non-local endpoint."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:  # bad input, exit 2
            where = "--base-url" if base_url else "OPENAI_BASE_URL"
            raise UsageError(f"{where} {url!r} is not an http:// or https:// URL "
                             "(e.g. http://127.0.0.1:8000/v1)")
    key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if key is None:
        if url is not None and is_loopback(url):
            key = LOCAL_API_KEY
        else:
            where = url or DEFAULT_BASE_URL
            raise UsageError(
                f"OPENAI_API_KEY is not set (needed for {where}); export it, or point "
                "--base-url / OPENAI_BASE_URL at a local endpoint such as `ooda serve`"
            )
    return url, key
