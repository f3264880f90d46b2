"""Workspaces and patches: copy a repository, check a candidate patch against the edit policy,
apply it safely with `git apply`.

Diff text is parsed with the `unidiff` library; `git apply` (run outside any repository, with
GIT_CEILING_DIRECTORIES set) does the applying and is asked with `--numstat` which paths it
would touch, so the policy sees git's own reading of the patch as well as unidiff's.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import pathspec
from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.policy import (
    CONFIG_NAMES,
    RESERVED_DIRS,
    SHADOWED,
    TEST_DIRS,
    TEST_FILE_PATTERNS,
)
from ooda.agent.support import fstree
from ooda.agent.support.git import git
from ooda.agent.support.testsupport import support_reason

COPY_EXCLUDES = frozenset({".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
"""Directory (or file) names never copied into a workspace."""

GIT_NAMES = frozenset({".gitattributes", ".gitmodules"})
METADATA_SUFFIXES = (".egg-info", ".dist-info", ".egg-link")
"""Packaging metadata: entry points there load plugins (pytest11) into the test run."""
BYTECODE_SUFFIXES = (".pyc", ".pyo")
SYMLINK_MODE = "120000"
GIT_MESSAGE_LIMIT = 1500
MAX_PATH_PARTS = 64
"""Deepest path a patch may touch: a fix never needs more, and a tree thousands of levels deep
only stresses the host's tree walks."""
MAX_PATCH_BYTES = 4 * 1024 * 1024
"""Largest candidate patch considered (a fix is rarely more than a few kilobytes)."""


class PatchError(Exception):
    """A patch that cannot be used: unparseable, against the edit policy, or not applying.

    The message is one or a few lines meant to be shown to the model; `kind` names the reason
    in a word or two for the records (attempts.jsonl's invalid_reason)."""

    def __init__(self, message: str, kind: str = "patch_rejected") -> None:
        super().__init__(message)
        self.kind = kind


# --------------------------------------------------------------------------- workspaces


def make_workspace(repo: Path, parent: Path) -> Path:
    """Copy `repo` into a fresh directory under `parent` and return it.

    Caches and `.git` are left out; symlinks are copied as symlinks (never followed), and
    special files (sockets, FIFOs, devices) are skipped (ooda.agent.support.fstree: iterative, no links)."""
    parent.mkdir(parents=True, exist_ok=True)
    dest: Path | None = None
    try:
        dest = Path(tempfile.mkdtemp(prefix="ws-", dir=parent))
        fstree.copy_tree(repo, dest, keep_links=True, ignore=COPY_EXCLUDES.__contains__)
    except OSError as exc:
        if dest is not None:
            fstree.remove_tree(dest)
        raise InfraError(f"cannot copy {repo} into a workspace under {parent}: {exc}") from exc
    return dest


def copy_repo(repo: Path, parent: Path, workspace: Path) -> None:
    """Fill the empty directory `workspace` with a copy of `repo` (as make_workspace copies it,
    through a fresh directory under `parent` whose entries are moved in)."""
    copy = make_workspace(repo, parent)
    try:
        for entry in os.listdir(copy):
            os.rename(copy / entry, workspace / entry)
    finally:
        fstree.remove_workspace(copy)


# --------------------------------------------------------------------------- policy


def with_final_newline(patch: str) -> str:
    """`patch` ending in a newline: a diff whose only fault is a missing final newline (most
    of some systems' predictions) is read as if it had one (git apply calls it corrupt)."""
    return patch if not patch or patch.endswith("\n") else patch + "\n"


def parse_paths(patch: str) -> tuple[list[str], int]:
    """(the repo-relative paths a unified diff touches, its strip level -p); PatchError when
    unidiff cannot parse it."""
    _, paths, strip = parse_patch(patch)
    return paths, strip


def patch_paths(patch: str) -> list[str]:
    """Repo-relative paths a unified diff touches (sources and targets), in order, deduplicated.

    Raises PatchError when the text is not a diff unidiff can parse."""
    return parse_patch(patch)[1]


def parse_patch(patch: str) -> tuple[PatchSet, list[str], int]:
    """Parse the diff; return the set, the stripped paths and the strip level (-p) (PatchError
    when unidiff cannot parse it)."""
    try:
        patchset = PatchSet(patch)
    except UnidiffParseError as exc:
        raise PatchError(f"the patch is not a valid unified diff: {exc}") from exc
    strip = _strip_level(patchset)
    seen: dict[str, None] = {}
    for pfile in patchset:
        for raw in (pfile.source_file, pfile.target_file):
            if raw is not None and raw != "/dev/null":
                seen[strip_path(raw, strip)] = None
    return patchset, list(seen), strip


