"""`ooda verify`: the verifier cascade on one given patch (no model) and its verdict."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ooda.agent.cli.options import JsonOpt, SandboxOpt
from ooda.agent.contracts.errors import UsageError
from ooda.agent.support.textsafe import markup_safe, printable

if TYPE_CHECKING:
    from ooda.agent.contracts.protocols import Verdict


def verify(
    path: Annotated[Path, typer.Argument(help="A task directory (holds task.toml).")],
    patch: Annotated[Path, typer.Option("--patch", help="The unified diff to verify.")],
    sandbox: SandboxOpt = None,
    json_out: JsonOpt = False,
    logs: Annotated[
        Path | None, typer.Option("--logs", help="Directory for the verifiers' full logs.")
    ] = None,
) -> None:
    """Run the verifier cascade on one patch (no model involved) and print the verdict."""
    from ooda.agent.sandbox.registry import get_backend
    from ooda.agent.verify.verifier import TaskVerifier
    from ooda.tasks.loader import load_task

    task = load_task(path)
    try:
        patch_text = patch.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read --patch {patch}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"--patch {patch} is not UTF-8 text") from exc
    backend = get_backend(sandbox.value if sandbox else None)
    try:
        with tempfile.TemporaryDirectory(prefix="ooda-verify-") as work:
            verifier = TaskVerifier(task, backend, Path(work))
            try:
                # a test command's tests, per test: those failing on the base must pass now
                task = verifier.prepare()
                verdict = verifier.verify(patch_text, log_dir=logs)
            finally:
                verifier.close()
    finally:
        backend.close()
    _print_verdict(task.id, verdict, backend.name, json_out)
    raise SystemExit(0 if verdict.status == "passed" else 1)


def _print_verdict(task_id: str, verdict: Verdict, sandbox: str, json_out: bool) -> None:
    if json_out:
        print(
            json.dumps(
                {
                    "task_id": task_id,
                    "status": verdict.status,
                    "reason": verdict.reason,
                    "sandbox": sandbox,
                    "changed_files": verdict.changed_files,
                    "verifiers": [
                        {
                            "name": r.name,
                            "status": r.status,
                            "duration_s": round(r.duration_s, 3),
                            "summary": r.summary,
                        }
                        for r in verdict.results
                    ],
                },
                indent=2,
            )
        )
        return
    from ooda.agent.cli.console import make_console

    console = make_console(stderr=False)
    style = "bold green" if verdict.status == "passed" else "bold red"
    console.print(f"[{style}]{verdict.status.upper()}[/{style}] {markup_safe(task_id)}: "
                  f"{markup_safe(verdict.reason)}")
    for r in verdict.results:
        console.print(f"  {r.name:<8} {r.status:<8} {r.duration_s:6.2f}s")
    if verdict.status != "passed" and verdict.feedback:
        console.print(printable(verdict.feedback), markup=False, highlight=False)
