"""The escalation options of `ooda run` and `ooda eval` (issue 16): the stronger model later
rounds escalate to, its endpoint, key and price, and when to escalate (agent/core/schedule.py
holds the rule)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from ooda.agent.app.run import RunOptions

EscalateToOpt = Annotated[
    str | None,
    typer.Option(
        "--escalate-to",
        help="A stronger model for the rounds after the fast one keeps failing "
        "(also: --model FAST,STRONG).",
    ),
]
EscalateBaseUrlOpt = Annotated[
    str | None,
    typer.Option("--escalate-base-url", help="Its endpoint [default: the model's]."),
]
EscalateKeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--escalate-key-env", help="Environment variable holding its API key [default: the "
        "model's key]."
    ),
]
EscalatePricePromptOpt = Annotated[
    float | None,
    typer.Option("--escalate-price-prompt", help="Its dollars per 1M prompt tokens."),
]
EscalatePriceCompletionOpt = Annotated[
    float | None,
    typer.Option("--escalate-price-completion", help="Its dollars per 1M completion tokens."),
]
EscalateAfterOpt = Annotated[
    int | None,
    typer.Option(
        "--escalate-after",
        help="Rounds of the fast model without a pass before escalating [default: all but "
        "the last].",
    ),
]
EscalateBelowOpt = Annotated[
    float,
    typer.Option(
        "--escalate-below", help="Escalate once less than this fraction of the budget is left."
    ),
]


def set_escalation(
    options: RunOptions,
    *,
    escalate_to: str | None,
    escalate_base_url: str | None,
    escalate_key_env: str | None,
    escalate_price_prompt: float | None,
    escalate_price_completion: float | None,
    escalate_after: int | None,
    escalate_below: float,
) -> None:
    """Put the command line's escalation values into `options` (RunOptions.validate checks
    them)."""
    options.escalate_to = escalate_to
    options.escalate_base_url = escalate_base_url
    options.escalate_key_env = escalate_key_env
    options.escalate_price_prompt = escalate_price_prompt
    options.escalate_price_completion = escalate_price_completion
    options.escalate_after = escalate_after
    options.escalate_below = escalate_below
