"""Judge a candidate without the files the edit policy protects, instead of refusing it whole.

Real systems' fixes often come with a test they added, or a touch to tox.ini or setup.cfg: the
edit policy (agent/verify/workspace.py) may not let those into the tree it verifies, and used to
refuse the whole candidate, so a right fix was never judged. Here each file of the diff that
the policy protects by name (a test file, conftest.py, tool, packaging or git configuration, a
site hook, test support, a file the repository's pytest collects) is left out, and the rest is
what is verified and what a run submits: nothing the candidate wrote to tests or configuration
is in the verified tree, so none of it can sway the verdict.

Never dropped, so the policy still refuses the whole candidate: a path outside the repository,
into .git/ or .ooda/, packaging metadata or bytecode (unsafe_reason), a binary or symlink diff,
a diff that cannot be read. What remains is checked by the full policy again when it is applied
(git's own reading of the paths included): a diff whose pieces unidiff and git read differently
is refused whole, not trimmed. When every file is dropped nothing is left to judge: the
candidate is an invalid edit with the first dropped file's reason, as before. Files are left
out whole, so the kept files' hunks never depend on them: a remainder that does not apply is
the candidate's own `does_not_apply`, as for any patch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from unidiff.patch import PatchedFile

from ooda.agent.contracts.protocols import Dropped
from ooda.agent.verify.workspace import (
    SYMLINK_MODE,
    PatchError,
    droppable_reason,
    parse_patch,
    policy_kind,
    strip_path,
    unsafe_reason,
    with_final_newline,
)


@dataclass(frozen=True)
class Admitted:
    """What of a candidate's patch is judged: `patch` (the given text itself when nothing was
    dropped; empty when everything was) and the files left out."""

    patch: str
    dropped: list[Dropped] = field(default_factory=list)


def admit(patch: str, protected: Sequence[str] = (), tests: Sequence[str] = ()) -> Admitted:
    """`patch` without the files the policy protects by name (`protected`: the task's
    patterns; `tests`: the patterns of the files the repository's pytest collects)."""
    text = with_final_newline(patch)
    try:
        patchset, _paths, strip = parse_patch(text)
    except PatchError:  # the policy says why when it is applied
        return Admitted(patch)
    kept: list[PatchedFile] = []
    dropped: list[Dropped] = []
    for pfile in patchset:
        found = _dropped(pfile, strip, protected, tests)
        if found is None:
            kept.append(pfile)
        else:
            dropped.append(found)
    if not dropped:
        return Admitted(patch)
    return Admitted("".join(str(pfile) for pfile in kept), dropped)


def _dropped(pfile: PatchedFile, strip: int, protected: Sequence[str],
             tests: Sequence[str]) -> Dropped | None:
    """The reason `pfile` (one file's diff) is left out, or None when it is kept (kept too when
    it is one the policy refuses whole: that refusal stands)."""
    info = str(pfile.patch_info or "")
    if pfile.is_binary_file or "GIT binary patch" in info or any(
            line.split()[-1:] == [SYMLINK_MODE] for line in info.splitlines()):
        return None  # binary or symlink: refused whole
    paths = [strip_path(raw, strip) for raw in (pfile.source_file, pfile.target_file)
             if raw is not None and raw != "/dev/null"]
    if not paths or any(unsafe_reason(path) for path in paths):
        return None
    for path in paths:  # a rename is dropped when either of its names is protected
        reason = droppable_reason(path, protected, tests)
        if reason:
            return Dropped(path, policy_kind(path, tests), reason)
    return None


def summary(dropped: Sequence[Dropped]) -> str:
    """One line for the model and the records: which files were left out, and why."""
    names = ", ".join(d.path for d in dropped[:5]) + (" ..." if len(dropped) > 5 else "")
    why = dropped[0].reason.split(": ", 1)[-1]
    return f"left out before judging: {names} ({why}); the rest of the patch was judged"
