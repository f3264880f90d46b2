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

The task's plan is made as every command makes it (agent/verify/plan.py: the environment
detected as `ooda run` detects it, `--environment`, the stages); with `--test-cmd` the
reproduction is the plan's own run of the unpatched code, and the loop judges by that same
plan and verifier.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ooda.agent.app.ci.comment import (
    render_comment,
    review_comments,
    stages_off_reasons,
    suggestions_from_patch,
)
from ooda.agent.app.ci.earlier import check_base, split
from ooda.agent.app.ci.github import (
    BRANCH_PREFIX,
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
from ooda.agent.app.ci.junit import parse_junit
from ooda.agent.app.ci.outcome import CiOptions, CiOutcome, FailedTest, FailureReport
from ooda.agent.app.ci.statement import build_statement
from ooda.agent.app.run import (
    Prestarted,
    RunOptions,
    clean_leftovers,
    prepare_task,
    run_task,
)
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import SandboxBackend
from ooda.agent.core.loop import RunResult
from ooda.agent.core.runlog import RunLog, write_atomic, write_json_atomic
from ooda.agent.sandbox.registry import open_backend
from ooda.agent.support.textsafe import markup_safe
from ooda.agent.verify.plan import TaskPlan, draft_plan
from ooda.tasks.loader import VerifierOptions, task_from_repo

if TYPE_CHECKING:
    from rich.console import Console



RunTaskFn = Callable[..., "tuple[RunResult, RunLog]"]


def run_ci(
    ci: CiOptions,
    run_options: RunOptions,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    env: Mapping[str, str] | None = None,
    run_task_fn: RunTaskFn | None = None,
    backend: SandboxBackend | None = None,
    prestarted: Prestarted | None = None,
) -> CiOutcome:
    """Everything `ooda ci` does; the CLI only maps the outcome to output and exit code.

    `run_task_fn` and `backend` replace the real loop and sandbox (tests); `prestarted` is
    what start-up began for this command (a started container)."""
    env = os.environ if env is None else env
    say = console.print if console is not None else (lambda *a, **k: None)
    repo = ci.repo.resolve() if ci.repo.exists() else ci.repo
    _check_inputs(ci, repo)
    run_options = run_options.checked()
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

    def draft(statement: str, report: FailureReport | None = None) -> TaskPlan:
        task = task_from_repo(
            repo, statement=statement,
            fail_to_pass=report.fail_to_pass if report else [],
            pass_to_pass=report.pass_to_pass if report else [],
            test_cmd=ci.test_cmd, verifiers=VerifierOptions(), task_id=ci.task_id,
            requirements=ci.requirements,
        )
        return draft_plan(task, run_options.environment, run_options.sandbox,
                          run_options.stages, time_budget_s=run_options.loop.time_budget_s)

    if run_task_fn is None:
        run_task_fn = functools.partial(run_task, prestarted=prestarted)
    with contextlib.ExitStack() as stack:
        the_backend = stack.enter_context(_backend_scope(run_options, backend, prestarted))
        if ci.junit:
            report = parse_junit(ci.junit, repo)
            if not report.fail_to_pass:
                raise UsageError(f"no failing test in {report.source}: nothing to fix")
            check = check_base(repo, ci.base, event, report, run_options, the_backend,
                               ci.requirements, say)
            report = split(report, check)
            if not report.fail_to_pass:
                reason = (f"every reported failure ({len(report.failing_before)}) fails on the "
                          f"base {check.rev} too, before this pull request: none is its own")
                comment = render_comment(report, None, run_dir=None)
                write_atomic(ci.out / "comment.md", comment)
                outcome = CiOutcome("skipped", reason, {}, ci.out, comment, [], skipped=reason)
                if target is not None:
                    _post(target, ci, event, repo, outcome, say)
                write_json_atomic(ci.out / "result.json", outcome.as_json())
                return outcome
            plan = draft(build_statement(report, event, ci.test_cmd), report)
            _say_environment(plan, say)
            result, log = run_task_fn(plan.task, run_options, console=console,
                                      show_progress=show_progress, backend=the_backend,
                                      plan=plan)
        else:
            plan = draft("(filled in from the failures)")
            _say_environment(plan, say)
            say(f"Reproducing the failure with `{ci.test_cmd}` in the sandbox...")
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ooda-ci-")))
            plan, verifier = prepare_task(plan, run_options, the_backend, work, prestarted)
            stack.callback(verifier.close)
            report = failure_report(plan)
            plan = plan.with_statement(build_statement(report, event, ci.test_cmd))
            verifier.use(plan)
            result, log = run_task_fn(plan.task, run_options, console=console,
                                      show_progress=show_progress, backend=the_backend,
                                      plan=plan, verifier=verifier)

    stages_off = stages_off_reasons(
        {n: getattr(plan.stages, n) for n in ("ruff", "mypy", "security")},
        {n: getattr(plan.task.verifiers, n) for n in ("ruff", "mypy", "security")},
        {"ruff": run_options.stages.no_ruff, "mypy": run_options.stages.no_mypy})
    outcome = _write_outputs(ci, report, result, log.dir, stages_off)
    if result.winner is not None and ci.push_branch:
        title = f"ooda: fix {len(report.fail_to_pass) or 'the'} failing test(s)"
        try:
            outcome.branch = push_fix_branch(repo, result.winner.patch, title)
        except InfraError as exc:  # the suggestion stands; the comment says how to apply it
            outcome.warnings.append(f"fix branch not pushed: {exc}")  # printed by the CLI
        else:
            outcome.comment = render_comment(report, result, branch=outcome.branch,
                                             run_dir=log.dir, stages_off=stages_off)
            write_atomic(ci.out / "comment.md", outcome.comment)
            say(f"Pushed the fix as branch {outcome.branch}.")
    if target is not None:
        _post(target, ci, event, repo, outcome, say)
    write_json_atomic(ci.out / "result.json", outcome.as_json())
    return outcome


def _say_environment(plan: TaskPlan, say: Callable[..., object]) -> None:
    """The one line on what the tests run in (said once, before anything runs)."""
    if plan.environment_line:
        say(markup_safe(plan.environment_line), highlight=False)


def failure_report(plan: TaskPlan) -> FailureReport:
    """What failed on the unpatched code, from the settled plan: its test command's tests
    failing there became its fail_to_pass, each with what it said."""
    messages = plan.base.messages if plan.base is not None else {}
    return FailureReport(
        fail_to_pass=list(plan.tests.fail_to_pass),
        pass_to_pass=list(plan.tests.pass_to_pass),
        failures=[FailedTest(t, messages.get(t, "")) for t in plan.tests.fail_to_pass],
        source=f"`{plan.tests.test_cmd}`",
    )


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
def _backend_scope(options: RunOptions, given: SandboxBackend | None,
                   prestarted: Prestarted | None) -> Iterator[SandboxBackend]:
    """The sandbox backend shared by the derivation and the loop: the given one, or a fresh
    one closed at the end."""
    if given is not None:
        yield given
        return
    backend = open_backend(options.sandbox.sandbox,
                           clean_leftovers=clean_leftovers(prestarted))
    try:
        yield backend
    finally:
        backend.close()


def _write_outputs(ci: CiOptions, report: FailureReport, result: RunResult,
                   run_dir: Path, stages_off: dict[str, str]) -> CiOutcome:
    patch = result.winner.patch if result.winner is not None else None
    suggestion_file = ci.out / "suggestion.diff"
    if patch is not None:
        write_atomic(suggestion_file, patch)
    elif suggestion_file.exists():
        suggestion_file.unlink()  # a stale one from an earlier run would mislead
    suggestions = suggestions_from_patch(patch) if patch else []
    write_json_atomic(ci.out / "suggestions.json", suggestions)
    comment = render_comment(report, result, run_dir=run_dir, stages_off=stages_off)
    write_atomic(ci.out / "comment.md", comment)
    return CiOutcome(
        status=result.status, reason=result.reason, summary=result.summary.to_json(),
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
                outcome.warnings.append(f"review not posted: {exc}")  # printed by the CLI
            else:
                outcome.review_url = str(review.get("html_url") or "") or None
                say(f"Posted a review with {len(outcome.suggestions)} suggestion(s).")


def _head_sha(repo: Path) -> str | None:
    if not (repo / ".git").exists():
        return None
    done = git(repo, "rev-parse", "HEAD", check=False)
    return done.stdout.strip() or None

