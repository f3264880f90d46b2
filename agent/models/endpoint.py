"""Where the model is and how to sample from it: ModelConfig, and the endpoint and API key a
run uses (arguments, then $OPENAI_BASE_URL / $OPENAI_API_KEY, a fixed key for a loopback
endpoint such as `ooda serve`).

Apart from the client so that these rules (and the rough token estimate) can be read and
used without the HTTP machinery.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import ModelOptions
from ooda.agent.support.text import estimate_tokens

__all__ = ["DEFAULT_BASE_URL", "LOCAL_API_KEY", "ModelConfig", "estimate_tokens",
           "is_loopback", "resolve_endpoint"]

LOCAL_API_KEY = "ooda-local"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ModelConfig(ModelOptions):
    """How to reach the model and how to sample from it: the user's model options
    (agent/contracts/options.py, declared once there) plus what only the client sets."""

    api_key: str | None = None
    """API key; None: $OPENAI_API_KEY, else "ooda-local" for a loopback endpoint."""
    idle_timeout_s: float = 120.0
    """Longest wait for the endpoint's next bytes (connect, first token, between chunks)."""
    max_retries: int = 6
    """Retries after the first attempt for transient failures (429, 5xx, broken streams)."""
    retry_backoff_s: float = 0.5
    """First wait before a retry without Retry-After; doubles each time, capped at 8 s."""

    @classmethod
    def from_options(cls, options: ModelOptions, **client: Any) -> ModelConfig:
        """The client's configuration of `options`, with `client`'s own settings (api_key,
        or a name or endpoint of its own)."""
        values = {f.name: getattr(options, f.name) for f in fields(ModelOptions)}
        return cls(**{**values, **client})


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
