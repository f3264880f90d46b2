"""ooda's sandbox start-up hook, shipped into every sandbox (agent/sandbox/fidelity.py): renames
between the workspace and /tmp behave as in a normal checkout.

In a sandbox the workspace (/work) and the private /tmp are two mounts, so the kernel refuses
a rename from one to the other (EXDEV, "Invalid cross-device link") where a checkout whose
/tmp shares its filesystem renames: `Path.rename` of a repository file into `tmp_path` fails
only under ooda. `os.rename` and `os.replace` here complete such a rename as the kernel does
on one filesystem, by copying (metadata and links kept) and removing the source; every other
error, and every call with directory descriptors, is the kernel's. Then this module imports the
next sitecustomize (the distribution's), as site.py would have, with its own directory off
sys.path meanwhile (put back after: PYTHONPATH names it). Standard library only, any Python 3.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # no typing import at run time: every Python process pays for this module
    from collections.abc import Callable
    from typing import Any

_kernel_rename = os.rename
_kernel_replace = os.replace


def _copy_then_remove(src: Any, dst: Any) -> None:
    import shutil  # only when a rename crossed the mounts

    src, dst = os.fspath(src), os.fspath(dst)
    info = os.lstat(src)
    if stat.S_ISDIR(info.st_mode):
        if os.path.lexists(dst):
            if not stat.S_ISDIR(os.lstat(dst).st_mode):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), dst)
            os.rmdir(dst)  # rename(2) replaces only an empty directory (ENOTEMPTY otherwise)
        shutil.copytree(src, dst, symlinks=True)
        try:
            shutil.rmtree(src)
        except OSError:
            shutil.rmtree(dst, ignore_errors=True)  # as the kernel would: all or nothing
            raise
        return
    if os.path.isdir(dst) and not os.path.islink(dst):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), dst)
    parent = os.path.dirname(os.path.abspath(dst))
    staged = os.path.join(parent, f".ooda-rename-{os.getpid()}-{os.path.basename(dst)}")
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(src), staged)
    else:
        shutil.copy2(src, staged)
    try:
        os.unlink(src)  # first: a source that cannot go leaves the destination as it was
    except OSError:
        os.unlink(staged)
        raise
    _kernel_replace(staged, dst)  # same mount now: atomic, as the rename would have been


class _AcrossMounts:
    """os.rename / os.replace completing a rename across the two mounts. A callable object,
    not a function: like the builtin it stands for, it is no descriptor, so a class that keeps
    it as an attribute and calls it through an instance (pathlib's `_NormalAccessor.rename =
    os.rename` on Python 3.8-3.10: `self._accessor.rename(self, target)`) passes no `self`."""

    def __init__(self, kernel_call: Callable[..., None]) -> None:
        self._kernel_call = kernel_call
        self.__name__ = self.__qualname__ = kernel_call.__name__
        self.__doc__ = kernel_call.__doc__
        self.__module__ = "os"

    def __call__(self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
                 dst_dir_fd: int | None = None) -> None:
        try:
            self._kernel_call(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV or src_dir_fd is not None or dst_dir_fd is not None:
                raise
        _copy_then_remove(src, dst)

    def __reduce__(self) -> str:
        return self.__name__  # pickled by name, as the builtin is: os.rename

    def __repr__(self) -> str:
        return repr(self._kernel_call)


os.rename = _AcrossMounts(_kernel_rename)
os.replace = _AcrossMounts(_kernel_replace)

_here = os.path.dirname(os.path.abspath(__file__))
_own = [(i, p) for i, p in enumerate(sys.path) if os.path.abspath(p or ".") == _here]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules["sitecustomize"]
try:
    import sitecustomize  # type: ignore[import-not-found]  # noqa: F401  the next one, if any
except ImportError:  # none (a Python without a distribution's sitecustomize): an empty module
    # in its place, which the import machinery takes back on return (else "Error in
    # sitecustomize ... KeyError" at every interpreter start)
    sys.modules["sitecustomize"] = type(sys)("sitecustomize")
# back where PYTHONPATH put it: on a normal machine every PYTHONPATH entry is on sys.path, and
# code that reasons from one to the other breaks otherwise (pylint's modify_sys_path drops
# sys.path[1] for a PYTHONPATH ending in ':', which was then the cwd's entry: pylint-7080)
for _index, _entry in _own:
    sys.path.insert(_index, _entry)
