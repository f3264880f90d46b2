"""`ooda ci`: turn a failing CI job into a task, run the loop, write (and post) a suggestion.

Inputs: a checkout where tests failed, plus the failed job's JUnit XML (`--junit`) or a test
command to reproduce the failure in the sandbox (`--test-cmd`, through the same derivation
`ooda run --test-cmd` uses). The failing tests become fail_to_pass, the passing ones
pass_to_pass, and the statement is built from the failures (and the pull request's title and
body when the workflow's event file has them).

Outputs in `--out`: `suggestion.diff` (when a verified fix was found), `comment.md` (what
failed and the fix, or what was tried), `suggestions.json` (GitHub review suggestions for the
hunks that fit in one) and `result.json`. The checkout itself is never modified: candidates run
on copies, and `--push-branch` commits in a temporary clone.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from ooda.agent.app.ci.github import (
    BRANCH_PREFIX,
    COMMENT_MARKER,
    MAX_COMMENT_CHARS,
    GitHubClient,
    GitHubError,
    PullRequestEvent,
    PullRequestTarget,
    current_branch,
    event_from_env,
    git,
    push_fix_branch,
    target_from_env,
)
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.core.runlog import write_atomic, write_json_atomic
from ooda.agent.support import fstree
from ooda.agent.support.textsafe import printable
from ooda.tasks.loader import Task, VerifierOptions, task_from_repo

if TYPE_CHECKING:
    from rich.console import Console

    from ooda.agent.app.run import RunOptions
    from ooda.agent.contracts.protocols import SandboxBackend
    from ooda.agent.core.loop import Attempt, RunResult
    from ooda.agent.core.runlog import RunLog

MESSAGE_CHARS = 1_200
"""Failure text kept per failing test in the statement."""
STATEMENT_FAILURE_CHARS = 8_000
"""Failure text kept in the statement in all."""
PR_BODY_CHARS = 3_000
COMMENT_TESTS = 15
COMMENT_ATTEMPTS = 12
COMMENT_DIFF_CHARS = 40_000


@dataclass
class CiOptions:
    """What `ooda ci` is told besides the loop's own options (RunOptions)."""

    repo: Path = Path(".")
    junit: list[Path] = field(default_factory=list)
    test_cmd: str | None = None
    out: Path = Path("ooda-ci-out")
    post: str | None = None
    """None, or "github"."""
    pr: int | None = None
    review: bool = False
    push_branch: bool = False
    task_id: str | None = None
    requirements: Path | None = None
    """Third-party packages the repository's tests need in the sandbox (requirements.txt)."""
    verifiers: VerifierOptions = field(default_factory=VerifierOptions)


@dataclass
class FailedTest:
    """One failing test and what it said."""

    test_id: str
    message: str


@dataclass
class FailureReport:
    """What the failed job says: failing and passing tests, with the failures' text."""

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    failures: list[FailedTest]
    source: str
    """Where it came from, for people: "JUnit report.xml" or "`python -m pytest -q`"."""


@dataclass
class CiOutcome:
    """What one `ooda ci` run did."""

    status: str
    reason: str
    summary: dict[str, Any]
    out_dir: Path
    comment: str
    suggestions: list[dict[str, Any]]
    patch: str | None = None
    run_dir: Path | None = None
    comment_url: str | None = None
    review_url: str | None = None
    branch: str | None = None
    skipped: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.skipped:
            return 0
        return {"passed": 0, "failed": 1}.get(self.status, 3)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.summary,
            "status": self.status,
            "reason": self.reason,
            "out_dir": str(self.out_dir),
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "suggestion": str(self.out_dir / "suggestion.diff") if self.patch else None,
            "comment": str(self.out_dir / "comment.md"),
            "suggestions": len(self.suggestions),
            "comment_url": self.comment_url,
            "review_url": self.review_url,
            "branch": self.branch,
            "skipped": self.skipped,
            "warnings": self.warnings,
        }


# --------------------------------------------------------------------------- JUnit XML