def _strip_level(patchset: PatchSet) -> int:
    """1 when every header path carries git's a/ and b/ prefixes, else 0."""
    raws = [
        raw
        for pfile in patchset
        for raw in (pfile.source_file, pfile.target_file)
        if raw is not None and raw != "/dev/null"
    ]
    if raws and all(raw.startswith(("a/", "b/")) for raw in raws):
        return 1
    return 0


def strip_path(raw: str, level: int) -> str:
    """A diff header's path without its first `level` components (git's -p)."""
    return raw.split("/", level)[-1] if level else raw


def protected_reason(path: str) -> str | None:
    """Why a candidate may not touch `path` (None when it may)."""
    return unsafe_reason(path) or protected_name_reason(path)


def policy_reason(path: str, protected: Sequence[str], tests: Sequence[str]) -> str | None:
    """Why the edit policy refuses a candidate's change to `path` (None when it may): an unsafe
    path, or one protected by name, by the task's `protected` patterns or by being collected by
    the repository's pytest (`tests`)."""
    return unsafe_reason(path) or droppable_reason(path, protected, tests)


def droppable_reason(path: str, protected: Sequence[str], tests: Sequence[str]) -> str | None:
    """Why the policy keeps `path` out of the judged tree by what it is (a test, conftest.py,
    configuration, test support, a collected file): what agent/verify/admit.py may leave out."""
    return (protected_name_reason(path) or collected_reason(path, tests)
            or support_reason(path, protected))


def policy_kind(path: str, tests: Sequence[str]) -> str:
    """The invalid edit's kind for a refused `path` ("test_file" for a collected one)."""
    return "test_file" if collected_reason(path, tests) else path_kind(path)


def unsafe_reason(path: str) -> str | None:
    """Why no candidate's patch naming `path` is judged at all (a path outside the repository,
    into .git/ or .ooda/, packaging metadata, bytecode): refused whole, never dropped."""
    pure = PurePosixPath(path)
    if path.startswith("/") or pure.is_absolute():
        return f"{path}: absolute paths are not allowed; use paths relative to the repository root"
    parts = pure.parts
    if not parts or ".." in parts:
        return f"{path}: the path must stay inside the repository (no '..')"
    if "\\" in path or "\0" in path:
        return f"{path}: escaped characters in paths are not allowed; name the file plainly"
    for part in parts:
        if part in RESERVED_DIRS:
            return f"{path}: files under {part}/ may not be edited"
        if part.endswith(METADATA_SUFFIXES):
            return (
                f"{path}: packaging metadata ({part}) may not be edited: its entry points "
                "would load plugins into the test run; change the code itself instead"
            )
        if part == "__pycache__" or part.endswith(BYTECODE_SUFFIXES):
            return f"{path}: compiled bytecode may not be added or edited; change the source"
    return None


def protected_name_reason(path: str) -> str | None:
    """Why a candidate may not touch `path` by what it is named (a test file, conftest.py,
    tool or git configuration, a site hook): what agent/verify/admit.py may drop."""
    parts = PurePosixPath(path).parts
    if not parts:
        return None
    name = parts[-1]
    if any(part in TEST_DIRS for part in parts[:-1]) or any(
        fnmatch.fnmatchcase(name, pattern) for pattern in TEST_FILE_PATTERNS
    ):
        return (
            f"{path}: this is a test file; edits to tests are not part of a solution "
            "(the task's tests decide), so change the code under test instead"
        )
    if name == "conftest.py":
        return (
            f"{path}: conftest.py configures the test run and may not be edited; "
            "change the code under test instead"
        )
    if name in GIT_NAMES:
        return f"{path}: git configuration may not be edited; change the code itself instead"
    if name in CONFIG_NAMES or name.endswith(".pth"):
        return (
            f"{path}: tool configuration (pytest, ruff, mypy, packaging, site hooks) may not be "
            "edited; change the code itself instead"
        )
    return None


