"""Which of a CI report's failures are the pull request's own.

A red job often carries failures the pull request did not cause (a test that fails on the
target branch already: a flaky one, one that needs the network or a secret). Making them all
must-pass asks the model for a fix it cannot give. So the reported failing tests run once more,
in the sandbox, on the commit the pull request is based on: those failing there too fail
*before this PR* (likely unrelated): they are named, left out of what the fix must repair, and
kept out of what it must not break. The rest (including tests the PR adds, which do not exist on
the base) are the PR's failures, the fix's job.

The base commit: `--base REV`, else the workflow event's `pull_request.base.sha` (fetched at
depth 1 when the checkout lacks it), else the first parent of a merge checkout (GitHub's
`refs/pull/N/merge`). Without one, every reported failure is the fix's job, and the comment
says the split could not be made and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.app.ci.github import PullRequestEvent, git
from ooda.agent.app.ci.outcome import FailureReport
from ooda.agent.app.run import RunOptions
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import SandboxBackend
from ooda.agent.support import git as support_git
from ooda.agent.support.tarsafe import extract_all
from ooda.agent.verify.plan import draft_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import VerifierOptions, task_from_repo

FETCH_TIMEOUT_S = 120


@dataclass(frozen=True)
class BaseCheck:
    """What the run on the pull request's base said of the reported failures."""

    rev: str | None = None
    """The base commit checked (short sha), or None when there was none to check."""
    earlier: tuple[str, ...] = ()
    """Reported failing tests that fail on the base too."""
    note: str = ""
    """Why no check was made (said in comment.md), when `rev` is None."""


def find_base(repo: Path, given: str | None, event: PullRequestEvent) -> tuple[str | None, str]:
    """The pull request's base commit (full sha) or None, and when None, why not. A `--base`
    that names no commit is exit 2; the event's is fetched when missing."""
    if given:
        sha = _commit(repo, given)
        if sha is None:
            raise UsageError(f"--base {given}: no such commit in {repo}")
        return sha, ""
    if event.base_sha:
        sha = _commit(repo, event.base_sha) or _fetched(repo, event.base_sha)
        if sha is not None:
            return sha, ""
        return None, (f"the pull request's base {event.base_sha[:12]} could not be fetched "
                      "into the checkout")
    parents = _run(repo, "rev-list", "--parents", "-n", "1", "HEAD").split()
    if len(parents) == 3:  # a merge checkout: HEAD = base + the PR's head
        return parents[1], ""
    return None, "no base commit known (give --base REV, e.g. --base origin/main)"


def failing_before(repo: Path, rev: str, ids: list[str], options: RunOptions,
                   backend: SandboxBackend, requirements: Path | None = None) -> tuple[str, ...]:
    """Of `ids`, those that fail (or error) on commit `rev`, run in the sandbox as the
    task's tests run (a test the base lacks is not among them)."""
    with tempfile.TemporaryDirectory(prefix="ooda-ci-base-") as scratch:
        tree = Path(scratch) / "repo"
        _export(repo, rev, tree)
        task = task_from_repo(tree, statement="(the pull request's base)", fail_to_pass=ids,
                              pass_to_pass=[], test_cmd=None, verifiers=VerifierOptions(),
                              task_id="base", requirements=requirements)
        plan = draft_plan(task, options.environment, options.sandbox, options.stages)
        verifier = TaskVerifier(plan, backend, Path(scratch) / "work", concurrency=1,
                                retry_failed_environment=False)
        try:
            outcomes = verifier.run_base_tests(ids)
        finally:
            verifier.close()
    return tuple(i for i in ids if outcomes.get(i) in ("failed", "error"))


def check_base(repo: Path, given: str | None, event: PullRequestEvent, report: FailureReport,
               options: RunOptions, backend: SandboxBackend, requirements: Path | None,
               say: Callable[..., object]) -> BaseCheck:
    """Run the report's failing tests on the pull request's base; what they did there."""
    rev, why = find_base(repo, given, event)
    if rev is None:
        say(f"Every reported failure must be fixed: {why}.")
        return BaseCheck(note=why)
    short = rev[:12]
    say(f"Running the {len(report.fail_to_pass)} reported failing test(s) on the base "
        f"{short}, before this pull request...")
    earlier = failing_before(repo, rev, report.fail_to_pass, options, backend, requirements)
    return BaseCheck(rev=short, earlier=earlier)


def split(report: FailureReport, check: BaseCheck) -> FailureReport:
    """The report whose must-pass tests are the pull request's failures only; the tests that
    fail on the base too are set apart (neither fixed nor kept passing)."""
    if check.rev is None:
        return dataclasses.replace(report, base_note=check.note)
    if not check.earlier:
        return dataclasses.replace(report, base_rev=check.rev)
    earlier = set(check.earlier)
    return dataclasses.replace(
        report,
        fail_to_pass=[t for t in report.fail_to_pass if t not in earlier],
        failures=[f for f in report.failures if f.test_id not in earlier],
        failing_before=[f for f in report.failures if f.test_id in earlier],
        base_rev=check.rev,
    )


def _commit(repo: Path, rev: str) -> str | None:
    out = _run(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return out or None


def _fetched(repo: Path, sha: str) -> str | None:
    with contextlib.suppress(InfraError, subprocess.TimeoutExpired, OSError):
        done = support_git.git(repo, "fetch", "--no-tags", "--quiet", "--depth=1", "origin", sha,
                               timeout_s=FETCH_TIMEOUT_S)
        if done.returncode == 0:
            return _commit(repo, sha)
    return None


def _run(repo: Path, *args: str) -> str:
    try:
        done = git(repo, *args, check=False)
    except InfraError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _export(repo: Path, rev: str, into: Path) -> None:
    """The tree of `rev` as plain files (git archive), outside the checkout."""
    try:
        done = support_git.git(repo, "archive", "--format=tar", rev, timeout_s=FETCH_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"git archive {rev[:12]}: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InfraError(f"git archive {rev[:12]}: {message[-1] if message else 'failed'}")
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        extract_all(tar, into)
