"""Another system's prediction put into a workspace as the SWE-bench harness puts it (the
"harness" rule of `ooda eval --predictions`; candidates of ooda's own loop keep the strict
edit policy of workspace.py).

The harness applies a prediction with `git apply`, and when that fails with
`patch --batch --fuzz=5 -p1`; edits to any file are applied (configuration, packaging, tests);
then every file the task's test patch touches is put back as it is on the base commit before
the test patch is applied over it, so a prediction's edits to those test files never count.
What still holds here: paths stay inside the repository (no absolute paths, no `..`, nothing
under .git/, no way out through a symbolic link).

Real systems' predictions come cut in ways a strict diff parser refuses and patch(1) applies
(a last hunk shorter than its header once trailing blank context lines were stripped with the
final newline, context lines whose lone space was trimmed): the paths of such a patch are read
from its headers, and git apply and patch decide, as in the harness.
"""

from __future__ import annotations

import os
import re
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
    try:
        paths, strip = parse_paths(patch)
    except PatchError:
        paths, strip = header_paths(patch)
        if not paths:
            raise
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


_RENAME = re.compile(r"^(?:rename|copy) (?:from|to) (.+)$")
_GIT_HEADER = re.compile(r"^diff --git a/(.+) b/(.+)$")


def header_paths(patch: str) -> tuple[list[str], int]:
    """(the paths a diff's file headers name, the strip level), read line by line where a
    strict parser refused the diff: a `---` line followed by a `+++` line (a tab and
    timestamp cut off; a removed line "-- x" is not followed by one), git's `diff --git` and
    rename/copy lines; the level is 1 when every ---/+++ path carries a/ or b/."""
    raw: list[str] = []
    git_paths: list[str] = []
    lines = patch.splitlines()
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if git := _GIT_HEADER.match(line):
            git_paths += [git.group(1), git.group(2)]
        elif rename := _RENAME.match(line):
            git_paths.append(rename.group(1))
        elif line.startswith("--- ") and following.startswith("+++ "):
            for header in (line, following):
                name = header[4:].split("\t", 1)[0].strip()
                if name != "/dev/null":
                    raw.append(name)
    strip = 1 if raw and all(r.startswith(("a/", "b/")) for r in raw) else 0
    stripped = [r.split("/", strip)[-1] if strip else r for r in raw]
    return list(dict.fromkeys(stripped + git_paths)), strip if raw else 1


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
