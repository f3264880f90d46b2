"""`ooda run`: one task (a task directory, or a repository with a statement) through the loop;
prints the result, applies the winning patch with --apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ooda.agent.cli.escalation import (
    EscalateAfterOpt,
    EscalateBaseUrlOpt,
    EscalateBelowOpt,
    EscalateKeyEnvOpt,
    EscalatePriceCompletionOpt,
    EscalatePricePromptOpt,
    EscalateToOpt,
    set_escalation,
)
from ooda.agent.cli.options import (
    BaseUrlOpt,
    BudgetOpt,
    ContextTokensOpt,
    ContextWindowOpt,
    EnvironmentOpt,
    FailToPassOpt,
    JsonOpt,
    MaxProseTokensOpt,
    MaxTokensOpt,
    ModelOpt,
    NoMypyOpt,
    NoRuffOpt,
    OracleOpt,
    PassToPassOpt,
    PriceCompletionOpt,
    PricePromptOpt,
    ReproTestsOpt,
    RequestTimeoutOpt,
    RoundsOpt,
    RunsDirOpt,
    SamplesOpt,
    SandboxOpt,
    SelectName,
    SelectOpt,
    TemperatureOpt,
    TokenBudgetOpt,
    VerifierTimeoutOpt,
    is_quiet,
    options_from,
)
from ooda.agent.contracts.defaults import DEFAULTS
from ooda.agent.contracts.errors import UsageError
from ooda.agent.support.textsafe import markup_safe, printable

if TYPE_CHECKING:
    from ooda.tasks.loader import Task


def run(
    ctx: typer.Context,
    path: Annotated[
        Path, typer.Argument(help="A task directory (holds task.toml) or a repository.")
    ],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    samples: SamplesOpt = DEFAULTS.samples,
    rounds: RoundsOpt = DEFAULTS.rounds,
    time_budget: BudgetOpt = DEFAULTS.time_budget_s,
    sandbox: SandboxOpt = None,
    runs_dir: RunsDirOpt = Path("runs"),
    json_out: JsonOpt = False,
    statement: Annotated[str | None, typer.Option(help="What to do (plain repositories).")] = None,
    statement_file: Annotated[
        Path | None, typer.Option(help="File holding what to do (plain repositories).")
    ] = None,
    test_cmd: Annotated[
        str | None, typer.Option(help="Test command; failing tests become fail_to_pass.")
    ] = None,
    fail_to_pass: FailToPassOpt = None,
    pass_to_pass: PassToPassOpt = None,
    no_ruff: NoRuffOpt = False,
    no_mypy: NoMypyOpt = False,
    verifier_timeout: VerifierTimeoutOpt = None,
    max_tokens: MaxTokensOpt = DEFAULTS.max_tokens,
    token_budget: TokenBudgetOpt = None,
    context_window: ContextWindowOpt = None,
    request_timeout: RequestTimeoutOpt = None,
    max_prose_tokens: MaxProseTokensOpt = DEFAULTS.max_prose_tokens,
    select: SelectOpt = SelectName.first,
    temperature: TemperatureOpt = DEFAULTS.temperature,
    concurrency: Annotated[
        int, typer.Option(help="Model requests in flight at once (in `ooda eval`, "
                          "--concurrency counts tasks and --requests counts requests).")
    ] = DEFAULTS.concurrency,
    verify_concurrency: Annotated[
        int, typer.Option(help="Candidates verified at once.")
    ] = DEFAULTS.verify_concurrency,
    apply: Annotated[
        bool, typer.Option("--apply", help="Write the winning patch into the repository.")
    ] = False,
    escalate_to: EscalateToOpt = None,
    escalate_base_url: EscalateBaseUrlOpt = None,
    escalate_key_env: EscalateKeyEnvOpt = None,
    escalate_price_prompt: EscalatePricePromptOpt = None,
    escalate_price_completion: EscalatePriceCompletionOpt = None,
    escalate_after: EscalateAfterOpt = None,
    escalate_below: EscalateBelowOpt = DEFAULTS.escalate_below,
    price_prompt: PricePromptOpt = None,
    price_completion: PriceCompletionOpt = None,
    environment: EnvironmentOpt = "auto",
    context_tokens: ContextTokensOpt = DEFAULTS.context_tokens,
    oracle: OracleOpt = False,
    repro_tests: ReproTestsOpt = DEFAULTS.repro_tests,
) -> None:
    """Solve one task: sample candidates, verify them, feed failures back."""
    from ooda.agent.app.metrics import cost
    from ooda.agent.app.run import run_task
    from ooda.agent.cli.console import make_console
    from ooda.agent.verify.workspace import apply_patch

    if not path.exists():
        raise UsageError(f"{path}: no such file or directory{did_you_mean(path)}")
    if statement_file is not None:
        if statement is not None:
            raise UsageError("give --statement or --statement-file, not both")
        try:
            statement = statement_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --statement-file {statement_file}: {exc}") from exc
    _check_plain_model(path, model, base_url)
    task = _task(path, statement, test_cmd, fail_to_pass, pass_to_pass)
    if no_ruff:
        task.verifiers.ruff = False
    if no_mypy:
        task.verifiers.mypy = False
    if verifier_timeout is not None:
        if verifier_timeout <= 0:
            raise UsageError("--verifier-timeout must be positive")
        task.verifiers.timeout_s = verifier_timeout
    options = options_from(
        model=model, base_url=base_url, samples=samples, rounds=rounds,
        time_budget=time_budget, sandbox=sandbox, runs_dir=runs_dir, token_budget=token_budget,
        select=select, temperature=temperature, concurrency=concurrency,
        verify_concurrency=verify_concurrency, price_prompt=price_prompt,
        price_completion=price_completion, environment=environment, max_tokens=max_tokens,
        context_window=context_window, request_timeout=request_timeout,
        max_prose_tokens=max_prose_tokens,
        context_tokens=context_tokens, oracle=oracle, repro_tests=repro_tests,
    )
    set_escalation(
        options, escalate_to=escalate_to, escalate_base_url=escalate_base_url,
        escalate_key_env=escalate_key_env, escalate_price_prompt=escalate_price_prompt,
        escalate_price_completion=escalate_price_completion, escalate_after=escalate_after,
        escalate_below=escalate_below,
    )
    options.validate()
    console = make_console()
    quiet = json_out or is_quiet(ctx)
    if options.model == "replay" and not quiet:
        console.print(
            "[yellow]--model replay: answers are replayed from the task's script, "
            "not generated by a model.[/yellow]"
        )
    try:
        result, log = run_task(task, options, console=console, show_progress=not quiet,
                               prestarted=ctx.obj)
    except KeyboardInterrupt as exc:
        if exc.args:
            console.print(f"The partial run (run.json, attempts.jsonl, each attempt's logs) "
                          f"is in {markup_safe(str(exc.args[0]))}", highlight=False)
        raise
    if apply and result.winner is not None:
        apply_patch(task.repo, result.winner.patch)
    summary = {**result.summary, "run_dir": str(log.dir), "applied": bool(apply and result.winner)}
    if json_out:
        print(json.dumps(summary, indent=2))
    else:
        _print_run_result(
            console, result.summary, log.dir, result.winner.patch if result.winner else None,
            cost(result.summary["tokens"], price_prompt, price_completion),
        )
        if apply and result.winner is not None:
            console.print(f"Applied the winning patch to {task.repo}.")
    raise SystemExit(0 if result.status == "passed" else 1 if result.status == "failed" else 3)


def _check_plain_model(path: Path, model: str | None, base_url: str | None) -> None:
    """A plain repository has no reference patch and no scripted answers: say what works
    there instead of what cannot (scripted answers served apart, at --base-url, work)."""
    from ooda.tasks.loader import is_task_dir

    if is_task_dir(path) or not path.is_dir():
        return
    if model == "gold" or (model == "replay" and not base_url):
        what = "a reference patch" if model == "gold" else "scripted answers (replay.jsonl)"
        serve = ("serve your own with `ooda serve --replay FILE` and pass --base-url URL; "
                 if model == "replay" else "")
        raise UsageError(
            f"--model {model} needs a task directory with {what}; {path} is a plain "
            f"repository: {serve}pass --model NAME with --base-url URL (or OPENAI_BASE_URL), "
            "or check a patch you have with `ooda verify PATH --patch FILE --test-cmd CMD`"
        )
    if not model:
        raise UsageError("no model given: pass --model NAME with --base-url URL (or "
                         "OPENAI_BASE_URL) to solve a plain repository")


def _task(path: Path, statement: str | None, test_cmd: str | None,
          fail_to_pass: list[str] | None, pass_to_pass: list[str] | None) -> Task:
    """The task at `path` with the command line's overrides, or one made from a repository."""
    from ooda.tasks.loader import (
        VerifierOptions,
        check_test_cmd,
        is_task_dir,
        load_task,
        task_from_repo,
    )

    if is_task_dir(path):
        task = load_task(path)
        if statement is not None:
            task.statement = statement
        if fail_to_pass:
            task.fail_to_pass = list(fail_to_pass)
        if pass_to_pass:
            task.pass_to_pass = list(pass_to_pass)
        if test_cmd:
            check_test_cmd(test_cmd, "--test-cmd")
            task.test_cmd = test_cmd
        return task
    if statement is None:
        raise UsageError(
            f"{path} is not a task directory (no task.toml): say what to do with "
            "--statement TEXT or --statement-file FILE"
        )
    return task_from_repo(
        path,
        statement=statement,
        fail_to_pass=list(fail_to_pass or []),
        pass_to_pass=list(pass_to_pass or []),
        test_cmd=test_cmd,
        verifiers=VerifierOptions(),
    )


