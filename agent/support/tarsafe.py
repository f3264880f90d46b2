"""Extract a tar archive safely on every Python ooda runs on.

tarfile's "data" filter (PEP 706) exists from Python 3.11.4; Debian 12's python3 is 3.11.2, so
where it is missing the same rules are applied here: names stay inside the destination (no
absolute paths, no '..'), links point inside it, no device files or pipes, no owners taken from
the archive, and sane modes (no setuid/setgid/sticky bits, no group or other write).
"""

from __future__ import annotations

import copy
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path


class UnsafeMember(tarfile.TarError):
    """A member the "data" rules refuse."""


def extract_all(tar: tarfile.TarFile, dest: Path, *, skip_unsafe: bool = False) -> None:
    """Extract every member of `tar` into `dest` under the "data" rules; a member they refuse
    raises UnsafeMember (a tarfile.TarError), or is left out with `skip_unsafe`."""
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is not None:
        def checked(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
            try:
                return data_filter(member, path)  # type: ignore[no-any-return]
            except tarfile.TarError:
                if skip_unsafe:
                    return None
                raise

        tar.extractall(dest, filter=checked)
        return
    tar.extractall(dest, members=_data_members(tar, dest, skip_unsafe))


def _data_members(tar: tarfile.TarFile, dest: Path, skip_unsafe: bool
                  ) -> Iterator[tarfile.TarInfo]:
    root = os.path.realpath(dest)
    for member in tar:
        try:
            yield data_member(member, root)
        except UnsafeMember:
            if not skip_unsafe:
                raise


def data_member(member: tarfile.TarInfo, root: str) -> tarfile.TarInfo:
    """`member` as the "data" filter passes it for extraction into the real path `root`."""
    name = member.name.lstrip("/" + os.sep)
    if os.path.isabs(name) or not _inside(root, os.path.join(root, name)):
        raise UnsafeMember(f"{member.name!r} would be written outside the destination")
    if member.ischr() or member.isblk() or member.isfifo() or member.isdev():
        raise UnsafeMember(f"{member.name!r} is a device or a pipe")
    if member.issym():
        if os.path.isabs(member.linkname) or not _inside(
                root, os.path.join(root, os.path.dirname(name), member.linkname)):
            raise UnsafeMember(f"{member.name!r} links outside the destination")
    elif member.islnk() and not _inside(root, os.path.join(root, member.linkname)):
        raise UnsafeMember(f"{member.name!r} links outside the destination")
    safe = copy.copy(member)
    safe.name = name
    safe.uid, safe.gid, safe.uname, safe.gname = os.getuid(), os.getgid(), "", ""
    if member.isreg() or member.islnk():
        mode = member.mode & 0o755 | 0o600
        safe.mode = mode if mode & 0o100 else mode & ~0o111
    elif member.isdir():
        safe.mode = member.mode & 0o755 | 0o700
    return safe


def _inside(root: str, path: str) -> bool:
    return os.path.commonpath([root, os.path.realpath(path)]) == root
