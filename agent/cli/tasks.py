"""`ooda tasks import`: a public benchmark (QuixBugs, HumanEvalFix, SWE-bench) as task
directories."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ooda.agent.contracts.errors import UsageError

app = typer.Typer(help="Work with task sets: import public benchmarks.", no_args_is_help=True)


class ImportKind(StrEnum):
    quixbugs = "quixbugs"
    humanevalfix = "humanevalfix"
    swebench = "swebench"


@app.command("import")
def tasks_import(
    kind: Annotated[ImportKind, typer.Argument(help="quixbugs | humanevalfix | swebench")],
    src: Annotated[Path, typer.Argument(help="The benchmark's data (directory or .jsonl).")],
    dest: Annotated[Path, typer.Argument(help="Directory to write task directories into.")],
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Import only these ids (repeat).")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace existing task directories.")] = False,
    repos_dir: Annotated[
        Path | None,
        typer.Option(help="swebench: local clones named owner__name."),
    ] = None,
) -> None:
    """Convert a public benchmark into self-contained task directories."""
    from ooda.tasks import importers

    if not src.exists():
        raise UsageError(f"{src}: no such file or directory")
    func = importers.IMPORTERS[kind.value]
    extra: dict[str, object] = {}
    if kind is ImportKind.swebench:
        if repos_dir is None:
            raise UsageError("tasks import swebench needs --repos-dir (clones named owner__name)")
        extra["repos_dir"] = repos_dir
    written = func(src, dest, only=list(only) if only else None, overwrite=overwrite, **extra)
    print(f"wrote {len(written)} task(s) to {dest}")
