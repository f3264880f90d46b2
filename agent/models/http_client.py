"""The HTTP side shared by every model client in a process: one TLS context (building it loads
the CA bundle, ~25 ms a client) and the warm-up that imports the `openai` SDK ahead of need
(agent/startup/prestart.py in a thread at start-up, the daemon once for all its commands);
the daemon also runs one listing and one streamed chat through the SDK, answered in memory,
so that the response types its workers read are built before it forks."""

from __future__ import annotations

import json
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


WARM_CHUNKS = (
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                  "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "warm"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
)


def exercise_http_client() -> None:
    """A model listing and a streamed chat completion through the SDK, answered in memory
    (nothing leaves the process): the SDK builds the validators of the response types it reads
    (~10 ms) on first use, which a daemon does once before it forks instead of in every
    worker."""
    warm_http_client()
    import httpx2
    import openai

    def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/models"):
            return httpx2.Response(200, json={"object": "list", "data": [
                {"id": "m", "object": "model", "created": 0, "owned_by": "warm-up"}]})
        head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        events = [f"data: {json.dumps({**head, **chunk})}\n\n" for chunk in WARM_CHUNKS]
        stream = "".join(events) + "data: [DONE]\n\n"
        return httpx2.Response(200, content=stream.encode(),
                               headers={"content-type": "text/event-stream"})

    with openai.OpenAI(
        api_key="warm-up", base_url="http://warm-up.invalid/v1", max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=httpx2.MockTransport(answer)),
    ) as client:
        [m.model_dump() for m in client.models.list().data]
        for chunk in client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "warm"}], stream=True,
            stream_options={"include_usage": True},
        ):
            _ = (chunk.usage, [(c.delta.content, c.finish_reason) for c in chunk.choices])
