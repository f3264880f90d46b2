"""A fake GitHub REST API on loopback (stdlib http.server) that records every request.

Serves what `ooda ci --post github` uses: list/create/edit issue comments (paginated like
GitHub, with a Link header) and create pull request reviews. Requests must carry
`Authorization: Bearer <token>`.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeState:
    token: str
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    """id -> comment (with "issue" = the PR number it belongs to)."""
    reviews: list[dict[str, Any]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    next_id: int = 1000
    page_size: int = 2
    """Small on purpose, so that listing comments has to follow the Link header."""
    review_status: int = 200
    """Status answered to review creation (e.g. 422 to test the fallback)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


_COMMENTS = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
_COMMENT = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")
_REVIEWS = re.compile(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)/reviews$")


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        state = self.server.state
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with state.lock:
            state.requests.append(Recorded(
                self.command, url.path, parse_qs(url.query), dict(self.headers.items()), body
            ))
        if self.headers.get("Authorization") != f"Bearer {state.token}":
            self._reply(401, {"message": "Bad credentials"})
            return
        with state.lock:
            status, answer, headers = self._route(state, self.command, url.path, url.query, body)
        self._reply(status, answer, headers)

    def _route(
        self, state: FakeState, method: str, path: str, query: str, body: Any
    ) -> tuple[int, Any, dict[str, str] | None]:
        base = f"http://{self.server.server_address[0]}:{self.server.server_address[1]}"
        if m := _COMMENTS.match(path):
            issue = int(m.group(2))
            if method == "GET":
                page = int(parse_qs(query).get("page", ["1"])[0])
                mine = [c for c in state.comments.values() if c["issue"] == issue]
                chunk = mine[(page - 1) * state.page_size : page * state.page_size]
                headers = None
                if page * state.page_size < len(mine):
                    headers = {"Link": f'<{base}{path}?page={page + 1}>; rel="next"'}
                return 200, chunk, headers
            if method == "POST":
                comment_id = state.next_id
                state.next_id += 1
                comment = {
                    "id": comment_id, "issue": issue, "body": body["body"],
                    "html_url": f"https://github.example/{m.group(1)}/pull/{issue}#c{comment_id}",
                }
                state.comments[comment_id] = comment
                return 201, comment, None
        if (m := _COMMENT.match(path)) and method == "PATCH":
            comment_id = int(m.group(2))
            if comment_id not in state.comments:
                return 404, {"message": "Not Found"}, None
            state.comments[comment_id]["body"] = body["body"]
            return 200, state.comments[comment_id], None
        if (m := _REVIEWS.match(path)) and method == "POST":
            if state.review_status != 200:
                return state.review_status, {"message": "Unprocessable Entity"}, None
            review = {"id": len(state.reviews) + 1, "pr": int(m.group(2)), **body,
                      "html_url": f"https://github.example/{m.group(1)}/pull/{m.group(2)}#r"}
            state.reviews.append(review)
            return 200, review, None
        return 404, {"message": "Not Found"}, None

    do_GET = do_POST = do_PATCH = _handle  # noqa: N815 - stdlib naming


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: FakeState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class FakeGitHub:
    """Start with `with FakeGitHub(token) as gh:`; `gh.url` is the API root."""

    def __init__(self, token: str = "test-token") -> None:
        self.state = FakeState(token)
        self._server = _Server(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def requests(self, method: str | None = None) -> list[Recorded]:
        with self.state.lock:
            return [r for r in self.state.requests if method is None or r.method == method]

    def add_comment(self, issue: int, body: str) -> int:
        """Seed a comment someone else wrote."""
        with self.state.lock:
            comment_id = self.state.next_id
            self.state.next_id += 1
            self.state.comments[comment_id] = {"id": comment_id, "issue": issue, "body": body}
            return comment_id
