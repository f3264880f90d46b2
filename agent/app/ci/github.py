"""GitHub for `ooda ci`: the pull request context, a small REST client (one marked issue
comment kept up to date, review comments with suggestions), and the optional fix branch.

The context comes from the environment GitHub Actions sets (`GITHUB_API_URL`, `GITHUB_TOKEN`,
`GITHUB_REPOSITORY`, `GITHUB_EVENT_PATH`); HTTP goes through httpx2 with a few retries on
rate limits, server errors and broken connections.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.support import git as support_git
from ooda.agent.support.textsafe import printable

DEFAULT_API_URL = "https://api.github.com"
COMMENT_MARKER = "<!-- ooda-ci -->"
"""Hidden first line of the bot's comment: re-runs find it and edit it in place."""
MAX_COMMENT_CHARS = 65_000
"""GitHub rejects issue comments longer than 65,536 characters."""
BRANCH_PREFIX = "ooda-fix/"
"""Fix branches are named `ooda-fix/<short sha of the fixed commit>`; workflows must ignore
them, and `ooda ci` does not run on them, so the bot never triggers itself."""
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


class GitHubError(InfraError):
    """The GitHub API refused or failed a request; carries the HTTP status (0 = no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------- event file


@dataclass
class PullRequestEvent:
    """What the workflow's event file says about the pull request (all fields optional)."""

    name: str | None = None
    """"pull_request", "pull_request_target", "workflow_run" (from GITHUB_EVENT_NAME or the
    payload's shape)."""
    number: int | None = None
    title: str | None = None
    body: str | None = None
    head_sha: str | None = None
    head_branch: str | None = None
    base_sha: str | None = None
    """The commit the pull request is based on (a `pull_request` event's `base.sha`)."""


def read_event(path: Path | None, event_name: str | None = None) -> PullRequestEvent:
    """Parse a `pull_request` or `workflow_run` event payload; other events give no PR."""
    if path is None:
        return PullRequestEvent(name=event_name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"event file {path} (GITHUB_EVENT_PATH) does not exist") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read the event file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"event file {path} does not hold a JSON object")
    pr = data.get("pull_request")
    if isinstance(pr, dict):
        head = pr.get("head")
        head = head if isinstance(head, dict) else {}
        base = pr.get("base")
        base = base if isinstance(base, dict) else {}
        return PullRequestEvent(
            name=event_name or "pull_request",
            number=_int(pr.get("number", data.get("number"))),
            title=_str(pr.get("title")),
            body=_str(pr.get("body")),
            head_sha=_str(head.get("sha")),
            head_branch=_str(head.get("ref")),
            base_sha=_str(base.get("sha")),
        )
    run = data.get("workflow_run")
    if isinstance(run, dict):
        prs = [p for p in run.get("pull_requests") or [] if isinstance(p, dict)]
        return PullRequestEvent(
            name=event_name or "workflow_run",
            number=_int(prs[0].get("number")) if prs else None,
            title=_str(run.get("display_title")),
            body=None,
            head_sha=_str(run.get("head_sha")),
            head_branch=_str(run.get("head_branch")),
        )
    return PullRequestEvent(name=event_name)


def event_from_env(env: Mapping[str, str] | None = None) -> PullRequestEvent:
    """The event GitHub Actions describes in GITHUB_EVENT_PATH, if any."""
    env = os.environ if env is None else env
    path = env.get("GITHUB_EVENT_PATH")
    return read_event(Path(path) if path else None, env.get("GITHUB_EVENT_NAME"))


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


# --------------------------------------------------------------------------- target


@dataclass
class PullRequestTarget:
    """Where to post: API root, credentials, repository and pull request number."""

    api_url: str
    token: str
    repository: str
    """"owner/name"."""
    number: int