def path_kind(path: str) -> str:
    """The invalid_reason of a path the policy refuses: "test_file" for tests and conftest.py,
    else "protected_file"."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    if name == "conftest.py" or any(part in TEST_DIRS for part in parts[:-1]) or any(
        fnmatch.fnmatchcase(name, pattern) for pattern in TEST_FILE_PATTERNS
    ):
        return "test_file"
    return "protected_file"


def check_patch_policy(
    patch: str, protected: Sequence[str] = (), tests: Sequence[str] = ()
) -> None:
    """Raise PatchError(reason) when a candidate patch may not be applied.

    Rejected: empty, huge or non-text patches, binary patches, symlinks, absolute paths, '..',
    anything under .git/ or .ooda/, test files, conftest.py, tool and git configuration, site
    hooks (.pth, sitecustomize), packaging metadata and bytecode; test support files, by rule
    and by the task's `protected` patterns (agent/support/testsupport.py); the files the
    repository's own pytest collects as tests (`tests`, agent/support/collected.py)."""
    patch = with_final_newline(patch)
    if not patch.strip():
        raise PatchError("the patch is empty: it changes no file")
    size = len(patch.encode("utf-8", "surrogatepass"))
    if size > MAX_PATCH_BYTES:
        raise PatchError(
            f"the patch is too large ({size / 1e6:.1f} MB; at most "
            f"{MAX_PATCH_BYTES / 1e6:.0f} MB): change only what the fix needs"
        )
    if "\0" in patch or _has_surrogates(patch):
        raise PatchError(
            "the patch is not text (it holds NUL bytes or characters no file can hold)"
        )
    patchset, paths, strip = parse_patch(patch)
    if len(patchset) == 0:
        raise PatchError("no file changes found: the text holds no '--- a/... +++ b/...' diff")
    for pfile in patchset:
        if pfile.is_binary_file or "GIT binary patch" in (pfile.patch_info or ""):
            raise PatchError(f"{pfile.path}: binary patches are not allowed")
        if _creates_symlink(str(pfile.patch_info or "")):
            raise PatchError(f"{pfile.path}: creating symbolic links is not allowed")
        if pfile.is_added_file or pfile.is_rename:
            reason = _shadow_reason(strip_path(pfile.target_file, strip))
            if reason:
                raise PatchError(reason)
    for path in paths:
        reason = policy_reason(path, protected, tests) or _depth_reason(path)
        if reason:
            raise PatchError(reason, policy_kind(path, tests))


def _depth_reason(path: str) -> str | None:
    depth = len(PurePosixPath(path).parts)
    if depth > MAX_PATH_PARTS:
        return (
            f"{path[:80]}...: the path is {depth} directories deep (at most {MAX_PATH_PARTS}); "
            "keep files in the repository's own layout"
        )
    return None


def _has_surrogates(text: str) -> bool:
    """Characters no file can hold: surrogates, except U+DC80..U+DCFF, which stand for the
    bytes of a patch in another encoding than UTF-8 (a latin-1 file's patch read with
    surrogateescape): git applies those bytes as they were."""
    return any("\ud800" <= ch <= "\udfff" and not "\udc80" <= ch <= "\udcff" for ch in text)


def _shadow_reason(path: str) -> str | None:
    """Why a new file may not be created: a top-level module (the workspace is on sys.path
    when the tools run) named like a standard-library or tool module would replace it."""
    parts = PurePosixPath(path).parts
    if len(parts) == 1 and parts[0].endswith(".py"):
        module = parts[0][:-3]
    elif len(parts) == 2 and parts[1] == "__init__.py":
        module = parts[0]
    else:
        return None
    if module in SHADOWED:
        return (
            f"{path}: a new top-level module named '{module}' would shadow the standard-library "
            "or tool module of that name; choose another name"
        )
    return None


def _creates_symlink(info: str) -> bool:
    for line in info.splitlines():
        if line.startswith(("new file mode", "new mode", "old mode", "deleted file mode")):
            if line.split()[-1] == SYMLINK_MODE:
                return True
        if line.startswith("index ") and line.split()[-1] == SYMLINK_MODE:
            return True
    return False


# --------------------------------------------------------------------------- applying


def collected_reason(path: str, tests: Sequence[str]) -> str | None:
    """Why a candidate may not touch `path` as a test file the repository's own pytest
    collects (`tests`: .gitignore patterns from agent/support/collected.py)."""
    if not tests or not _collected_spec(tuple(tests)).match_file(path):
        return None
    return (
        f"{path}: this is a test file (the repository's pytest collects it: its python_files, "
        "doctest files or a required test id); edits to tests are not part of a solution, so "
        "change the code under test instead"
    )


@functools.lru_cache(maxsize=16)
def _collected_spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def apply_patch(
    workspace: Path,
    patch: str,
    *,
    trusted: bool = False,
    protected: Sequence[str] = (),
    tests: Sequence[str] = (),
) -> list[str]:
    """Apply a unified diff to `workspace` with `git apply`; return the paths it changed.

    Untrusted (candidate) patches must pass check_patch_policy first; trusted ones (the task's
    own gold/test patches) skip the protected-file policy but not the path-safety checks."""
    patch = with_final_newline(patch)
    if trusted and not patch.strip():
        return []
    if not trusted:
        check_patch_policy(patch, protected, tests)
    _, paths, strip = parse_patch(patch)
    touched = git_numstat(workspace, patch, strip)
    changed = list(dict.fromkeys(paths + touched))
    for path in changed:
        reason = (
            path_safety(path)
            if trusted
            else policy_reason(path, protected, tests)
        )
        if reason:
            raise PatchError(reason, path_kind(path))
        check_inside(workspace, path)
    try:
        run_git_apply(workspace, patch, strip)
    except PatchError as exc:
        if "\r\n" in patch:
            raise PatchError(
                f"the patch has CRLF (Windows) line endings, which must match the files' own; {exc}",
                exc.kind,
            ) from exc
        raise
    for path in changed:
        check_inside(workspace, path)
    return changed


