"""Options shared by `ooda run`, `ooda eval` and `ooda ci` (names fixed by the contract)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer


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
    typer.Option("--base-url", help="OpenAI-compatible endpoint [default: $OPENAI_BASE_URL]."),
]
SamplesOpt = Annotated[int, typer.Option("-n", "--samples", help="Candidates per round.")]
RoundsOpt = Annotated[int, typer.Option("--rounds", help="Feedback rounds at most.")]
SandboxOpt = Annotated[
    SandboxName | None,
    typer.Option(
        "--sandbox",
        help="Where verifiers run [default: docker, else bwrap]; 'local' means no isolation.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")]
NoRuffOpt = Annotated[bool, typer.Option("--no-ruff", help="Skip the ruff verifier.")]
NoMypyOpt = Annotated[bool, typer.Option("--no-mypy", help="Skip the mypy verifier.")]
VerifierTimeoutOpt = Annotated[
    float | None, typer.Option("--verifier-timeout", help="Seconds per verifier run.")
]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", help="Token budget for the whole run.")
]
SelectOpt = Annotated[
    SelectName,
    typer.Option(help="'first' stops at the first pass; 'best' picks among a round's passes."),
]
