"""`ooda tasks import`: a public benchmark (QuixBugs, HumanEvalFix, SWE-bench) as task
directories; `ooda tasks validate`: each task's base and gold in its environment
(agent/app/validate.py)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ooda.agent.cli.options import grouped
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.options import SandboxOptions

app = typer.Typer(help="Work with task sets: import public benchmarks.", no_args_is_help=True)


class ImportKind(StrEnum):
    quixbugs = "quixbugs"
    humanevalfix = "humanevalfix"
    swebench = "swebench"


@app.command("import")
def tasks_import(
    kind: Annotated[ImportKind, typer.Argument(help="quixbugs | humanevalfix | swebench")],
    src: Annotated[str, typer.Argument(help="The benchmark's data: a local checkout or file "
                                       "(directory or .jsonl), or a URL (a git repository "
                                       "is cloned, a file downloaded).")],
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
    """Convert a public benchmark into self-contained task directories. swebench: an
    instance that cannot be exported (no clone, no base commit, a blob missing from the
    clone) is skipped with its reason and the others are written; exit 1 when any was."""
    import tempfile

    from ooda.tasks import importers

    with tempfile.TemporaryDirectory(prefix="ooda-import-") as scratch:
        data = fetch(src, Path(scratch)) if is_url(src) else Path(src)
        if not data.exists():
            raise UsageError(f"{src}: no such file or directory")
        _import(kind, data, dest, only, overwrite, repos_dir, importers.IMPORTERS[kind.value])


@app.command("validate")
@grouped("validate")
def tasks_validate(
    path: Annotated[Path, typer.Argument(help="A task directory or a directory of them.")],
    sandbox: SandboxOptions,
) -> None:
    """Check each task before a model solves it: its environment builds, FAIL_TO_PASS fails
    and PASS_TO_PASS passes on the unpatched code, the gold patch passes (verified once).
    Exit 1 when a task is not valid; broken environments are counted apart."""
    from ooda.agent.app.validate import validate_tasks
    from ooda.agent.sandbox.registry import open_backend

    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    sandbox.check()
    backend = open_backend(sandbox.sandbox)
    try:
        results = validate_tasks(path, backend, report=_say_validation)
    finally:
        backend.close()
    counts = {s: sum(1 for r in results if r.status == s)
              for s in ("valid", "environment", "base", "gold")}
    print(f"{counts['valid']} of {len(results)} valid; broken environment: "
          f"{counts['environment']}; base lists wrong: {counts['base']}; "
          f"gold fails: {counts['gold']}; FAIL_TO_PASS passing before any change in "
          f"{sum(1 for r in results if r.base_problems)}")
    raise SystemExit(0 if counts["valid"] == len(results) else 1)


def _say_validation(v: Any) -> None:
    """A task's line, and a BASE line when its FAIL_TO_PASS ids pass (or are missing) on the
    unpatched code but another finding decided its status."""
    print(f"{v.status.upper():11} {v.task_id}" + (f": {v.detail}" if v.detail else ""),
          flush=True)
    if v.base_problems and v.status != "base":
        print(f"{'BASE':11} {v.task_id}: " + "; ".join(v.base_problems), flush=True)


def _import(kind: ImportKind, src: Path, dest: Path, only: list[str] | None, overwrite: bool,
            repos_dir: Path | None, func: Any) -> None:
    extra: dict[str, object] = {}
    skipped: list[Any] = []
    if kind is ImportKind.swebench:
        if repos_dir is None:
            raise UsageError("tasks import swebench needs --repos-dir (clones named owner__name)")
        extra["repos_dir"] = repos_dir
        extra["skipped"] = skipped
    written = func(src, dest, only=list(only) if only else None, overwrite=overwrite, **extra)
    for skip in skipped:
        print(f"skipped {skip.instance_id}: {skip.reason}", file=sys.stderr)
    print(f"wrote {len(written)} task(s) to {dest}"
          + (f"; skipped {len(skipped)} that could not be exported" if skipped else ""))
    if skipped:
        raise SystemExit(1)


def is_url(src: str) -> bool:
    return src.startswith(("https://", "http://", "git@", "file://"))


def fetch(url: str, scratch: Path) -> Path:
    """A benchmark's data from `url`: a git repository (…/QuixBugs, ….git) is cloned
    shallowly, anything ending in .jsonl, .json or .parquet is downloaded as that file."""
    import subprocess
    import urllib.request

    name = url.rstrip("/").rsplit("/", 1)[-1] or "data"
    if name.endswith((".jsonl", ".json", ".parquet", ".jsonl.gz")):
        target = scratch / name
        try:
            urllib.request.urlretrieve(url, target)  # noqa: S310 - a URL the user gave
        except OSError as exc:
            raise InfraError(f"cannot download {url}: {exc}") from exc
        return target
    target = scratch / name.removesuffix(".git")
    done = subprocess.run(["git", "clone", "--depth", "1", "--quiet", url, str(target)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["git clone failed"])[-1]
        raise InfraError(f"cannot clone {url}: {last}")
    return target