def changed_lines(patch: str) -> dict[str, list[tuple[int, int]]]:
    """Per file a patch changes, the (first, last) line spans of its new version that the
    patch added or changed ({} when the patch cannot be read: every line then counts)."""
    try:
        patchset, _paths, strip = parse_patch(with_final_newline(patch))
    except PatchError:
        return {}
    found: dict[str, list[tuple[int, int]]] = {}
    for pfile in patchset:
        if pfile.is_removed_file:
            continue
        path = strip_path(pfile.target_file, strip)
        spans: list[tuple[int, int]] = []
        for hunk in pfile:
            for line in hunk:
                number = line.target_line_no
                if not line.is_added or number is None:
                    continue
                if spans and spans[-1][1] == number - 1:
                    spans[-1] = (spans[-1][0], number)
                else:
                    spans.append((number, number))
        found[path] = spans
    return found


def check_applies(
    repo: Path, patch: str, protected: Sequence[str] = (), tests: Sequence[str] = ()
) -> None:
    """What apply_patch would refuse in a copy of `repo`, found without a copy or a sandbox:
    the policy, the protected files, and `git apply --check` (nothing is written). A patch
    given up front (`ooda verify --patch`) is judged so before the base's tests run."""
    patch = with_final_newline(patch)
    check_patch_policy(patch, protected, tests)
    _, paths, strip = parse_patch(patch)
    for path in dict.fromkeys(paths + git_numstat(repo, patch, strip)):
        reason = policy_reason(path, protected, tests)
        if reason:
            raise PatchError(reason, path_kind(path))
    _git(repo, ["apply", "--check", "--whitespace=nowarn", f"-p{strip}", "-"], patch)


def run_git_apply(workspace: Path, patch: str, strip: int) -> None:
    """`git apply` the patch in `workspace` (PatchError with git's message when it fails)."""
    _git(workspace, ["apply", "--whitespace=nowarn", f"-p{strip}", "-"], patch)


def path_safety(path: str) -> str | None:
    """Why no patch, trusted or not, may touch `path` (None when it may)."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or "\0" in path:
        return f"{path}: the path must stay inside the repository"
    if ".git" in pure.parts:
        return f"{path}: files under .git/ may not be edited"
    return None


def check_inside(workspace: Path, path: str) -> None:
    """PatchError when `path` resolves outside `workspace` (through a symbolic link)."""
    root = os.path.realpath(workspace)
    target = os.path.realpath(os.path.join(root, path))
    if os.path.commonpath([root, target]) != root:
        raise PatchError(f"{path}: resolves outside the repository (through a symbolic link)")


def git_numstat(workspace: Path, patch: str, strip: int) -> list[str]:
    """The paths git itself reads out of the patch (it does not apply anything here)."""
    out = _git(workspace, ["apply", "--numstat", "-z", f"-p{strip}", "-"], patch)
    paths: list[str] = []
    for field in out.split("\0"):
        if not field:
            continue
        # "added\tdeleted\tpath" or, for renames, "added\tdeleted\t" then two bare paths
        pieces = field.split("\t")
        path = pieces[2] if len(pieces) >= 3 else field
        if path:
            paths.append(path)
    return paths


def _git(workspace: Path, args: list[str], stdin: str) -> str:
    """Run git on `stdin` in `workspace`, isolated from any repository around it and from the
    caller's GIT_* settings; a failure is the patch's (PatchError) unless the disk is full or
    git is missing (InfraError)."""
    try:
        proc = git(
            workspace,
            *args,
            stdin=stdin.encode("utf-8", "surrogateescape"),
            isolated=True,
            timeout_s=120,
        )
    except FileNotFoundError as exc:
        raise InfraError("git is not installed; it is needed to apply patches") from exc
    except subprocess.TimeoutExpired as exc:
        raise PatchError("git apply took too long", "does_not_apply") from exc
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip() or "git apply failed"
        if "No space left on device" in message or "Disk quota exceeded" in message:
            raise InfraError(f"cannot write the workspace {workspace}: {message.splitlines()[0]}")
        if len(message) > GIT_MESSAGE_LIMIT:
            message = message[:GIT_MESSAGE_LIMIT] + " [...]"
        raise PatchError(f"the patch does not apply: {message}", "does_not_apply")
    return proc.stdout.decode("utf-8", "surrogateescape")
