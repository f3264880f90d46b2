"""The `ooda ci` command (typer): fix-suggestion bot for a failing CI job.

Registered on the main app in agent/cli.py; the work is agent/ci.py's `run_ci`. The shared
options (`--model --base-url -n --rounds --time-budget --sandbox --runs-dir --json`) mean what
they mean for `ooda run`; `--runs-dir` defaults to `<out>/runs` so that one artifact holds
everything a CI job produced.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from agent.errors import UsageError


class PostTarget(StrEnum):
    github = "github"


class SandboxName(StrEnum):
    docker = "docker"
    bwrap = "bwrap"
    local = "local"


def ci(
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
        Path,
        typer.Option("--out", help="Where suggestion.diff, comment.md, suggestions.json go."),
    ] = Path("ooda-ci-out"),
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
    model: Annotated[
        str | None,
        typer.Option("--model", envvar="OODA_MODEL", help="Model name sent to the endpoint."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."),
    ] = None,
    samples: Annotated[int, typer.Option("-n", "--samples", help="Candidates per round.")] = 4,
    rounds: Annotated[int, typer.Option("--rounds", help="Feedback rounds at most.")] = 3,
    time_budget: Annotated[
        float, typer.Option("--time-budget", help="Wall-clock seconds for the whole task.")
    ] = 600.0,
    sandbox: Annotated[
        SandboxName | None,
        typer.Option(
            "--sandbox",
            help="Where verifiers run (default: docker, else bwrap); 'local' means no isolation.",
        ),
    ] = None,
    runs_dir: Annotated[
        Path | None,
        typer.Option("--runs-dir", help="Where run directories go (default: OUT/runs)."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Machine-readable result on stdout.")
    ] = False,
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Task id (default: the repository's name).")
    ] = None,
    requirements: Annotated[
        Path | None,
        typer.Option("--requirements", help="requirements.txt the tests need in the sandbox."),
    ] = None,
    no_ruff: Annotated[bool, typer.Option("--no-ruff", help="Skip the ruff verifier.")] = False,
    no_mypy: Annotated[bool, typer.Option("--no-mypy", help="Skip the mypy verifier.")] = False,
    verifier_timeout: Annotated[
        float | None, typer.Option("--verifier-timeout", help="Seconds per verifier run.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", help="Token budget for the whole run.")
    ] = None,
) -> None:
    """Suggest a verified fix for a failing CI job (and post it to the pull request)."""
    from rich.console import Console

    from agent.ci import CiOptions, run_ci
    from agent.runner import RunOptions
    from tasks.loader import VerifierOptions

    verifiers = VerifierOptions(ruff=not no_ruff, mypy=not no_mypy)
    if verifier_timeout is not None:
        if verifier_timeout <= 0:
            raise UsageError("--verifier-timeout must be positive")
        verifiers.timeout_s = verifier_timeout
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
        verifiers=verifiers,
    )
    run_options = RunOptions(
        model=model,
        base_url=base_url,
        samples=samples,
        rounds=rounds,
        time_budget_s=time_budget,
        max_tokens=max_tokens,
        sandbox=sandbox.value if sandbox else None,
        runs_dir=runs_dir if runs_dir is not None else out / "runs",
    )
    console = Console(stderr=True)
    outcome = run_ci(options, run_options, console=console, show_progress=not json_out)
    if json_out:
        print(json.dumps(outcome.as_json(), indent=2))
    elif outcome.skipped:
        console.print(f"ooda ci: {outcome.skipped}")
    else:
        style = {"passed": "bold green", "failed": "bold red"}.get(outcome.status, "bold yellow")
        console.print(
            f"[{style}]{outcome.status.upper()}[/{style}] {outcome.reason}; "
            f"comment: {out / 'comment.md'}"
            + (f", suggestion: {out / 'suggestion.diff'}" if outcome.patch else "")
        )
        for warning in outcome.warnings:
            console.print(f"[yellow]warning:[/yellow] {warning}")
    raise SystemExit(outcome.exit_code)
