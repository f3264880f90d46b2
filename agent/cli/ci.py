"""The `ooda ci` command (typer): fix-suggestion bot for a failing CI job.

Registered on the main app in agent/cli/app.py; the work is agent/app/ci/run.py's `run_ci`. The
option groups (model, loop, escalation, sandbox, environment, stages: agent/contracts/options.py)
mean what they mean for `ooda run`; `--runs-dir` defaults to `<out>/runs` so that one artifact
holds everything a CI job produced.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ooda.agent.cli.options import JsonOpt, grouped
from ooda.agent.contracts.options import (
    EnvironmentOptions,
    EscalationOptions,
    LoopOptions,
    ModelOptions,
    SandboxOptions,
    StageOptions,
)
from ooda.agent.support.textsafe import markup_safe


class PostTarget(StrEnum):
    github = "github"


@grouped("ci")
def ci(
    ctx: typer.Context,
    model: ModelOptions,
    loop: LoopOptions,
    escalation: EscalationOptions,
    sandbox: SandboxOptions,
    environment: EnvironmentOptions,
    stages: StageOptions,
    junit: Annotated[
        list[Path] | None,
        typer.Option("--junit", help="The failed job's JUnit XML report (repeat for several)."),
    ] = None,
    test_cmd: Annotated[
        str | None,
        typer.Option("--test-cmd", help="Test command reproducing the failure in the sandbox."),
    ] = None,
    repo: Annotated[
        Path, typer.Option("--repo", help="The checkout where the tests failed (never modified).")
    ] = Path("."),
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where suggestion.diff, comment.md, suggestions.json go "
                     "(default: $RUNNER_TEMP/ooda-ci-out, else ooda-ci-out-REPO in the temp "
                     "directory: never inside the checkout)."),
    ] = None,
    post: Annotated[
        PostTarget | None,
        typer.Option("--post", help="Post the result to the pull request (needs GITHUB_TOKEN)."),
    ] = None,
    pr: Annotated[
        int | None,
        typer.Option("--pr", help="Pull request number (default: from GITHUB_EVENT_PATH)."),
    ] = None,
    review: Annotated[
        bool, typer.Option("--review", help="Also post a review with suggested changes.")
    ] = False,
    push_branch: Annotated[
        bool,
        typer.Option("--push-branch", help="Push the fix to origin as branch ooda-fix/<sha>."),
    ] = False,
    runs_dir: Annotated[
        Path | None,
        typer.Option("--runs-dir", help="Where run directories go (default: OUT/runs)."),
    ] = None,
    json_out: JsonOpt = False,
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Task id (default: the repository's name).")
    ] = None,
    requirements: Annotated[
        Path | None,
        typer.Option("--requirements", help="requirements.txt the tests need in the sandbox."),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option("--base", metavar="REV",
                     help="The pull request's base commit: with --junit, reported failures "
                     "that fail there too are set apart (default: the event's base, or a "
                     "merge checkout's first parent)."),
    ] = None,
) -> None:
    """Suggest a verified fix for a failing CI job (and post it to the pull request)."""
    from ooda.agent.app.ci.outcome import CiOptions
    from ooda.agent.app.ci.run import run_ci
    from ooda.agent.app.run import RunOptions
    from ooda.agent.cli.console import make_console

    if out is None:
        out = default_out(repo)
    options = CiOptions(
        repo=repo,
        junit=list(junit or []),
        test_cmd=test_cmd,
        out=out,
        post=post.value if post else None,
        pr=pr,
        review=review,
        push_branch=push_branch,
        task_id=task_id,
        requirements=requirements,
        base=base,
    )
    run_options = RunOptions(
        model=model, loop=loop, escalation=escalation, sandbox=sandbox, environment=environment,
        stages=stages, runs_dir=runs_dir if runs_dir is not None else out / "runs",
    )
    console = make_console()
    outcome = run_ci(options, run_options, console=console, show_progress=not json_out,
                     prestarted=ctx.obj)
    if json_out:
        print(json.dumps(outcome.as_json(), indent=2))
    elif outcome.skipped:
        console.print(f"ooda ci: {markup_safe(outcome.skipped)}")
    else:
        style = {"passed": "bold green", "failed": "bold red"}.get(outcome.status, "bold yellow")
        console.print(
            f"[{style}]{outcome.status.upper()}[/{style}] {markup_safe(outcome.reason)}; "
            f"comment: {out / 'comment.md'}"
            + (f", suggestion: {out / 'suggestion.diff'}" if outcome.patch else "")
        )
        for warning in outcome.warnings:
            console.print(f"[yellow]warning:[/yellow] {markup_safe(warning)}")
    raise SystemExit(outcome.exit_code)


def default_out(repo: Path) -> Path:
    """Outside the checkout: $RUNNER_TEMP/ooda-ci-out on GitHub Actions, else
    ooda-ci-out-REPO in the system's temp directory."""
    import os
    import tempfile

    runner_temp = os.environ.get("RUNNER_TEMP")
    if runner_temp:
        return Path(runner_temp) / "ooda-ci-out"
    return Path(tempfile.gettempdir()) / f"ooda-ci-out-{repo.resolve().name or 'repo'}"