def parse_junit(paths: Sequence[Path], repo: Path) -> FailureReport:
    """Failing and passing tests from JUnit XML files, named as pytest node ids.

    The reading is the pytest verifier's own (`ooda.verifiers.pytest_check.run.parse_report`): a
    testcase's `file` attribute gives its path when present, else its dotted `classname` is
    matched against the repository's files. Skipped and xfailed tests are neither failing
    nor passing."""
    from ooda.verifiers.pytest_check.run import parse_report

    files = RepoFiles(repo)
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"--junit {path}: cannot read: {exc.strerror or exc}") from exc
        run = parse_report(data, files.all(), repo)
        if run is None:
            raise UsageError(f"--junit {path}: not a JUnit XML report")
        for node, outcome in run.outcomes.items():
            node = files.node_id(node)
            if RANK.get(outcome, 0) >= RANK.get(outcomes.get(node, ""), -1):
                outcomes[node] = outcome
                messages[node] = run.messages.get(node, messages.get(node, ""))
    if not outcomes:
        raise UsageError(f"--junit {', '.join(map(str, paths))}: no testcases found")
    failing = [n for n, o in outcomes.items() if o in ("failed", "error")]
    return FailureReport(
        fail_to_pass=failing,
        pass_to_pass=[n for n, o in outcomes.items() if o == "passed"],
        failures=[FailedTest(n, bound(messages.get(n, ""), MESSAGE_CHARS)) for n in failing],
        source="JUnit " + ", ".join(p.name for p in paths),
    )


RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "failed": 2, "error": 3}


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


# --------------------------------------------------------------------------- reproduction


def reproduce(task: Task, backend: SandboxBackend) -> FailureReport:
    """Run the task's test command on the base in the sandbox, through the derivation shared
    with `ooda run --test-cmd` (`ooda.agent.app.run.derive_test_lists`), and report what failed.

    A command that is not a pytest run gives no per-test outcomes: the report then has no
    test ids, and candidates are graded by the command's exit status."""
    from ooda.agent.app.run import derive_test_lists
    from ooda.agent.verify.verifier import TaskVerifier

    with tempfile.TemporaryDirectory(prefix="ooda-ci-") as work:
        verifier = TaskVerifier(task, backend, Path(work))
        try:
            derived = derive_test_lists(task, verifier)
        finally:
            verifier.close()
    return FailureReport(
        fail_to_pass=list(derived.fail_to_pass),
        pass_to_pass=list(derived.pass_to_pass),
        failures=[FailedTest(t, "") for t in derived.fail_to_pass],
        source=f"`{task.test_cmd}`",
    )


# --------------------------------------------------------------------------- statement


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


# --------------------------------------------------------------------------- suggestions


def suggestions_from_patch(patch: str) -> list[dict[str, Any]]:
    """GitHub review suggestions for the hunks that fit in one.

    A hunk fits when the lines it changes map onto one contiguous range of existing lines:
    from its first to its last changed line, context in between included. A pure insertion
    is anchored on the line just above it (or below, at the top of a file). New, deleted,
    renamed and binary files have no existing lines to suggest on."""
    try:
        patch_set = PatchSet(patch)
    except UnidiffParseError:
        return []
    suggestions = []
    for patched in patch_set:
        if (patched.is_added_file or patched.is_removed_file or patched.is_binary_file
                or patched.is_rename):
            continue
        for hunk in patched:
            lines = [ln for ln in hunk if ln.is_added or ln.is_removed or ln.is_context]
            changed = [i for i, ln in enumerate(lines) if ln.is_added or ln.is_removed]
            if not changed:
                continue
            first, last = changed[0], changed[-1]
            span = lines[first : last + 1]
            added = [ln.value for ln in span if not ln.is_removed]
            existing = [ln for ln in span if not ln.is_added]
            if existing:
                start, end = existing[0].source_line_no, existing[-1].source_line_no
                replacement = "".join(added)
            elif first > 0:
                anchor = lines[first - 1]
                start = end = anchor.source_line_no
                replacement = anchor.value + "".join(added)
            elif last + 1 < len(lines):
                anchor = lines[last + 1]
                start = end = anchor.source_line_no
                replacement = "".join(added) + anchor.value
            else:
                continue
            suggestions.append({
                "path": patched.path,
                "start_line": start,
                "line": end,
                "replacement": replacement,
            })
    return suggestions


