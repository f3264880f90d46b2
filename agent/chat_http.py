"""A lean client for OpenAI-compatible chat completions over the standard library's http.client.

agent/model.py talks to the endpoint through this module rather than the `openai` SDK: the SDK
takes about a second to import (hundreds of pydantic types), several bare pytest runs of a
small task, on the critical path of every `ooda run`; this module imports in milliseconds. It
does exactly what the model client needs: `GET /models` and a streamed `POST /chat/completions`
(server-sent events), honouring HTTP(S)_PROXY / NO_PROXY and SSL_CERT_FILE (else certifi's CA
bundle when installed, like the SDK). Failures are distinct exceptions: HTTPStatusError (the
endpoint answered with an error status), ConnectError (no connection could be made), ReadTimeout
(no bytes within the timeout), ConnectionLost (the connection broke once made) and StreamError
(an error event inside the stream).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

USER_AGENT = "ooda/0.1"
MAX_ERROR_BODY = 64 * 1024


class EndpointError(Exception):
    """Anything the endpoint or the network did to a request."""


class HTTPStatusError(EndpointError):
    """The endpoint answered with status >= 400."""

    def __init__(self, status_code: int, headers: dict[str, str], body: object, text: str):
        self.status_code = status_code
        self.headers = headers
        """Response headers, names in lower case."""
        self.body = body
        """The JSON body when it was JSON, else None."""
        self.message = text.strip().splitlines()[0] if text.strip() else f"HTTP {status_code}"
        super().__init__(f"Error code: {status_code} - {text.strip()[:300]}")


class ConnectError(EndpointError):
    """No connection could be made (refused, unknown host, connect timeout, TLS failure)."""


class ReadTimeout(EndpointError):
    """Connected, but no bytes arrived within the timeout."""


class ConnectionLost(EndpointError):
    """The connection broke after it was made (reset, cut off mid-stream)."""


class StreamError(EndpointError):
    """The stream carried an error event instead of a chunk."""


def _ssl_context() -> ssl.SSLContext:
    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:
            cafile = None
    return ssl.create_default_context(cafile=cafile)


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy URL the environment names for this scheme and host, if any."""
    names = (f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY")
    proxy = next((os.environ[n] for n in names if os.environ.get(n)), None)
    if proxy is None:
        return None
    import urllib.request

    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return None if bypass(host) else proxy


class Endpoint:
    """One base URL (…/v1) and its API key; every request opens its own connection, so one
    Endpoint may be used from many threads."""

    def __init__(self, base_url: str, api_key: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.api_key = api_key
        self._context: ssl.SSLContext | None = None

    def _connection(self, connect_timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
        """An unconnected connection and the request target to send on it."""
        proxy = _proxy_for(self.scheme, self.host)
        target_host = f"[{self.host}]" if ":" in self.host else self.host
        if proxy is None:
            if self.scheme == "https":
                if self._context is None:
                    self._context = _ssl_context()
                return http.client.HTTPSConnection(
                    self.host, self.port, timeout=connect_timeout_s, context=self._context
                ), ""
            return http.client.HTTPConnection(self.host, self.port, timeout=connect_timeout_s), ""
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        proxy_port = via.port or 80
        if self.scheme == "https":
            if self._context is None:
                self._context = _ssl_context()
            tunnel = http.client.HTTPSConnection(
                via.hostname or "", proxy_port, timeout=connect_timeout_s, context=self._context
            )
            tunnel.set_tunnel(self.host, self.port)
            return tunnel, ""
        plain = http.client.HTTPConnection(via.hostname or "", proxy_port, timeout=connect_timeout_s)
        return plain, f"http://{target_host}:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        timeout_s: float,
        connect_timeout_s: float | None = None,
        stream: bool = False,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send one request; the open connection and its (2xx) response. The caller closes the
        connection. Raises the module's exceptions."""
        conn, absolute = self._connection(min(connect_timeout_s or timeout_s, timeout_s))
        headers = {
            "Authorization": f"Bearer {self.api_key}",
            "User-Agent": USER_AGENT,
            "Accept": "text/event-stream" if stream else "application/json",
        }
        payload = None
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        try:
            if conn.sock is not None:
                conn.sock.settimeout(timeout_s)
            conn.request(method, absolute + self.prefix + path, body=payload, headers=headers)
            response = conn.getresponse()
        except TimeoutError as exc:
            conn.close()
            raise ReadTimeout(f"no answer within {timeout_s:g}s") from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionLost(f"the connection broke: {exc}") from exc
        if response.status >= 400:
            try:
                raw = response.read(MAX_ERROR_BODY)
            except (OSError, http.client.HTTPException):
                raw = b""
            finally:
                conn.close()
            text = raw.decode("utf-8", "replace")
            try:
                parsed: object = json.loads(text)
            except ValueError:
                parsed = None
            found = {k.lower(): v for k, v in response.getheaders()}
            raise HTTPStatusError(response.status, found, parsed, text)
        return conn, response

    def get_json(self, path: str, *, timeout_s: float) -> object:
        """GET a JSON document."""
        conn, response = self.request("GET", path, timeout_s=timeout_s)
        try:
            return json.loads(response.read())
        except (OSError, http.client.HTTPException) as exc:
            raise ConnectionLost(f"the connection broke: {exc}") from exc
        except ValueError:
            return None
        finally:
            conn.close()

    def stream_chat(
        self, body: dict[str, Any], *, timeout_s: float, connect_timeout_s: float
    ) -> ChatStream:
        """POST /chat/completions with stream=true; iterate the returned stream's chunks."""
        conn, response = self.request(
            "POST", "/chat/completions", body={**body, "stream": True}, timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s, stream=True,
        )
        return ChatStream(conn, response)


class ChatStream:
    """The chunks (parsed JSON objects) of a streamed completion, up to `data: [DONE]`."""

    def __init__(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse):
        self._conn = conn
        self._response = response

    def __iter__(self) -> Iterator[dict[str, Any]]:
        data: list[str] = []
        while True:
            try:
                raw = self._response.readline(1 << 20)
            except TimeoutError as exc:
                raise ReadTimeout("the stream stalled") from exc
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise ConnectionLost(f"the stream broke off: {exc}") from exc
            if not raw:
                return  # the end without [DONE]: the caller decides whether that is complete
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
                continue
            if line or not data:
                continue  # event:, id:, comments; or a blank line with nothing pending
            payload, data = "\n".join(data), []
            if payload.strip() == "[DONE]":
                return
            try:
                chunk = json.loads(payload)
            except ValueError as exc:
                raise StreamError(f"unreadable stream event: {payload[:200]}") from exc
            if isinstance(chunk, dict) and chunk.get("error") is not None:
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else error
                raise StreamError(f"the endpoint sent an error mid-stream: {message}")
            if isinstance(chunk, dict):
                yield chunk

    def close(self) -> None:
        """Drop the connection (also when the stream was not read to its end)."""
        try:
            if self._conn.sock is not None:
                self._conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._conn.close()