def _print_run_result(
    console: Any, summary: dict[str, Any], run_dir: Path, patch: str | None,
    dollars: float | None,
) -> None:
    from rich.syntax import Syntax

    from ooda.agent.app.progress import tokens_phrase

    status = summary["status"]
    style = {"passed": "bold green", "failed": "bold red"}.get(status, "bold yellow")
    console.print(
        f"[{style}]{status.upper()}[/{style}] {markup_safe(summary['task_id'])}: "
        f"{markup_safe(summary['reason'])} — "
        f"{summary['attempts']} attempts, {summary['rounds_used']} round(s), "
        f"{summary['wall_s']:.1f}s, "
        + tokens_phrase(summary["tokens"]["prompt"], summary["tokens"]["completion"], dollars,
                        bool(summary["tokens"].get("estimated")))
    )
    if patch:
        console.print(Syntax(printable(patch), "diff", theme="ansi_dark"))
        console.print(f"final.diff: {run_dir / 'final.diff'}")
    console.print(f"run directory: {run_dir}")


def did_you_mean(path: Path) -> str:
    """`; did you mean /tmp/quixbugs/quixbugs-gcd?` when a sibling's name is close (importers
    prefix task ids with the benchmark's name), else nothing."""
    import difflib

    try:
        names = [p.name for p in path.parent.iterdir() if p.is_dir()]
    except OSError:
        return ""
    close = [n for n in names if n.endswith(f"-{path.name}") or n.endswith(f"__{path.name}")]
    close = close or difflib.get_close_matches(path.name, names, n=1, cutoff=0.6)
    return f"; did you mean {path.parent / close[0]}?" if close else ""
