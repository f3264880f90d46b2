"""Tests for agent/verify/workspace.py: repo copies, the candidate edit policy and safe patch applying."""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path

import pytest

from ooda.agent.support.fstree import remove_workspace
from ooda.agent.verify.workspace import (
    PatchError,
    apply_patch,
    check_patch_policy,
    make_workspace,
    patch_paths,
)


def diff(path: str, old: str, new: str) -> str:
    """A git-style unified diff of one file ('' old text = a new file)."""
    src = f"a/{path}" if old else "/dev/null"
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), src, f"b/{path}"
    )
    mode = "" if old else "new file mode 100644\n"
    return f"diff --git a/{path} b/{path}\n{mode}" + "".join(lines)


def new_file(path: str, text: str = "x = 1\n") -> str:
    return diff(path, "", text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (root / ".mypy_cache").mkdir()
    return root


# --------------------------------------------------------------------------- make_workspace


def test_make_workspace_copies_without_caches_and_keeps_symlinks(
    repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (repo / "link.txt").symlink_to(outside)
    os.mkfifo(repo / "pipe")
    ws = make_workspace(repo, tmp_path / "work")
    assert ws.parent == tmp_path / "work"
    assert (ws / "pkg" / "mod.py").read_text() == "def f():\n    return 1\n"
    assert not (ws / ".git").exists()
    assert not (ws / "pkg" / "__pycache__").exists()
    assert not (ws / ".mypy_cache").exists()
    assert not (ws / "pipe").exists()
    assert (ws / "link.txt").is_symlink()
    assert os.readlink(ws / "link.txt") == str(outside)
    other = make_workspace(repo, tmp_path / "work")
    assert other != ws
    remove_workspace(ws)
    assert not ws.exists() and outside.read_text() == "secret"


# --------------------------------------------------------------------------- policy


def test_patch_paths_lists_sources_and_targets() -> None:
    patch = diff("pkg/mod.py", "a\n", "b\n") + (
        "diff --git a/old.py b/new.py\nsimilarity index 100%\n"
        "rename from old.py\nrename to new.py\n"
    )
    assert patch_paths(patch) == ["pkg/mod.py", "old.py", "new.py"]


def test_patch_paths_rejects_a_broken_diff() -> None:
    with pytest.raises(PatchError, match="not a valid unified diff"):
        patch_paths("--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n")


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("just some prose, no diff\n", "no file changes"),
        (new_file("tests/test_x.py"), "tests/test_x.py: this is a test file"),
        (new_file("pkg/tests/helpers.py"), "pkg/tests/helpers.py: this is a test file"),
        (new_file("test/data.py"), "test/data.py: this is a test file"),
        (new_file("pkg/test_mod.py"), "pkg/test_mod.py: this is a test file"),
        (new_file("pkg/mod_test.py"), "pkg/mod_test.py: this is a test file"),
        (new_file("conftest.py"), "conftest.py: conftest.py"),
        (new_file("pkg/conftest.py"), "pkg/conftest.py: conftest.py"),
        (new_file("pyproject.toml", "[x]\n"), "pyproject.toml: tool configuration"),
        (new_file("setup.cfg", "[x]\n"), "setup.cfg: tool configuration"),
        (new_file("pytest.ini", "[x]\n"), "pytest.ini: tool configuration"),
        (new_file(".ruff.toml", "x=1\n"), ".ruff.toml: tool configuration"),
        (new_file("sub/mypy.ini", "[x]\n"), "sub/mypy.ini: tool configuration"),
        (new_file("sitecustomize.py"), "sitecustomize.py: tool configuration"),
        (new_file("evil.pth", "import os\n"), "evil.pth: tool configuration"),
        (new_file(".git/hooks/post-checkout", "x\n"), ".git/hooks/post-checkout"),
        (new_file(".ooda/junit.xml", "<x/>\n"), ".ooda/junit.xml"),
        (new_file("../escape.py"), "../escape.py: the path must stay inside"),
        (new_file("pytest.py"), "pytest.py: a new top-level module named 'pytest' would shadow"),
        (new_file("json/__init__.py"), "shadow"),
    ],
)
def test_policy_rejects_with_the_path_and_why(patch: str, expected: str) -> None:
    with pytest.raises(PatchError) as info:
        check_patch_policy(patch)
    assert expected in str(info.value)


