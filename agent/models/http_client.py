"""The HTTP side shared by every model client in a process: one TLS context (building it loads
the CA bundle, ~25 ms a client) and the warm-up that imports the `openai` SDK ahead of need
(agent/startup/prestart.py in a thread at start-up, the daemon once for all its commands)."""

from __future__ import annotations

import ssl
import threading

_warmed = False
_tls: ssl.SSLContext | None = None
_tls_lock = threading.Lock()


def tls_context() -> ssl.SSLContext:
    """The TLS settings of every client in this process, as the SDK's HTTP library builds them
    by default (SSL_CERT_FILE/SSL_CERT_DIR honoured): built once."""
    global _tls
    with _tls_lock:
        if _tls is None:
            import httpx2

            _tls = httpx2.create_ssl_context()
        return _tls


def warm_http_client() -> None:
    """Import the `openai` SDK and what its first chat request loads (the HTTP stack, the chat
    resources: about a second on a small machine) so that the real client starts quickly."""
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
    _ = client.models  # the endpoint check's listing
    # the SDK's platform headers, worked out once per process (`platform.platform()` runs
    # `uname -p` in a subprocess)
    client.platform_headers()
    client.close()
    _warmed = True
