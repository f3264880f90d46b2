"""`ooda sandbox build`: the sandbox image, built offline."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

app = typer.Typer(help="Manage the sandbox image.", no_args_is_help=True)


@app.command("build")
def sandbox_build(
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if it exists.")] = False,
) -> None:
    """Build (or rebuild) the sandbox image offline."""
    from ooda.agent.sandbox.registry import build_image

    tag = build_image(force=force, log=lambda line: print(line, file=sys.stderr))
    print(tag)