def test_policy_rejects_absolute_paths() -> None:
    patch = "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchError, match="absolute"):
        check_patch_policy(patch)


def test_policy_rejects_binary_and_symlink_patches() -> None:
    binary = (
        "diff --git a/x.bin b/x.bin\nnew file mode 100644\nindex 0000000..e69de29\n"
        "Binary files /dev/null and b/x.bin differ\n"
    )
    with pytest.raises(PatchError, match="binary"):
        check_patch_policy(binary)
    link = (
        "diff --git a/link.py b/link.py\nnew file mode 120000\nindex 0000000..1234567\n"
        "--- /dev/null\n+++ b/link.py\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
    )
    with pytest.raises(PatchError, match="symbolic link"):
        check_patch_policy(link)


def test_policy_accepts_ordinary_code_changes() -> None:
    check_patch_policy(diff("pkg/mod.py", "a\n", "b\n") + new_file("pkg/new_module.py"))
    check_patch_policy(diff("pkg/json.py", "a\n", "b\n"))  # not top-level: shadows nothing


# --------------------------------------------------------------------------- apply_patch


def test_apply_patch_changes_the_workspace(repo: Path, tmp_path: Path) -> None:
    ws = make_workspace(repo, tmp_path / "work")
    patch = diff("pkg/mod.py", "def f():\n    return 1\n", "def f():\n    return 2\n")
    patch += new_file("pkg/extra.py")
    assert apply_patch(ws, patch) == ["pkg/mod.py", "pkg/extra.py"]
    assert "return 2" in (ws / "pkg" / "mod.py").read_text()
    assert (ws / "pkg" / "extra.py").read_text() == "x = 1\n"
    assert "return 1" in (repo / "pkg" / "mod.py").read_text()


def test_apply_patch_reports_gits_message(repo: Path, tmp_path: Path) -> None:
    ws = make_workspace(repo, tmp_path / "work")
    patch = diff("pkg/mod.py", "def f():\n    return 7\n", "def f():\n    return 2\n")
    with pytest.raises(PatchError, match="does not apply.*pkg/mod.py"):
        apply_patch(ws, patch)
    assert "return 1" in (ws / "pkg" / "mod.py").read_text()


def test_trusted_patches_may_touch_tests_but_not_escape(repo: Path, tmp_path: Path) -> None:
    ws = make_workspace(repo, tmp_path / "work")
    assert apply_patch(ws, new_file("tests/test_new.py"), trusted=True) == ["tests/test_new.py"]
    with pytest.raises(PatchError):
        apply_patch(ws, new_file("tests/test_other.py"))
    with pytest.raises(PatchError):
        apply_patch(ws, new_file("../escape.py"), trusted=True)
    assert not (tmp_path / "work" / "escape.py").exists()


def test_apply_patch_never_writes_through_symlinks(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.py").write_text("a\n")
    (repo / "linked_dir").symlink_to(outside)
    (repo / "linked.py").symlink_to(outside / "target.py")
    ws = make_workspace(repo, tmp_path / "work")
    with pytest.raises(PatchError):
        apply_patch(ws, new_file("linked_dir/planted.py"))
    with pytest.raises(PatchError, match="outside the repository"):
        apply_patch(ws, diff("linked.py", "a\n", "b\n"))
    with pytest.raises(PatchError):
        apply_patch(ws, diff("linked.py", "a\n", "b\n"), trusted=True)
    assert not (outside / "planted.py").exists()
    assert (outside / "target.py").read_text() == "a\n"


def test_apply_patch_ignores_an_enclosing_git_repository(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / "repo").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    (outer / "repo" / "m.py").write_text("a\n")
    ws = make_workspace(outer / "repo", outer / "work")
    assert apply_patch(ws, diff("m.py", "a\n", "b\n")) == ["m.py"]
    assert (ws / "m.py").read_text() == "b\n"
    assert (outer / "repo" / "m.py").read_text() == "a\n"
