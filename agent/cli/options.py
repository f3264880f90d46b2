"""Options shared by `ooda run`, `ooda eval` and `ooda ci` (names fixed by the contract), and
the one place their values become RunOptions.

Defaults come from ooda.agent.contracts.defaults (the same ones RunOptions and the loop use).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ooda.agent.contracts.defaults import DEFAULTS

if TYPE_CHECKING:
    from ooda.agent.app.run import RunOptions


class SandboxName(StrEnum):
    docker = "docker"
    bwrap = "bwrap"
    local = "local"


class SelectName(StrEnum):
    first = "first"
    best = "best"


ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar="OODA_MODEL",
        help="Model name sent to the endpoint; 'gold' = the task's reference patch; "
        "'replay' = the bundled endpoint replaying the task's scripted answers (offline).",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."),
]
SamplesOpt = Annotated[int, typer.Option("-n", "--samples", help="Candidates per round.")]
RoundsOpt = Annotated[int, typer.Option("--rounds", help="Feedback rounds at most.")]
SandboxOpt = Annotated[
    SandboxName | None,
    typer.Option(
        "--sandbox",
        help="Where verifiers run (default: docker, else bwrap); 'local' means no isolation.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")]
NoRuffOpt = Annotated[bool, typer.Option("--no-ruff", help="Skip the ruff verifier.")]
NoMypyOpt = Annotated[bool, typer.Option("--no-mypy", help="Skip the mypy verifier.")]
VerifierTimeoutOpt = Annotated[
    float | None, typer.Option("--verifier-timeout", help="Seconds per verifier run.")
]
MaxTokensOpt = Annotated[
    int,
    typer.Option("--max-tokens", help="Completion tokens one answer may take, as in OpenAI's "
                 "API (lowered to what the model's context window leaves). Before, this was "
                 "the whole run's budget: that is --token-budget now."),
]
TokenBudgetOpt = Annotated[
    int | None,
    typer.Option("--token-budget", help="Prompt plus completion tokens for the whole task."),
]
ContextWindowOpt = Annotated[
    int | None,
    typer.Option("--context-window", help="The model's context window in tokens (default: "
                 "learned from the endpoint's model listing or its error for a prompt too "
                 "long); prompts and answers are fitted to it."),
]
RequestTimeoutOpt = Annotated[
    float | None,
    typer.Option("--request-timeout", help="Seconds one model request may take, first token "
                 "included; the answer so far is kept (default: only --time-budget)."),
]
MaxProseTokensOpt = Annotated[
    int,
    typer.Option("--max-prose-tokens", help="Stop an answer that streams this many tokens of "
                 "prose without beginning an edit (0: never; a leading <think> block does not "
                 "count)."),
]
SelectOpt = Annotated[
    SelectName,
    typer.Option(help="'first' stops at the first pass; 'best' picks among a round's passes."),
]
BudgetOpt = Annotated[
    float, typer.Option("--time-budget", help="Wall-clock seconds for the whole task.")
]
RunsDirOpt = Annotated[Path, typer.Option("--runs-dir", help="Where run directories go.")]
FailToPassOpt = Annotated[
    list[str] | None, typer.Option("--fail-to-pass", help="pytest id that must pass (repeat).")
]
PassToPassOpt = Annotated[
    list[str] | None,
    typer.Option("--pass-to-pass", help="pytest id that must keep passing (repeat)."),
]
TemperatureOpt = Annotated[float, typer.Option(help="Sampling temperature.")]
PricePromptOpt = Annotated[
    float | None, typer.Option("--price-prompt", help="Dollars per 1M prompt tokens.")
]
PriceCompletionOpt = Annotated[
    float | None, typer.Option("--price-completion", help="Dollars per 1M completion tokens.")
]
ContextTokensOpt = Annotated[
    int,
    typer.Option(
        "--context-tokens",
        help="Most tokens the first prompt may take, the repository's code it shows included "
        "(small repositories are shown whole; larger ones ranked and shown in part).",
    ),
]
EnvironmentOpt = Annotated[
    str,
    typer.Option(
        "--environment",
        metavar="auto|none|PATH",
        help="What the tests run in when the task names no [environment]: 'auto' detects it "
        "from the repository's files (.python-version, pyproject.toml, setup.cfg, setup.py, "
        "requirements*.txt, tox.ini) and builds it; 'none' keeps ooda's image; PATH is a TOML "
        "file holding an [environment] table (docs/TASKS.md).",
    ),
]


OracleOpt = Annotated[
    bool,
    typer.Option(
        "--oracle",
        help="Let the loop run a task's hidden tests (its test patch) and feed their failures "
        "back: an oracle's number, not comparable with leaderboards. Default: blind (the "
        "hidden tests judge only the submitted patch; docs/SWEBENCH.md).",
    ),
]
ReproTestsOpt = Annotated[
    int,
    typer.Option(
        "--repro-tests",
        help="Blind runs: reproduction tests asked of the model, in parallel (0: none).",
    ),
]


def is_quiet(ctx: typer.Context) -> bool:
    """`ooda -q ...`: no live display, no notes; results and errors only."""
    return bool(ctx.find_root().meta.get("ooda.quiet"))


def options_from(
    *,
    model: str | None,
    base_url: str | None,
    samples: int,
    rounds: int,
    time_budget: float,
    sandbox: SandboxName | None,
    runs_dir: Path,
    token_budget: int | None,
    select: SelectName = SelectName.first,
    temperature: float = DEFAULTS.temperature,
    concurrency: int = DEFAULTS.concurrency,
    verify_concurrency: int = DEFAULTS.verify_concurrency,
    price_prompt: float | None = None,
    price_completion: float | None = None,
    environment: str | None = None,
    max_tokens: int = DEFAULTS.max_tokens,
    context_window: int | None = None,
    request_timeout: float | None = None,
    max_prose_tokens: int = DEFAULTS.max_prose_tokens,
    context_tokens: int = DEFAULTS.context_tokens,
    oracle: bool = False,
    repro_tests: int = DEFAULTS.repro_tests,
) -> RunOptions:
    """The run's options from the command line's values (`ooda run`, `eval` and `ci` alike;
    RunOptions.validate checks them)."""
    from ooda.agent.app.run import RunOptions  # the application: not for `ooda --help`

    return RunOptions(
        model=model,
        base_url=base_url,
        samples=samples,
        rounds=rounds,
        time_budget_s=time_budget,
        token_budget=token_budget,
        max_tokens=max_tokens,
        context_window=context_window,
        request_timeout_s=request_timeout,
        max_prose_tokens=max_prose_tokens,
        select=select.value,
        sandbox=sandbox.value if sandbox else None,
        runs_dir=runs_dir,
        temperature=temperature,
        concurrency=concurrency,
        verify_concurrency=verify_concurrency,
        price_prompt=price_prompt,
        price_completion=price_completion,
        environment=environment,
        context_tokens=context_tokens,
        oracle=oracle,
        repro_tests=repro_tests,
    )
