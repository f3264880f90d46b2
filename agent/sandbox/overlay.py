"""Copy-on-write workspaces: one read-only view of the repository, shared by a pool's sandboxes.

Copying a repository of 20,000 files into each sandbox costs seconds to a minute on a slow
disk, and the first model request waits for the first copy (the unpatched code is run in it).
Where the host allows it (root, Linux overlayfs, idmapped mounts), a `SharedBase` instead mounts
the repository once, read-only (an idmapped bind mount, so its files belong to the sandbox user
in that view without a chown), under a mask layer of whiteouts hiding what a copy leaves out
(.git, caches, special files); each sandbox's workspace is an overlay of that view with an
upper directory of its own. A sandbox starts without copying a file; what a candidate writes
lands in its own upper directory only, so no candidate can change the base another one sees,
and the user's repository is never written (the lower mount is read-only).

Between two candidates, `restore()` brings a workspace back to the base from its upper
directory alone, which holds every difference the overlay shows (overlayfs copies an entry up
before any change to it): each entry there is put back from the repository or removed, through
the overlay, while no process runs in the sandbox. The work is that of the files changed, not
of the repository.

Anything missing (not root, no overlayfs, a file system refusing idmapped mounts, a small
repository where copying is cheaper) leaves `shared_base` returning None: the pool copies.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ooda.agent.sandbox.docker.image import owner_alive, owner_labels
from ooda.agent.support import fstree
from ooda.agent.support.env_numbers import positive_from_env

MIN_ENTRIES = 1000
"""A tree with fewer entries is copied (OODA_OVERLAY_MIN_FILES): cheap, and a container started
ahead of need can then be adopted (its workspace was bound before the repository was known)."""
OFF_VAR = "OODA_OVERLAY"
"""`OODA_OVERLAY=0` turns shared workspaces off (every workspace a copy, as before)."""

_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_OPEN_TREE_CLONE = 1
_MOVE_MOUNT_F_EMPTY_PATH = 4
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_NOSUID = 0x2
_MOUNT_ATTR_NODEV = 0x4
_MOUNT_ATTR_IDMAP = 0x100000
_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_SYS = {"open_tree": 428, "move_mount": 429, "mount_setattr": 442}
"""System call numbers: the same on every architecture for calls this recent."""
_OPAQUE = "trusted.overlay.opaque"
_REDIRECT = "trusted.overlay.redirect"
"""A directory renamed in the workspace (redirect_dir=on: rename(2) of a directory works as on
one file system) shows another base directory's entries: restored whole, as an opaque one."""
_UNSAFE = frozenset(",:\\\n")
OWNER_FILE = "owner.json"
"""Which process mounted a base (docker/image.py's owner labels): `unmount_leftovers` unmounts
what a process killed outright left mounted."""
"""Characters overlayfs's option parser would read as separators."""


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


_libc: ctypes.CDLL | None = None
_live: set[SharedBase] = set()
"""Bases of this process not closed yet: unmounted at exit (a run stopped by Ctrl-C)."""
_live_lock = threading.Lock()


@atexit.register
def _unmount_at_exit() -> None:
    with _live_lock:
        bases = list(_live)
    for base in bases:
        with base._lock:
            workspaces = list(base._mounted)
        for workspace in workspaces:
            base.unmount(Path(workspace))
        base.close()


