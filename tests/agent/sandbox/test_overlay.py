"""Shared copy-on-write workspaces (agent/sandbox/overlay.py): a workspace shows what a copy
would hold; what a candidate changes stays in its own workspace, never reaches the repository or
another workspace, and is undone exactly before the next candidate; a pool hands such
workspaces out and restores them on release. Real overlayfs and idmapped mounts (root); no
engine: the sandboxes are stand-ins, the candidate's writes are made as the sandbox user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import RecordingBackend

from ooda.agent.sandbox import overlay
from ooda.agent.sandbox.bwrap import BwrapSandbox
from ooda.agent.sandbox.overlay import OWNER_FILE, SharedBase, shared_base, unmount_leftovers
from ooda.agent.sandbox.pool import SandboxPool
from ooda.agent.support import fstree
from ooda.agent.verify.workspace import COPY_EXCLUDES, make_workspace

OWNER = (1000, 1000)
SKIP = COPY_EXCLUDES.__contains__

CANDIDATE = """
set -e
echo 'def test(): assert True' > tests/test_a.py
rm pkg/s0/m1.py
rm -rf pkg/s0/sub
mkdir pkg/fresh && echo n > pkg/fresh/new.py
rm -rf pkg/s1/sub && mkdir pkg/s1/sub && echo z > pkg/s1/sub/other.py
rm pkg/link && mkdir pkg/link
chmod 700 pkg/s3
chmod 600 pkg/s0/m2.py
mkdir -p pkg/__pycache__ && echo y > pkg/__pycache__/b.pyc
rm pkg/s0/m3.py && ln -s /etc/passwd pkg/s0/m3.py
echo top > newtop.txt
mv pkg/s1 pkg/s1moved
mv pkg/s2 pkg/tmp && mv pkg/s3 pkg/s2 && mv pkg/tmp pkg/s3
"""
"""What a candidate might leave behind: tests edited, files and folders removed, replaced,
added, modes changed, a link swapped in for a file, folders renamed and swapped."""


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    for i in range(40):
        folder = repo / "pkg" / f"s{i // 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{i}.py").write_text(f"VALUE = {i}\n")
        (folder / "sub").mkdir(exist_ok=True)
        (folder / "sub" / f"d{i}.py").write_text(f"DEEP = {i}\n")
    (repo / "pkg" / "__pycache__").mkdir()
    (repo / "pkg" / "__pycache__" / "old.pyc").write_bytes(b"\0")
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    os.mkfifo(repo / "pkg" / "fifo")
    os.symlink("s0/m0.py", repo / "pkg" / "link")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test(): assert False\n")
    return repo


def as_sandbox_user(workspace: Path, script: str) -> None:
    subprocess.run(["setpriv", f"--reuid={OWNER[0]}", f"--regid={OWNER[1]}", "--clear-groups",
                    "sh", "-c", script], cwd=workspace, check=True)


def mounted(path: Path) -> bool:
    """Whether a mount sits on `path` (os.path.ismount misses a bind mount of one file system)."""
    points = {line.split(" ")[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}
    return str(path) in points


def owners(tree: Path) -> set[int]:
    return {os.lstat(os.path.join(folder, name)).st_uid
            for folder, dirs, files in fstree.walk(tree) for name in dirs + files}


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SharedBase:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("shared workspaces need root (overlayfs, idmapped mounts)")
    monkeypatch.setenv("OODA_OVERLAY_MIN_FILES", "1")
    made = shared_base(make_repo(tmp_path), tmp_path / "work", OWNER, SKIP)
    if made is None:
        pytest.skip("this kernel or file system offers no overlayfs with idmapped mounts")
    return made


def test_a_workspace_shows_a_copy_and_is_restored_exactly(base: SharedBase, tmp_path: Path) -> None:
    repo = base.tree
    copy = make_workspace(repo, tmp_path / "copies")
    want, repo_before = fstree.tree_digest(copy), fstree.tree_digest(repo)
    first, second = tmp_path / "work" / "one", tmp_path / "work" / "two"
    for slot in (first, second):
        slot.mkdir()
        base.mount(slot)
    try:
        assert fstree.tree_digest(first) == want  # no .git, caches or FIFO: as a copy
        assert owners(first) == {OWNER[0]}  # the sandbox user's, without a chown
        as_sandbox_user(first, CANDIDATE)
        (first / "pkg" / "s0" / "m4.py").write_text("patched by the host\n")  # a patch
        base.own(first)
        assert owners(first) == {OWNER[0]}
        assert fstree.tree_digest(first) != want
        # the other workspace and the repository never see a candidate's changes
        assert fstree.tree_digest(second) == want
        assert fstree.tree_digest(repo) == repo_before
        with pytest.raises(OSError):
            (base.lower / "tests" / "test_a.py").write_text("tampered")  # read-only
        base.restore(first)
        assert fstree.tree_digest(first) == want
        assert owners(first) == {OWNER[0]}
    finally:
        base.unmount(first)
        base.unmount(second)
        base.close()
    assert not first.exists() or not os.listdir(first)
    assert not (tmp_path / "work").exists() or not any(
        p.name.startswith("layers-") for p in (tmp_path / "work").iterdir())


def test_the_base_is_walked_by_directory_listings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mask's walk takes each entry's kind from its directory's listing, not from an lstat
    per file: beside a thread importing, each system call waits for the interpreter's lock
    again (a 20,000-file repository's base took 1.7 s to mount so, 0.1 s alone; issue 40 #13)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("shared workspaces need root (overlayfs, idmapped mounts)")
    monkeypatch.setenv("OODA_OVERLAY_MIN_FILES", "1")
    repo = make_repo(tmp_path)
    files = sum(len(names) for _, _, names in fstree.walk(repo))
    calls: list[object] = []
    real = os.lstat
    monkeypatch.setattr(os, "lstat", lambda *a, **k: calls.append(a) or real(*a, **k))
    made = shared_base(repo, tmp_path / "work", OWNER, SKIP)
    if made is None:
        pytest.skip("this kernel or file system offers no overlayfs with idmapped mounts")
    made.close()
    assert len(calls) < files / 4, (len(calls), files)


def _mounted(workspace: Path) -> None:
    assert os.path.ismount(workspace)  # mounted before the sandbox binds it


def test_a_pool_hands_out_shared_workspaces_and_restores_them(
    base: SharedBase, tmp_path: Path,
) -> None:
    want = fstree.tree_digest(make_workspace(base.tree, tmp_path / "copies"))
    copies: list[Path] = []
    pool = SandboxPool(RecordingBackend(_mounted), tmp_path / "work", size=1,  # type: ignore[arg-type]
                       base=copies.append, shared=base)
    try:
        box, _ = pool.acquire(lambda ws: (ws / "pkg" / "s0" / "m0.py").write_text("fix\n"))
        assert os.lstat(box.workspace / "pkg" / "s0" / "m0.py").st_uid == OWNER[0]
        as_sandbox_user(box.workspace, CANDIDATE)
        pool.release(box)
        pool.settle()
        again, _ = pool.acquire(lambda ws: None)
        assert again is box and fstree.tree_digest(again.workspace) == want
        assert copies == []  # nothing was copied
        pool.release(again)
    finally:
        pool.close()
    assert not os.path.ismount(box.workspace)


def test_mounts_left_by_a_killed_process_are_undone_and_a_live_ones_kept(
    base: SharedBase, tmp_path: Path,
) -> None:
    slot = tmp_path / "work" / "slot"
    slot.mkdir()
    base.mount(slot)
    try:
        unmount_leftovers()
        assert mounted(slot) and mounted(base.lower)  # its owner runs: kept
        (base.layers / OWNER_FILE).write_text(json.dumps({"ooda.owner_pid": "999999999"}))
        assert unmount_leftovers() >= 2  # the workspace, then the base
        assert not mounted(slot) and not mounted(base.lower)
        assert not base.layers.exists()
    finally:
        base.unmount(slot)
        base.close()


def test_a_run_stopped_by_ctrl_c_leaves_nothing_mounted(base: SharedBase, tmp_path: Path) -> None:
    """The exit handlers (which ooda runs on every exit, agent/support/exits.py) unmount what
    a run still had mounted."""
    slot = tmp_path / "work" / "slot"
    slot.mkdir()
    base.mount(slot)
    overlay._unmount_at_exit()
    assert not mounted(slot) and not mounted(base.lower) and not base.layers.exists()


def test_bwrap_sandboxes_share_the_base_each_as_its_own_uid(base: SharedBase, tmp_path: Path) -> None:
    """bwrap: a fresh sandbox per candidate, each with a leased uid of its own, gets the base
    seen as that uid's (no copy); what its candidate wrote is gone with it."""
    from sandbox_helpers import backend_or_skip

    backend = backend_or_skip("bwrap")
    want = fstree.tree_digest(make_workspace(base.tree, tmp_path / "copies"))
    copies: list[Path] = []
    pool = SandboxPool(backend, tmp_path / "work", size=2, base=copies.append, shared=base)
    try:
        first, _ = pool.acquire(lambda ws: (ws / "pkg" / "s0" / "m0.py").write_text("fix\n"))
        second, _ = pool.acquire(lambda ws: None)
        script = ("import os; open('tests/test_a.py', 'w').write('tampered'); "
                  "os.remove('pkg/s0/m1.py'); print(os.getuid(), os.stat('pkg/s0/m0.py').st_uid)")
        ran = first.run(["python3", "-c", script], timeout_s=60)
        assert ran.exit_code == 0, ran.output
        uid, owner = ran.output.split()
        assert uid == owner  # the files are its user's, in the sandbox
        assert isinstance(first, BwrapSandbox) and isinstance(second, BwrapSandbox)
        assert first.workspace_owner is not None and second.workspace_owner is not None
        leased = first.workspace_owner[0]
        assert os.lstat(first.workspace / "pkg" / "s0" / "m2.py").st_uid == leased  # on the host
        assert leased != second.workspace_owner[0]
        assert fstree.tree_digest(second.workspace) == want  # untouched by the other
        workspace = first.workspace
        pool.release(first)
        assert not mounted(workspace) and not workspace.exists()
        assert copies == []
        pool.release(second)
    finally:
        pool.close()
