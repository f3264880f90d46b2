"""agent/support/fstree.py on trees a candidate could leave: thousands of levels deep, links to host
files, FIFOs, read-only directories (no sandbox needed: the host side alone)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ooda.agent.support import fstree


def deep_chain(root: Path, levels: int) -> None:
    """root/d/d/.../d (`levels` deep) with a file at the bottom, made with relative paths so
    that the full path may exceed PATH_MAX."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def test_deep_trees_are_walked_refused_and_removed(tmp_path: Path) -> None:
    """2,500 levels: past the recursion limit of Python 3.11's os.walk/rmtree/copytree, and
    past PATH_MAX (4,096 bytes) for the full path."""
    tree = tmp_path / "tree"
    tree.mkdir()
    deep_chain(tree, 2500)
    assert sum(1 for _ in fstree.walk(tree)) > 1000  # no RecursionError
    with pytest.raises(fstree.TreeTooDeep):
        fstree.copy_tree(tree, tmp_path / "copy")
    fstree.chown_tree(tree, os.getuid(), os.getgid())
    assert fstree.remove_tree(tree)
    assert not tree.exists()
    assert fstree.remove_tree(tmp_path / "copy")
    assert list(tmp_path.iterdir()) == []


def test_links_and_special_files_are_never_followed_nor_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host secret")
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "kept.txt").write_text("kept")
    (src / "file-link").symlink_to(outside / "secret")
    (src / "dir-link").symlink_to(outside)
    (src / "environ").symlink_to("/proc/self/environ")
    os.mkfifo(src / "fifo")
    skipped = fstree.copy_tree(src, tmp_path / "copy")
    found = {
        os.path.relpath(os.path.join(d, n), tmp_path / "copy")
        for d, dirs, names in fstree.walk(tmp_path / "copy")
        for n in dirs + names
    }
    assert found == {"sub", "sub/kept.txt"} and skipped == 4
    fstree.copy_tree(src, tmp_path / "links", keep_links=True)
    assert os.readlink(tmp_path / "links" / "file-link") == str(outside / "secret")
    assert not (tmp_path / "links" / "fifo").exists()
    for rel in ("file-link", "fifo", "dir-link/secret", "environ"):
        with pytest.raises(OSError):
            fstree.read_regular(src, rel)
    assert fstree.read_regular(src, "sub/kept.txt") == b"kept"
    with pytest.raises(OSError):  # a link on the way to the tree's root is refused too
        fstree.copy_tree(src, tmp_path / "via-link", rel="dir-link")
    assert fstree.remove_tree(src)
    assert (outside / "secret").read_text() == "host secret"  # a link's target is left alone


def test_read_only_directories_are_removed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("x")
    for path in (tree / "a" / "b", tree / "a"):
        path.chmod(0)
    assert fstree.remove_tree(tree)
    assert not tree.exists()


def test_copied_modes_can_be_pinned(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_text("x")
    (src / "d" / "f").chmod(0o4777)
    fstree.copy_tree(src, tmp_path / "out", file_mode=0o644, dir_mode=0o755)
    assert stat.S_IMODE((tmp_path / "out" / "d" / "f").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "out" / "d").stat().st_mode) == 0o755