def target_from_env(
    pr: int | None, event: PullRequestEvent, env: Mapping[str, str] | None = None
) -> PullRequestTarget:
    """Check that everything needed to post is there; say how to fix what is missing."""
    env = os.environ if env is None else env
    token = env.get("GITHUB_TOKEN", "").strip()
    if not token:
        raise UsageError(
            "--post github needs GITHUB_TOKEN: add `env: GITHUB_TOKEN: ${{ github.token }}` "
            "to the step (with `permissions: pull-requests: write`)"
        )
    repository = env.get("GITHUB_REPOSITORY", "").strip()
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repository):
        raise UsageError(
            "--post github needs GITHUB_REPOSITORY=owner/name (set by GitHub Actions; "
            f"got {repository!r})"
        )
    number = pr if pr is not None else event.number
    if number is None:
        raise UsageError(
            "--post github needs a pull request number: pass --pr N, or run on a "
            "pull_request or workflow_run event (GITHUB_EVENT_PATH)"
        )
    if number < 1:
        raise UsageError(f"--pr must be a positive number (got {number})")
    api_url = (env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
    return PullRequestTarget(api_url, token, repository, number)


# --------------------------------------------------------------------------- client


class GitHubClient:
    """The handful of REST calls `ooda ci` makes, on one connection pool."""

    def __init__(
        self,
        target: PullRequestTarget,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 1.0,
    ) -> None:
        self.target = target
        self.retries = retries
        self.backoff_s = backoff_s
        self._http = httpx2.Client(
            base_url=target.api_url,
            timeout=timeout_s,
            headers={
                "Authorization": f"Bearer {target.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "ooda-ci",
            },
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- comments

    @property
    def _repo_path(self) -> str:
        return f"/repos/{self.target.repository}"

    def list_issue_comments(self) -> list[dict[str, Any]]:
        """Every comment on the pull request's conversation (follows pagination)."""
        url: str | None = f"{self._repo_path}/issues/{self.target.number}/comments"
        params: dict[str, Any] | None = {"per_page": 100}
        comments: list[dict[str, Any]] = []
        pages = 0
        while url is not None and pages < 50:
            response = self._request("GET", url, params=params)
            page = response.json()
            if not isinstance(page, list):
                raise GitHubError(f"GET {url}: expected a list of comments", response.status_code)
            comments += [c for c in page if isinstance(c, dict)]
            match = _NEXT_LINK.search(response.headers.get("link", ""))
            url, params = (match.group(1), None) if match else (None, None)
            pages += 1
        return comments

    def create_issue_comment(self, body: str) -> dict[str, Any]:
        url = f"{self._repo_path}/issues/{self.target.number}/comments"
        return self._json("POST", url, {"body": printable(body)})

    def update_issue_comment(self, comment_id: int, body: str) -> dict[str, Any]:
        url = f"{self._repo_path}/issues/comments/{comment_id}"
        return self._json("PATCH", url, {"body": printable(body)})

    def upsert_comment(
        self, body: str, marker: str = COMMENT_MARKER
    ) -> tuple[dict[str, Any], bool]:
        """Edit the comment carrying `marker` (the newest, if several), else create one.

        Returns the comment and whether it was created."""
        if marker not in body:
            body = f"{marker}\n{body}"
        mine = [c for c in self.list_issue_comments() if marker in str(c.get("body") or "")]
        if mine:
            comment_id = mine[-1].get("id")
            if isinstance(comment_id, int):
                return self.update_issue_comment(comment_id, body), False
        return self.create_issue_comment(body), True

    # ---------------------------------------------------------------- reviews

    def create_review(
        self, commit_id: str | None, body: str, comments: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """A COMMENT review with inline comments (suggestions) on the pull request.

        Comment text leaves ooda here: control characters (bidi ones too) are made visible."""
        comments = [{**c, "body": printable(str(c.get("body", "")))} for c in comments]
        payload: dict[str, Any] = {"event": "COMMENT", "body": printable(body), "comments": comments}
        if commit_id:
            payload["commit_id"] = commit_id
        return self._json("POST", f"{self._repo_path}/pulls/{self.target.number}/reviews", payload)

    # ---------------------------------------------------------------- HTTP

    def _json(self, method: str, url: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = self._request(method, url, json=payload)
        data = response.json() if response.content else {}
        return data if isinstance(data, dict) else {}

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx2.Response:
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self._http.request(method, url, **kwargs)
            except httpx2.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in RETRY_STATUSES:
                last = f"HTTP {response.status_code}"
                continue
            if response.is_success:
                return response
            raise _refusal(method, url, response)
        raise GitHubError(
            f"GitHub API {method} {url} failed after {self.retries + 1} tries ({last}) "
            f"at {self.target.api_url}"
        )


def _refusal(method: str, url: str, response: httpx2.Response) -> GitHubError:
    status = response.status_code
    try:
        detail = str(response.json().get("message", ""))
    except (ValueError, AttributeError):
        detail = response.text[:200]
    hint = {
        401: "GITHUB_TOKEN was rejected",
        403: "the token lacks permission: give the job `permissions: pull-requests: write`",
        404: "no such repository or pull request, or the token cannot see it",
        422: "GitHub rejected the content (for review suggestions: lines outside the PR diff)",
    }.get(status, "")
    parts = [f"GitHub API {method} {url}: HTTP {status}", detail, hint]
    return GitHubError("; ".join(p for p in parts if p), status)


# --------------------------------------------------------------------------- git: fix branches


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git in `repo` (through support.git, the one git runner) with text output; a failure
    is an InfraError with git's own message."""
    try:
        ran = support_git.git(repo, *args, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"git {args[0]}: {exc}") from exc
    done = subprocess.CompletedProcess(
        ran.args, ran.returncode,
        ran.stdout.decode("utf-8", "replace"), ran.stderr.decode("utf-8", "replace"),
    )
    if check and done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise InfraError(f"git {' '.join(args[:2])}: {message[-1] if message else 'failed'}")
    return done


def current_branch(repo: Path, event: PullRequestEvent, env: Mapping[str, str]) -> str | None:
    """The branch under test: the PR head, the workflow_run head, the ref, or git's HEAD."""
    for value in (env.get("GITHUB_HEAD_REF"), event.head_branch, env.get("GITHUB_REF_NAME")):
        if value:
            return value
    try:
        done = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    except InfraError:  # no git at all: no branch to go by
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def push_fix_branch(repo: Path, patch: str, message: str) -> str:
    """Commit `patch` on `ooda-fix/<short sha>` in a temporary clone and push it to the
    checkout's `origin`, with the checkout's credentials (actions/checkout's extraheader).
    The checkout itself is not touched."""
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    url = git(repo, "remote", "get-url", "origin", check=False).stdout.strip()
    if not url:
        raise UsageError(f"--push-branch: {repo} has no 'origin' remote to push to")
    branch = f"{BRANCH_PREFIX}{head[:10]}"
    headers = git(repo, "config", "--get-regexp", r"^http\..*\.extraheader$", check=False)
    config: dict[str, str] = {}
    for i, line in enumerate(headers.stdout.splitlines()):
        key, _, value = line.partition(" ")
        config |= {f"GIT_CONFIG_KEY_{i}": key, f"GIT_CONFIG_VALUE_{i}": value}
    config["GIT_CONFIG_COUNT"] = str(len(config) // 2)
    identity = {
        "GIT_AUTHOR_NAME": "ooda-ci", "GIT_AUTHOR_EMAIL": "ooda-ci@users.noreply.github.com",
        "GIT_COMMITTER_NAME": "ooda-ci", "GIT_COMMITTER_EMAIL": "ooda-ci@users.noreply.github.com",
    }
    with tempfile.TemporaryDirectory(prefix="ooda-ci-push-") as tmp:
        clone = Path(tmp) / "clone"
        # --shared reads the checkout's objects in place; new objects go to the clone only.
        git(Path(tmp), "clone", "--quiet", "--shared", "--no-checkout", str(repo.resolve()),
            str(clone))
        git(clone, "checkout", "--quiet", "--detach", head)
        patch_file = Path(tmp) / "fix.diff"
        patch_file.write_text(patch, encoding="utf-8")
        git(clone, "apply", "--index", str(patch_file))
        git(clone, "commit", "--quiet", "--no-verify", "-m", message, env=identity)
        git(clone, "push", "--quiet", "--force", url, f"HEAD:refs/heads/{branch}", env=config)
    return branch
