"""The task's statement from the failures (from a JUnit report, or from the plan's run of the
unpatched code when only a test command is given: agent/app/ci/run.py), bounded, with the pull
request's title and body when the event has them."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.app.ci.github import (
    PullRequestEvent,
)
from ooda.agent.app.ci.outcome import (
    PR_BODY_CHARS,
    STATEMENT_FAILURE_CHARS,
    FailureReport,
)
from ooda.agent.support import fstree


class RepoFiles:
    """The repository's Python files, listed once, to map reported paths onto."""

    SKIP = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox"})

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._all: list[str] | None = None

    def all(self) -> list[str]:
        if self._all is None:
            self._all = []
            for root, dirs, names in fstree.walk(self.repo):  # iterative: any depth
                dirs[:] = sorted(d for d in dirs if d not in self.SKIP)
                base = Path(root).relative_to(self.repo)
                self._all += [(base / f).as_posix() for f in sorted(names) if f.endswith(".py")]
        return self._all

    def find(self, rel: str) -> str | None:
        """`rel` if it is a file under the repo; else the one file whose path ends with it
        (tests run from a subdirectory report paths relative to it); else None."""
        while rel.startswith("./"):
            rel = rel[2:]
        if (self.repo / rel).is_file():
            return rel
        matches = [p for p in self.all() if p.endswith("/" + rel)]
        return matches[0] if len(matches) == 1 else None

    def node_id(self, node: str) -> str:
        """A reported node id with its path made relative to the repository root; a bare
        dotted module (pytest's name for a collection error) becomes its file."""
        path, sep, rest = node.partition("::")
        if not sep and not path.endswith(".py") and "/" not in path:
            dotted = path.replace(".", "/") + ".py"
            return self.find(dotted) or node
        located = self.find(path)
        return f"{located}{sep}{rest}" if located else node


def build_statement(
    report: FailureReport, event: PullRequestEvent, test_cmd: str | None = None
) -> str:
    """The issue text given to the model: the pull request, then each failure (bounded)."""
    if report.fail_to_pass:
        head = (f"The CI tests of this repository fail: {len(report.fail_to_pass)} failing "
                f"test(s) (from {report.source}). Fix the code so that they pass; do not edit "
                "the tests.")
    else:
        head = (f"The CI test command {report.source} fails. Fix the code so that it passes; "
                "do not edit the tests.")
    lines = [head]
    if event.number or event.title:
        lines += ["", f"Pull request{f' #{event.number}' if event.number else ''}: "
                  f"{(event.title or '').strip()}"]
        if event.body and event.body.strip():
            lines += ["", bound(event.body.strip(), PR_BODY_CHARS)]
    lines += ["", "Failing tests:"] if report.failures else []
    used = 0
    shown = 0
    for failure in report.failures:
        text = failure.message.strip()
        if used + len(text) > STATEMENT_FAILURE_CHARS and shown:
            break
        lines.append(f"- {failure.test_id}")
        if text:
            lines += ["  " + line for line in text.splitlines()]
        used += len(text) + len(failure.test_id)
        shown += 1
    if shown < len(report.failures):
        lines.append(f"- ... and {len(report.failures) - shown} more failing test(s)")
    if test_cmd:
        lines += ["", f"The tests run with: {test_cmd}"]
    return "\n".join(lines)


def bound(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, head and tail kept."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3 - 20):]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"