def _call(name: str, *args: object) -> int:
    """A libc function or a raw system call by name; OSError on failure."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if name in _SYS:
        result = int(_libc.syscall(_SYS[name], *args))
    else:
        result = int(getattr(_libc, name)(*args))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{name}: {os.strerror(error)}")
    return result


def shared_base(tree: Path, root: Path, owner: tuple[int, int] | None,
                skip: Callable[[str], bool]) -> SharedBase | None:
    """The repository `tree` shared read-only by the workspaces of a pool under `root`, as the
    sandbox user `owner` sees it; None where workspaces should be copies (see the module)."""
    if (owner is None or sys.platform != "linux" or os.geteuid() != 0
            or os.environ.get(OFF_VAR, "").strip() == "0"):
        return None
    least = positive_from_env("OODA_OVERLAY_MIN_FILES", MIN_ENTRIES, int, "a whole number of files")
    if any(ch in _UNSAFE for ch in str(root.resolve())):
        return None
    with contextlib.suppress(OSError, fstree.TreeTooDeep):
        return SharedBase.mount_base(tree, root, owner, skip, least)
    return None


class SharedBase:
    """The read-only base (mask layer over an idmapped read-only mount of the repository) and
    the overlays of it mounted on workspaces; thread-safe."""

    def __init__(self, tree: Path, layers: Path, owner: tuple[int, int],
                 skip: Callable[[str], bool], masked: set[str]) -> None:
        self.tree = tree
        self.layers = layers
        self.owner = owner
        self.skip = skip
        self.masked = masked
        """Paths (relative) hidden by a whiteout in the mask: special files."""
        self.lower = layers / "lower"
        self.mask = layers / "mask"
        self._lock = threading.Lock()
        self._mounted: dict[str, tuple[Path, tuple[int, int]]] = {}
        """Workspace path → its layer directory (upper/, work/) and its owner."""
        self._bases: dict[tuple[int, int], tuple[Path, Path]] = {owner: (self.mask, self.lower)}
        """Owner → (mask, lower) seen as that owner's (a bwrap sandbox has a uid of its own)."""
        self._making = threading.Lock()
        self._root_mode = 0o755
        self._closed = False

    @classmethod
    def mount_base(cls, tree: Path, root: Path, owner: tuple[int, int],
                   skip: Callable[[str], bool], least: int) -> SharedBase | None:
        root.mkdir(parents=True, exist_ok=True)
        layers = Path(tempfile.mkdtemp(prefix="layers-", dir=root))
        (layers / OWNER_FILE).write_text(json.dumps(owner_labels()))
        base = cls(tree, layers, owner, skip, set())
        with _live_lock:
            _live.add(base)
        try:
            if base._build_mask() < least:
                base.close()
                return None
            base.lower.mkdir()
            _bind_read_only(tree, base.lower, owner)
            probe = layers / "probe"  # an overlay of it mounts here (upper's file system too)
            probe.mkdir()
            base.mount(probe)
            base.unmount(probe)
            probe.rmdir()
        except BaseException:
            base.close()
            raise
        base._root_mode = stat.S_IMODE(os.stat(tree).st_mode) | 0o700
        return base

    # ------------------------------------------------------------------ the base

    def _build_mask(self) -> int:
        """Whiteouts for what a copy leaves out; the directories holding them look as the
        repository's do (the topmost layer's directory gives the merged one its owner and
        mode). Returns how many entries the tree has."""
        self.mask.mkdir()
        count = 0
        made: set[str] = set()
        with contextlib.closing(fstree.kinds(self.tree, self.skip)) as entries:
            for rel, kind in entries:
                count += 1
                if kind in ("dir", "file", "link"):
                    continue
                if kind is not None:
                    self.masked.add(rel)
                self._mask_dirs(os.path.dirname(rel), made)
                os.mknod(self.mask / rel, stat.S_IFCHR | 0o600, os.makedev(0, 0))
        return count

    def _mask_dirs(self, rel: str, made: set[str]) -> None:
        """The mask's directories down to `rel`, with the repository's modes, owned as seen."""
        parts = rel.split("/") if rel else []
        for depth in range(1, len(parts) + 1):
            sub = "/".join(parts[:depth])
            if sub in made:
                continue
            info = os.lstat(self.tree / sub)
            path = self.mask / sub
            path.mkdir()
            os.chmod(path, stat.S_IMODE(info.st_mode))
            os.lchown(path, *self.owner)
            os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
            made.add(sub)

    def close(self) -> None:
        """Unmount the base (lazily: overlays still mounted keep it) and remove the layers
        (an overlay still mounted removes its own when it is unmounted)."""
        with self._making:
            bases = list(self._bases.values())
        for _mask, lower in bases:
            with contextlib.suppress(OSError):
                _call("umount2", str(lower).encode(), _MNT_DETACH)
        with _live_lock:
            _live.discard(self)
        with self._lock:
            self._closed = True
            left = bool(self._mounted)
        for mask, lower in bases:
            fstree.remove_workspace(mask)
            with contextlib.suppress(OSError):
                lower.rmdir()
        if not left:
            fstree.remove_workspace(self.layers)

    # ------------------------------------------------------------------ workspaces

    def _base_for(self, owner: tuple[int, int]) -> tuple[Path, Path]:
        """The mask and the read-only mount of the repository as `owner` sees them (made on
        first use for an owner other than the pool's: the mask's folders owned alike)."""
        with self._making:
            found = self._bases.get(owner)
            if found is not None:
                return found
            tag = f"{owner[0]}-{owner[1]}"
            mask, lower = self.layers / f"mask-{tag}", self.layers / f"lower-{tag}"
            for folder, _dirs, names in os.walk(self.mask):
                rel = os.path.relpath(folder, self.mask)
                made = mask / rel if rel != "." else mask
                info = os.lstat(folder)
                made.mkdir()
                os.chmod(made, stat.S_IMODE(info.st_mode))
                os.lchown(made, *owner)
                os.utime(made, ns=(info.st_atime_ns, info.st_mtime_ns))
                for name in names:
                    if stat.S_ISCHR(os.lstat(os.path.join(folder, name)).st_mode):
                        os.mknod(made / name, stat.S_IFCHR | 0o600, os.makedev(0, 0))
            lower.mkdir()
            try:
                _bind_read_only(self.tree, lower, owner)
            except BaseException:
                fstree.remove_workspace(mask)
                lower.rmdir()
                raise
            self._bases[owner] = (mask, lower)
            return mask, lower

    def mount(self, workspace: Path, owner: tuple[int, int] | None = None) -> None:
        """Mount an overlay of the base on the empty directory `workspace`, its files seen as
        `owner`'s (default: the pool's sandbox user)."""
        owner = owner or self.owner
        mask, lower = self._base_for(owner)
        layer = Path(tempfile.mkdtemp(prefix="ws-", dir=self.layers))
        upper, work = layer / "upper", layer / "work"
        upper.mkdir(mode=0o700)
        work.mkdir(mode=0o700)
        os.chown(upper, *owner)
        os.chmod(upper, self._root_mode)
        options = (f"lowerdir={mask}:{lower},upperdir={upper},workdir={work},"
                   "redirect_dir=on,index=off,metacopy=off,xino=off")
        try:
            _call("mount", b"overlay", str(workspace).encode(), b"overlay",
                  _MS_NOSUID | _MS_NODEV, options.encode())
        except OSError:
            fstree.remove_workspace(layer)
            raise
        with self._lock:
            self._mounted[str(workspace)] = (layer, owner)

    def holds(self, workspace: Path) -> bool:
        """Whether `workspace` is one of this base's overlays."""
        with self._lock:
            return str(workspace) in self._mounted

    def unmount(self, workspace: Path) -> None:
        """Unmount the overlay on `workspace` (lazily) and remove its upper directory."""
        with self._lock:
            found = self._mounted.pop(str(workspace), None)
        if found is None:
            return
        layer = found[0]
        for attempt in range(3):
            try:
                _call("umount2", str(workspace).encode(), _MNT_DETACH)
                break
            except OSError:
                time.sleep(0.05 * (attempt + 1))
        fstree.remove_workspace(layer)
        with self._lock:
            last = self._closed and not self._mounted
        if last:
            fstree.remove_workspace(self.layers)

    def own(self, workspace: Path) -> None:
        """Give what this process wrote in the workspace (a patch, a cache) to the sandbox user:
        the entries of its upper directory only."""
        upper, owner = self._upper(workspace), self._owner(workspace)
        for rel, info in _upper_entries(upper, lambda _rel, _info: True):
            if (info.st_uid, info.st_gid) != owner:
                with contextlib.suppress(FileNotFoundError):
                    os.lchown(workspace / rel, *owner)

    def restore(self, workspace: Path) -> None:
        """Bring the workspace back to the base (no process may run in its sandbox): every
        entry of its upper directory put back from the repository or removed, through the
        overlay; then given to the sandbox user."""
        upper = self._upper(workspace)
        os.chmod(workspace, self._root_mode)
        _upper_entries(upper, functools.partial(self._put_back, workspace))
        self.own(workspace)

    def _upper(self, workspace: Path) -> Path:
        with self._lock:
            found = self._mounted.get(str(workspace))
        if found is None:
            raise ValueError(f"{workspace} is not a shared workspace")
        return found[0] / "upper"

    def _owner(self, workspace: Path) -> tuple[int, int]:
        with self._lock:
            found = self._mounted.get(str(workspace))
        return self.owner if found is None else found[1]

    def _in_base(self, rel: str) -> os.stat_result | None:
        """The repository's entry at `rel` as the base shows it (None: not there or masked)."""
        if rel in self.masked or any(self.skip(part) for part in rel.split("/")):
            return None
        try:
            return os.lstat(self.tree / rel)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _put_back(self, workspace: Path, rel: str, info: os.stat_result) -> bool:
        """Make the workspace's `rel` the base's again (`info`: its upper entry). True when
        the entries below it still need looking at (a directory both have, kept)."""
        base = self._in_base(rel)
        target = workspace / rel
        if (base is not None and stat.S_ISDIR(info.st_mode) and stat.S_ISDIR(base.st_mode)
                and not _replaced(self._upper(workspace) / rel)):
            os.chmod(target, stat.S_IMODE(base.st_mode))
            return True
        if not stat.S_ISCHR(info.st_mode):  # not a whiteout: the candidate's entry goes
            if stat.S_ISDIR(info.st_mode):
                fstree.remove_tree(target)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
        if base is not None:
            self._copy_in(rel, base, target)
        return False

    def _copy_in(self, rel: str, base: os.stat_result, target: Path) -> None:
        """The repository's `rel` (a file, link or directory tree) into the workspace."""
        if stat.S_ISDIR(base.st_mode):
            fstree.copy_tree(self.tree, target, rel=rel, keep_links=True, ignore=self.skip)
        elif stat.S_ISLNK(base.st_mode):
            os.symlink(os.readlink(self.tree / rel), target)
        elif stat.S_ISREG(base.st_mode):
            parent = fstree.open_dir(self.tree, os.path.dirname(rel))
            try:
                fstree.copy_file(parent, os.path.basename(rel), str(target), None)
            finally:
                os.close(parent)


