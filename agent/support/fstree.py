"""Walk, copy and remove directory trees on the host without recursion and without following links.

Candidate code writes the workspaces, so a tree the host walks may hold symbolic links (to
/proc/self/environ, to a root-only file), FIFOs and devices, or be thousands of levels deep.
Python 3.11's os.walk, shutil.copytree, shutil.rmtree and Path.rglob recurse (RecursionError
past ~1,000 levels) and copytree(symlinks=False) follows links, which the host must never do
on such a tree. Here every traversal keeps an explicit stack, descends with directory file
descriptors opened O_NOFOLLOW (a link swapped in for a directory is refused, not followed),
reads only regular files (fstat after an O_NOFOLLOW | O_NONBLOCK open: no FIFO blocks, no
device is read), and removal flattens a deep chain into its root so that the number of open
descriptors stays small however deep the tree is.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_COPY_DEPTH = 200
"""Deepest directory level copied; a deeper tree is refused (TreeTooDeep)."""
FLATTEN_DEPTH = 64
"""remove_tree() moves a directory this deep up into the root before going on."""
_CHUNK = 1 << 20


class TreeTooDeep(OSError):
    """A tree nested more deeply than a copy accepts."""


class NotRegular(OSError):
    """A path that is a link, a directory or a special file where a regular file was wanted."""


def walk(root: Path | str) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk(root) top-down, iteratively, never following links: yields (dirpath, dirnames,
    filenames); the caller may prune dirnames in place. Links and special files are listed in
    filenames; unreadable directories (or paths too long to name) are skipped."""
    stack = [os.fspath(root)]
    while stack:
        top = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError:
            continue
        yield top, dirs, files
        stack.extend(os.path.join(top, name) for name in reversed(dirs))


