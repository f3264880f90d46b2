"""`ooda report`: (re)render report.html and report.md of an evaluation or run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ooda.agent.contracts.errors import UsageError


def report_command(
    path: Annotated[Path, typer.Argument(help="An evaluation directory or a run directory.")],
) -> None:
    """(Re)render the report (report.html, report.md) of an evaluation or run directory."""
    from ooda.agent.app.evaluate import rerender_report

    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    for written in rerender_report(path):
        print(written)