def review_comments(suggestions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The review API's inline comments for `suggestions`."""
    comments = []
    for s in suggestions:
        text = s["replacement"]
        if text and not text.endswith("\n"):
            text += "\n"
        fence = _fence(text)
        comment: dict[str, Any] = {
            "path": s["path"],
            "line": s["line"],
            "side": "RIGHT",
            "body": f"ooda suggests:\n{fence}suggestion\n{text}{fence}",
        }
        if s["start_line"] < s["line"]:
            comment["start_line"] = s["start_line"]
            comment["start_side"] = "RIGHT"
        comments.append(comment)
    return comments


# --------------------------------------------------------------------------- comment


def render_comment(
    report: FailureReport,
    result: RunResult,
    *,
    branch: str | None = None,
    run_dir: Path | None = None,
) -> str:
    """comment.md: what failed, then the verified fix or what was tried."""
    summary = result.summary
    lines = [COMMENT_MARKER]
    if result.winner is not None:
        lines.append("### ooda: suggested fix for the failing tests (verified)")
    else:
        lines.append("### ooda: no verified fix for the failing tests")
    if report.fail_to_pass:
        lines += ["", f"**What failed** ({len(report.fail_to_pass)} test(s), "
                      f"from {report.source}):"]
    else:
        lines += ["", f"**What failed**: {report.source} (no per-test report)."]
    for failure in report.failures[:COMMENT_TESTS]:
        first = _headline(failure.message)
        lines.append(f"- `{failure.test_id}`" + (f": {_inline(first, 160)}" if first else ""))
    if len(report.failures) > COMMENT_TESTS:
        lines.append(f"- ... and {len(report.failures) - COMMENT_TESTS} more")
    lines.append("")
    stats = (
        f"{summary.get('attempts', len(result.attempts))} attempt(s) in "
        f"{result.rounds_used} round(s), {float(summary.get('wall_s', 0.0)):.1f} s, "
        f"tokens {_tokens(summary)}, model `{summary.get('model', '?')}`"
    )
    winner = result.winner
    if winner is not None:
        checks = _verifier_marks(winner)
        lines.append(f"**Suggested fix**{f' (passed: {checks})' if checks else ''}:")
        patch = winner.patch
        if len(patch) > COMMENT_DIFF_CHARS:
            patch = patch[:COMMENT_DIFF_CHARS] + "\n... (cut: the whole diff is suggestion.diff)\n"
        fence = _fence(patch)
        lines += ["", f"{fence}diff", patch.rstrip("\n"), fence, ""]
        lines.append(f"Found by attempt `{winner.attempt_id}` (round {winner.round}): {stats}.")
        if branch:
            lines.append(f"The fix is pushed as branch `{branch}`.")
        else:
            lines.append("Apply it with `git apply suggestion.diff` (from the job's artifacts).")
    else:
        lines.append(f"**What was tried**: {stats}; stopped: {result.reason}.")
        lines += ["", "| attempt | round | result | why |", "|---|---|---|---|"]
        for attempt in result.attempts[:COMMENT_ATTEMPTS]:
            lines.append(
                f"| `{attempt.attempt_id}` | {attempt.round} | {_attempt_result(attempt)} | "
                f"{_cell(_why(attempt))} |"
            )
        if len(result.attempts) > COMMENT_ATTEMPTS:
            lines.append(f"| ... | | {len(result.attempts) - COMMENT_ATTEMPTS} more | |")
    if run_dir is not None:
        lines += ["", f"<sub>ooda run `{run_dir.name}`</sub>"]
    text = printable("\n".join(lines) + "\n")  # candidate text: no terminal escapes
    return text if len(text) <= MAX_COMMENT_CHARS else text[: MAX_COMMENT_CHARS - 40] + "\n...\n"


def _headline(message: str) -> str:
    """The line of a failure that says most: pytest's first `E` line, else the first one."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    return errors[0] if errors else (lines[0] if lines else "")


def _verifier_marks(attempt: Attempt) -> str:
    results = attempt.verdict.results if attempt.verdict else []
    return ", ".join(r.name for r in results if r.status == "passed")


def _attempt_result(attempt: Attempt) -> str:
    if attempt.duplicate_of:
        return f"{attempt.status} (same patch as `{attempt.duplicate_of}`)"
    results = attempt.verdict.results if attempt.verdict else []
    failed = [r.name for r in results if r.status not in ("passed", "skipped")]
    return f"{attempt.status} ({failed[-1]})" if failed else attempt.status


def _why(attempt: Attempt) -> str:
    results = attempt.verdict.results if attempt.verdict else []
    for r in reversed(results):
        if r.status not in ("passed", "skipped") and r.summary.strip():
            return r.summary
    return attempt.reason or attempt.status


def _tokens(summary: Mapping[str, Any]) -> str:
    tokens = summary.get("tokens") or {}
    return f"{int(tokens.get('prompt', 0)):,} + {int(tokens.get('completion', 0)):,}"


def _inline(text: str, limit: int) -> str:
    text = " ".join(text.split()).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cell(text: str) -> str:
    return _inline(text, 140).replace("|", "\\|")


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    return "`" * max(3, longest + 1)


# --------------------------------------------------------------------------- the command

RunTaskFn = Callable[..., "tuple[RunResult, RunLog]"]


def run_ci(
    ci: CiOptions,
    run_options: RunOptions,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    env: Mapping[str, str] | None = None,
    run_task_fn: RunTaskFn | None = None,
    reproduce_fn: Callable[[Task, SandboxBackend], FailureReport] | None = None,
    backend: SandboxBackend | None = None,
) -> CiOutcome:
    """Everything `ooda ci` does; the CLI only maps the outcome to output and exit code.

    `run_task_fn`, `reproduce_fn` and `backend` replace the real loop, derivation and sandbox
    (tests)."""
    env = os.environ if env is None else env
    say = console.print if console is not None else (lambda *a, **k: None)
    repo = ci.repo.resolve() if ci.repo.exists() else ci.repo
    _check_inputs(ci, repo)
    run_options.validate()
    event = event_from_env(env)
    branch = current_branch(repo, event, env)
    if branch and branch.startswith(BRANCH_PREFIX):
        reason = f"branch {branch} is an ooda fix branch: not running on it"
        return CiOutcome("skipped", reason, {}, ci.out, "", [], skipped=reason)
    target: PullRequestTarget | None = None
    if ci.post == "github":
        target = target_from_env(ci.pr, event, env)
    if ci.push_branch:
        _check_pushable(repo)
    ci.out.mkdir(parents=True, exist_ok=True)

    task = task_from_repo(
        repo,
        statement="(filled in from the failures)",
        fail_to_pass=[],
        pass_to_pass=[],
        test_cmd=ci.test_cmd,
        verifiers=ci.verifiers,
        task_id=ci.task_id,
        requirements=ci.requirements,
    ) if ci.test_cmd else None

    with _backend_scope(run_options, backend) as the_backend:
        if ci.junit:
            report = parse_junit(ci.junit, repo)
        else:
            assert task is not None
            say(f"Reproducing the failure with `{ci.test_cmd}` in the sandbox...")
            report = (reproduce_fn or reproduce)(task, the_backend)
        if not report.fail_to_pass and not ci.test_cmd:
            raise UsageError(f"no failing test in {report.source}: nothing to fix")
        statement = build_statement(report, event, ci.test_cmd)
        task = task_from_repo(
            repo,
            statement=statement,
            fail_to_pass=report.fail_to_pass,
            pass_to_pass=report.pass_to_pass,
            test_cmd=ci.test_cmd,
            verifiers=ci.verifiers,
            task_id=ci.task_id,
            requirements=ci.requirements,
        )
        if run_task_fn is None:
            from ooda.agent.app.run import run_task

            run_task_fn = run_task
        result, log = run_task_fn(
            task, run_options, console=console, show_progress=show_progress,
            backend=the_backend,
        )

    outcome = _write_outputs(ci, report, result, log.dir)
    if result.winner is not None and ci.push_branch:
        title = f"ooda: fix {len(report.fail_to_pass) or 'the'} failing test(s)"
        try:
            outcome.branch = push_fix_branch(repo, result.winner.patch, title)
        except InfraError as exc:  # the suggestion stands; the comment says how to apply it
            outcome.warnings.append(f"fix branch not pushed: {exc}")
            say(f"[yellow]Fix branch not pushed:[/yellow] {exc}")
        else:
            outcome.comment = render_comment(report, result, branch=outcome.branch,
                                             run_dir=log.dir)
            write_atomic(ci.out / "comment.md", outcome.comment)
            say(f"Pushed the fix as branch {outcome.branch}.")
    if target is not None:
        _post(target, ci, event, repo, outcome, say)
    write_json_atomic(ci.out / "result.json", outcome.as_json())
    return outcome


def _check_inputs(ci: CiOptions, repo: Path) -> None:
    if not repo.is_dir():
        raise UsageError(f"--repo {ci.repo}: no such directory")
    if bool(ci.junit) == bool(ci.test_cmd):
        raise UsageError(
            "give one of --junit FILE (the failed job's report) or --test-cmd CMD"
        )
    for path in ci.junit:
        if not path.is_file():
            raise UsageError(f"--junit {path}: no such file")
    if ci.post not in (None, "github"):
        raise UsageError(f"--post must be 'github' (got {ci.post!r})")
    if ci.review and ci.post != "github":
        raise UsageError("--review posts review suggestions: it needs --post github")


def _check_pushable(repo: Path) -> None:
    """--push-branch needs a git checkout with a commit and an `origin` to push to."""
    checks = [
        (("rev-parse", "--verify", "--quiet", "HEAD"), "is not a git checkout with a commit"),
        (("remote", "get-url", "origin"), "has no 'origin' remote to push to"),
    ]
    for args, problem in checks:
        try:
            ok = git(repo, *args, check=False).returncode == 0
        except InfraError:
            ok = False
        if not ok:
            raise UsageError(f"--push-branch: {repo} {problem}")


@contextlib.contextmanager
def _backend_scope(options: RunOptions, given: SandboxBackend | None) -> Iterator[SandboxBackend]:
    """The sandbox backend shared by the derivation and the loop: the given one, or a fresh
    one closed at the end."""
    if given is not None:
        yield given
        return
    from ooda.agent.app.run import open_backend

    backend = open_backend(options.sandbox)
    try:
        yield backend
    finally:
        backend.close()


def _write_outputs(ci: CiOptions, report: FailureReport, result: RunResult,
                   run_dir: Path) -> CiOutcome:
    patch = result.winner.patch if result.winner is not None else None
    suggestion_file = ci.out / "suggestion.diff"
    if patch is not None:
        write_atomic(suggestion_file, patch)
    elif suggestion_file.exists():
        suggestion_file.unlink()  # a stale one from an earlier run would mislead
    suggestions = suggestions_from_patch(patch) if patch else []
    write_json_atomic(ci.out / "suggestions.json", suggestions)
    comment = render_comment(report, result, run_dir=run_dir)
    write_atomic(ci.out / "comment.md", comment)
    return CiOutcome(
        status=result.status, reason=result.reason, summary=dict(result.summary),
        out_dir=ci.out, comment=comment, suggestions=suggestions, patch=patch, run_dir=run_dir,
    )


def _post(target: PullRequestTarget, ci: CiOptions, event: PullRequestEvent, repo: Path,
          outcome: CiOutcome, say: Callable[..., object]) -> None:
    with GitHubClient(target) as client:
        comment, created = client.upsert_comment(outcome.comment)
        outcome.comment_url = str(comment.get("html_url") or comment.get("url") or "") or None
        say(f"{'Posted' if created else 'Updated'} the comment on "
            f"{target.repository}#{target.number}.")
        if ci.review and outcome.suggestions:
            commit = event.head_sha or _head_sha(repo)
            body = f"ooda: {len(outcome.suggestions)} suggested change(s), verified together."
            try:
                review = client.create_review(commit, body, review_comments(outcome.suggestions))
            except GitHubError as exc:
                if exc.status != 422:
                    raise
                outcome.warnings.append(f"review not posted: {exc}")
                say(f"[yellow]Review not posted:[/yellow] {exc}")
            else:
                outcome.review_url = str(review.get("html_url") or "") or None
                say(f"Posted a review with {len(outcome.suggestions)} suggestion(s).")


def _head_sha(repo: Path) -> str | None:
    if not (repo / ".git").exists():
        return None
    done = git(repo, "rev-parse", "HEAD", check=False)
    return done.stdout.strip() or None