def open_dir(root: Path | str, rel: str = "") -> int:
    """A descriptor for `root`/`rel`, opening each component of `rel` with O_NOFOLLOW (a link
    anywhere below `root` raises OSError instead of being followed)."""
    fd = os.open(os.fspath(root), DIR_FLAGS)
    for part in Path(rel).parts if rel else ():
        try:
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def read_regular(root: Path | str, rel: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file `root`/`rel` (at most `limit`), never through a link
    (in any component below `root`) and never from a FIFO, socket or device: NotRegular."""
    parent, _, name = rel.rpartition("/")
    dir_fd = open_dir(root, parent)
    try:
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            raise NotRegular(exc.errno, f"{rel}: not a regular file") from exc
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegular(f"{rel}: not a regular file")
        return handle.read() if limit is None else handle.read(limit)


def copy_tree(
    source: Path | str,
    target: Path | str,
    *,
    rel: str = "",
    keep_links: bool = False,
    ignore: Callable[[str], bool] | None = None,
    file_mode: int | None = None,
    dir_mode: int | None = None,
    max_depth: int = MAX_COPY_DEPTH,
) -> int:
    """Copy the tree at `source`/`rel` (no link followed on the way to it) into `target` (created; existing directories are merged) and
    return how many entries were left out. Only directories and regular files are copied;
    links are recreated as links when `keep_links` (never followed) and left out otherwise;
    special files are left out, and so is any name `ignore(name)` accepts. Modes are kept (less
    set-id bits) unless `file_mode`/`dir_mode` say otherwise; file times are kept. TreeTooDeep
    when `source` nests more than `max_depth` levels."""
    skipped = 0
    src_fd = open_dir(source, rel)
    _make_dir(target, dir_mode if dir_mode is not None else _mode(os.fstat(src_fd).st_mode))
    with contextlib.closing(_entries(src_fd, source, ignore, max_depth)) as entries:
        for fd, name, path, info in entries:
            out = os.path.join(target, path)
            if info is None:  # ignored
                skipped += 1
            elif stat.S_ISDIR(info.st_mode):
                _make_dir(out, dir_mode if dir_mode is not None else _mode(info.st_mode))
            elif stat.S_ISREG(info.st_mode):
                if not _copy_file(fd, name, out, file_mode):
                    skipped += 1
            elif stat.S_ISLNK(info.st_mode) and keep_links:
                os.symlink(os.readlink(name, dir_fd=fd), out)
            else:
                skipped += 1
    return skipped


def tree_digest(
    source: Path | str, *, ignore: Callable[[str], bool] | None = None,
    max_depth: int = MAX_COPY_DEPTH,
) -> str:
    """A hash of the tree at `source` as copy_tree(keep_links=True, ignore=...) would copy it:
    every directory, regular file (its bytes and permission bits) and link (its target), by
    relative path; what copy_tree leaves out is left out here too. No link is followed."""
    import hashlib

    digest = hashlib.blake2b(digest_size=20)
    with contextlib.closing(_entries(open_dir(source), source, ignore, max_depth)) as entries:
        for fd, name, rel, info in entries:
            if info is None:  # ignored
                continue
            if stat.S_ISDIR(info.st_mode):
                digest.update(b"d\0" + os.fsencode(rel) + b"\0")
            elif stat.S_ISREG(info.st_mode):
                digest.update(b"f\0" + os.fsencode(rel) + b"\0%o\0%d\0" % (_mode(info.st_mode),
                                                                            info.st_size))
                file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                with os.fdopen(file_fd, "rb") as handle:
                    for chunk in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(chunk)
            elif stat.S_ISLNK(info.st_mode):
                digest.update(b"l\0" + os.fsencode(rel) + b"\0"
                              + os.fsencode(os.readlink(name, dir_fd=fd)) + b"\0")
    return digest.hexdigest()


def kinds(
    source: Path | str, ignore: Callable[[str], bool] | None = None,
    max_depth: int = MAX_COPY_DEPTH,
) -> Generator[tuple[str, str | None], None, None]:
    """Every entry below the directory `source`, in _entries()' order, as (its path relative
    to the top, its kind: "dir", "file", "link" or "other"; None for a name `ignore` accepts,
    neither read nor descended), no link followed. The kinds come from the directory
    listings' entry types: one system call per directory, not one per entry, so that a walk
    beside a busy thread does not wait for the interpreter's lock again after every file
    (a filesystem that gives no types is asked per entry, as os.scandir does)."""
    with contextlib.closing(_walk(open_dir(source), source, ignore, max_depth)) as walk:
        for _fd, entry, path, ignored in walk:
            if ignored:
                yield path, None
            elif entry.is_dir(follow_symlinks=False):
                yield path, "dir"
            elif entry.is_symlink():
                yield path, "link"
            else:
                yield path, "file" if entry.is_file(follow_symlinks=False) else "other"


def _scan(fd: int) -> Iterator[os.DirEntry[str]]:
    """The entries of the open directory `fd`, sorted by name (the listing read whole)."""
    with os.scandir(fd) as found:
        return iter(sorted(found, key=lambda entry: entry.name))


def copy_file(dir_fd: int, name: str, out: str, mode: int | None = None) -> bool:
    """Copy the regular file `name` of the open directory `dir_fd` to the path `out`, its mode
    (or `mode`) and times kept (False when it turned out not to be a regular file)."""
    return _copy_file(dir_fd, name, out, mode)


def _entries(
    top_fd: int, source: Path | str, ignore: Callable[[str], bool] | None, max_depth: int,
) -> Generator[tuple[int, str, str, os.stat_result | None], None, None]:
    """Every entry below the open directory `top_fd`, depth first in sorted order, as (the fd
    of its directory, its name, its path relative to the top, its lstat; None for a name
    `ignore` accepts, which is neither read nor descended). A directory comes right after it
    was opened (O_NOFOLLOW), before what it holds; one nested deeper than `max_depth` is
    TreeTooDeep. Every descriptor is closed when the walk ends or is closed, `top_fd` too."""
    with contextlib.closing(_walk(top_fd, source, ignore, max_depth)) as walk:
        for fd, entry, path, ignored in walk:
            yield fd, entry.name, path, None if ignored else entry.stat(follow_symlinks=False)


def _walk(
    top_fd: int, source: Path | str, ignore: Callable[[str], bool] | None, max_depth: int,
) -> Generator[tuple[int, os.DirEntry[str], str, bool], None, None]:
    """The descriptor-stack walk under kinds() and _entries(): every entry below the open
    directory `top_fd`, depth first in sorted order, as (the fd of its directory, its entry, its
    path relative to the top, whether `ignore` accepted its name: such an entry is not
    descended). A directory is opened (O_NOFOLLOW) before it is yielded; one nested deeper than
    `max_depth` is TreeTooDeep. Every descriptor is closed when the walk ends or is closed,
    `top_fd` too."""
    frames: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = [(top_fd, "", _scan(top_fd))]
    try:
        while frames:
            fd, prefix, found = frames[-1]
            entry = next(found, None)
            if entry is None:
                os.close(fd)
                frames.pop()
                continue
            path = prefix + entry.name
            ignored = ignore is not None and ignore(entry.name)
            if not ignored and entry.is_dir(follow_symlinks=False):
                if len(frames) >= max_depth:
                    raise TreeTooDeep(f"{source}: nested more than {max_depth} directories deep")
                child = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                frames.append((child, path + "/", _scan(child)))
            yield fd, entry, path, ignored
    finally:
        for fd, _, _ in frames:
            os.close(fd)


def _mode(st_mode: int) -> int:
    return stat.S_IMODE(st_mode) & 0o777


def _make_dir(path: Path | str, mode: int) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise
    os.chmod(path, mode | 0o700)


def _copy_file(dir_fd: int, name: str, out: str, mode: int | None) -> bool:
    """Copy one regular file (False when it turned out not to be one)."""
    fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False
        wanted = mode if mode is not None else _mode(info.st_mode)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        dst = os.open(out, flags, 0o600)
        try:
            _copy_bytes(fd, dst, info.st_size)
            os.fchmod(dst, wanted)
            os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(fd)
    return True


def _copy_bytes(src: int, dst: int, size: int) -> None:
    """All of `src` into `dst`: in the kernel (copy_file_range, one call for a small file)
    where it can, else by reads and writes."""
    if size and hasattr(os, "copy_file_range"):
        try:
            while os.copy_file_range(src, dst, _CHUNK):
                pass
            return
        except OSError:  # not on this file system, or across devices: the plain way
            os.lseek(src, 0, os.SEEK_SET)
            os.lseek(dst, 0, os.SEEK_SET)
            os.ftruncate(dst, 0)
    while chunk := os.read(src, _CHUNK):
        os.write(dst, chunk)


def remove_workspace(path: Path | str) -> None:
    """Delete a workspace however deep, never following a link; never raises."""
    remove_tree(path)


def remove_tree(path: Path | str) -> bool:
    """Delete `path` and everything below it, however deep, never following a link (a link at
    `path` itself is unlinked) and making read-only directories writable on the way. Returns
    False when something could not be removed; never raises OSError."""
    path = os.fspath(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        return True
    if stat.S_IMODE(info.st_mode) & 0o700 != 0o700:
        _try(os.chmod, path, 0o700)
    try:
        _empty(path)
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _empty(path: str) -> None:
    """Remove everything inside the directory `path` (see remove_tree)."""
    root = open_dir(path)
    counter = itertools.count()
    frames: list[tuple[int, str, list[str]]] = [(root, "", _listing(root))]
    failed: OSError | None = None
    try:
        while frames:
            fd, name, names = frames[-1]
            if not names:
                frames.pop()
                if frames:  # the root itself is removed by the caller
                    os.close(fd)
                    failed = _try(os.rmdir, name, dir_fd=frames[-1][0]) or failed
                continue
            child = names.pop()
            try:
                info = os.lstat(child, dir_fd=fd)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                failed = _try(os.unlink, child, dir_fd=fd) or failed
            elif len(frames) >= FLATTEN_DEPTH:  # move it up into the root, go on from there
                flat = f".ooda-rm-{os.getpid()}-{next(counter)}"
                os.rename(child, flat, src_dir_fd=fd, dst_dir_fd=root)
                frames[0][2].append(flat)
            else:
                if stat.S_IMODE(info.st_mode) & 0o700 != 0o700:
                    _try(os.chmod, child, 0o700, dir_fd=fd)
                sub = os.open(child, DIR_FLAGS, dir_fd=fd)
                frames.append((sub, child, _listing(sub)))
    finally:
        for fd, _, _ in frames[1:]:
            os.close(fd)
        os.close(root)
    if failed is not None:
        raise failed


def _listing(fd: int) -> list[str]:
    try:
        os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | 0o700)
    except OSError:
        pass
    return os.listdir(fd)


def _try(action: Callable[..., object], *args: Any, **kwargs: Any) -> OSError | None:
    """Run action(*args, **kwargs); the OSError it raised (None: done, or already gone)."""
    try:
        action(*args, **kwargs)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc
    return None


CHOWN_DEPTH = 256
"""chown_tree() leaves entries deeper than this as they are (one descriptor per level)."""


def chown_tree(root: Path | str, uid: int, gid: int) -> None:
    """lchown `root` and everything below it (links themselves, never their targets), through
    directory descriptors opened O_NOFOLLOW; entries below CHOWN_DEPTH levels are left alone."""
    os.lchown(root, uid, gid)
    frames: list[tuple[int, list[str]]] = []
    try:
        top = open_dir(root)
        frames.append((top, os.listdir(top)))
        while frames:
            fd, names = frames[-1]
            if not names:
                os.close(fd)
                frames.pop()
                continue
            name = names.pop()
            try:
                os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
                if len(frames) < CHOWN_DEPTH and stat.S_ISDIR(os.lstat(name, dir_fd=fd).st_mode):
                    sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                    frames.append((sub, os.listdir(sub)))
            except FileNotFoundError:
                continue
    finally:
        for fd, _ in frames:
            os.close(fd)