def _upper_entries(upper: Path, descend: Callable[[str, os.stat_result], bool]
                   ) -> list[tuple[str, os.stat_result]]:
    """Every entry below `upper` (relative path, lstat), parents first; `descend(rel, info)` is
    asked of each (directories are entered only when it says True). Never follows a link."""
    seen: list[tuple[str, os.stat_result]] = []
    stack = [""]
    while stack:
        prefix = stack.pop()
        try:
            names = sorted(os.listdir(upper / prefix) if prefix else os.listdir(upper))
        except FileNotFoundError:
            continue
        for name in names:
            rel = prefix + name
            try:
                info = os.lstat(upper / rel)
            except FileNotFoundError:
                continue
            seen.append((rel, info))
            if descend(rel, info) and stat.S_ISDIR(info.st_mode):
                stack.append(rel + "/")
    return seen


def _replaced(path: Path) -> bool:
    """Whether an upper directory hides its base directory's entries (made anew: opaque) or
    shows another's (renamed: redirected)."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return False
    if _REDIRECT in names:
        return True
    return _OPAQUE in names and os.getxattr(path, _OPAQUE, follow_symlinks=False) == b"y"


def _bind_read_only(tree: Path, at: Path, owner: tuple[int, int]) -> None:
    """Mount `tree` read-only at `at`, its owner's files seen as `owner`'s (idmapped)."""
    info = os.stat(tree)
    attr = _MountAttr(_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV, 0, 0, 0)
    userns = -1
    if (info.st_uid, info.st_gid) != owner:
        userns = _user_namespace((info.st_uid, info.st_gid), owner)
        attr.attr_set |= _MOUNT_ATTR_IDMAP
        attr.userns_fd = userns
    try:
        clone = _call("open_tree", _AT_FDCWD, str(tree).encode(), _OPEN_TREE_CLONE | os.O_CLOEXEC)
        try:
            _call("mount_setattr", clone, b"", _AT_EMPTY_PATH, ctypes.byref(attr),
                  ctypes.sizeof(attr))
            _call("move_mount", clone, b"", _AT_FDCWD, str(at).encode(),
                  _MOVE_MOUNT_F_EMPTY_PATH)
        finally:
            os.close(clone)
    finally:
        if userns >= 0:
            os.close(userns)


def _user_namespace(seen: tuple[int, int], shown: tuple[int, int]) -> int:
    """A descriptor of a user namespace mapping uid/gid `seen` (on disk) to `shown`."""
    child = subprocess.Popen(["unshare", "--user", "sleep", "60"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ours = os.readlink("/proc/self/ns/user")
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{child.pid}/ns/user") == ours:
            if child.poll() is not None or time.monotonic() > deadline:
                raise OSError("unshare --user did not start")
            time.sleep(0.002)
        Path(f"/proc/{child.pid}/uid_map").write_text(f"{seen[0]} {shown[0]} 1\n")
        Path(f"/proc/{child.pid}/gid_map").write_text(f"{seen[1]} {shown[1]} 1\n")
        return os.open(f"/proc/{child.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        child.kill()
        child.wait()


def unmount_leftovers() -> int:
    """Unmount the workspaces and bases that ooda processes no longer running left mounted
    (killed before they could), and remove their layers; returns how many mounts."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return 0
    try:
        table = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return 0
    found: list[tuple[str, Path]] = []
    for line in table.splitlines():
        fields = line.split(" ")
        if "-" not in fields:
            continue
        point = _unescape(fields[4])
        tail = fields[fields.index("-") + 1:]
        upper = re.search(r"(?:^|,)upperdir=([^,]*)", tail[2] if len(tail) > 2 else "")
        if tail and tail[0] == "overlay" and upper and "/layers-" in upper.group(1):
            found.append((point, Path(_unescape(upper.group(1))).parents[1]))
        elif os.path.basename(point).startswith("lower") and "/layers-" in point:
            found.append((point, Path(point).parent))
    undone = 0
    dead: set[Path] = set()
    for point, layers in sorted(found,
                                key=lambda item: os.path.basename(item[0]).startswith("lower")):
        try:
            labels = json.loads((layers / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not one of ours, or not written yet
        if owner_alive(labels):
            continue
        with contextlib.suppress(OSError):
            _call("umount2", point.encode(), _MNT_DETACH)
            undone += 1
            dead.add(layers)
    for layers in dead:
        fstree.remove_workspace(layers)
    return undone


def _unescape(field: str) -> str:
    """A /proc/self/mountinfo path (spaces and the like written as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
