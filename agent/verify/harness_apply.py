"""Another system's prediction put into a workspace as the SWE-bench harness puts it (the
"harness" rule of `ooda eval --predictions`; candidates of ooda's own loop keep the strict
edit policy of workspace.py).

The harness applies a prediction with `git apply`, and when that fails with
`patch --batch --fuzz=5 -p1`; edits to any file are applied (configuration, packaging, tests);
then every file the task's test patch touches is put back as it is on the base commit before
the test patch is applied over it, so a prediction's edits to those test files never count.
What still holds here: paths stay inside the repository (no absolute paths, no `..`, nothing
under .git/, no way out through a symbolic link).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.contracts.errors import InfraError
from ooda.agent.verify.workspace import (
    PatchError,
    check_inside,
    git_numstat,
    parse_paths,
    path_safety,
    run_git_apply,
    with_final_newline,
)

FUZZ = 5
"""`patch --fuzz` the harness falls back to."""


@dataclass(frozen=True)
class Applied:
    """How a prediction went in: the paths it changed and the command that applied it."""

    changed: list[str]
    method: str
    """"git apply" or "patch --fuzz=5"."""


def apply_prediction(workspace: Path, patch: str) -> Applied:
    """Apply `patch` to `workspace` as the harness does; PatchError when neither way applies."""
    patch = with_final_newline(patch)
    if not patch.strip():
        raise PatchError("the patch is empty: it changes no file")
    paths, strip = parse_paths(patch)
    try:
        touched = git_numstat(workspace, patch, strip)
    except PatchError:
        touched = []  # git cannot read it; patch(1) may still
    changed = list(dict.fromkeys(paths + touched))
    for path in changed:
        reason = path_safety(path)
        if reason:
            raise PatchError(reason)
        check_inside(workspace, path)
    try:
        run_git_apply(workspace, patch, strip)
        method = "git apply"
    except PatchError as git_error:
        _fuzz_apply(workspace, patch, strip, git_error)
        method = f"patch --fuzz={FUZZ}"
    for path in changed:
        check_inside(workspace, path)
    return Applied(changed, method)


def _fuzz_apply(workspace: Path, patch: str, strip: int, git_error: PatchError) -> None:
    try:
        proc = subprocess.run(
            ["patch", "--batch", f"--fuzz={FUZZ}", f"-p{strip}", "--no-backup-if-mismatch",
             "--reject-file=-"],
            cwd=workspace, input=patch.encode("utf-8", "surrogateescape"),
            capture_output=True, timeout=120, check=False,
        )
    except FileNotFoundError as exc:
        raise InfraError("patch(1) is not installed; the harness rule falls back to it") from exc
    except subprocess.TimeoutExpired as exc:
        raise PatchError("patch --fuzz took too long") from exc
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).decode("utf-8", "replace").strip().splitlines()
        raise PatchError(f"{git_error}; patch --fuzz={FUZZ} failed too: "
                         f"{out[-1] if out else 'exit ' + str(proc.returncode)}")


def restore_test_files(workspace: Path, base: Path, test_files: Sequence[str],
                       changed: Sequence[str]) -> None:
    """Put each of the test patch's files that the prediction changed back as on the base
    (removed when the base has none), as the harness's `git checkout BASE -- FILES` does."""
    for rel in sorted(set(test_files) & set(changed)):
        target = workspace / rel
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        source = base / rel
        if source.is_file() and not source.is_symlink():
            os.makedirs(target.parent, exist_ok=True)
            shutil.copy2(source, target)
