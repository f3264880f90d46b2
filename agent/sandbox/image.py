"""Build the sandbox root filesystem and Docker image offline, cached under $OODA_HOME.

Recipe: `debootstrap --variant=minbase --include=python3,<STDLIB_DEBS> bookworm` (cached as the
"base": the standard library a normal CPython has, tkinter and ensurepip included, and git), then
the verifier toolchain (pytest, ruff, mypy, pinned to the host's installed versions) installed
from wheels the host downloads into a wheelhouse, a non-root user (uid 1000), precompiled
bytecode. The finished tree `rootfs-<hash>` is bound read-only as `/` by the bwrap backend and
`docker import`ed as `ooda-sandbox:<hash>` for the Docker backend (agent/sandbox/docker/image.py),
so both run one toolchain.
The hash covers everything in the recipe; a changed pin gives a new tag and a new build.
Third-party requirements are installed (wheels only) into `reqs/<sha256>/site`, bound at
/opt/ooda-reqs by bwrap and baked into a derived Docker image (docker/image.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import InfraError
from ooda.agent.support.home import ooda_home as ooda_home

Log = Callable[[str], None]

RECIPE_VERSION = "1"
SUITE = "bookworm"
PYTHON_VERSION = "3.11"
TOOLCHAIN = ("pytest", "ruff", "mypy")
STDLIB_DEBS = ("python3-tk", "python3-venv", "python3-gdbm", "python3-lib2to3", "git")
"""Debian packages that complete the image's Python as a normal machine's (Debian splits
tkinter, ensurepip, dbm.gnu and lib2to3 out of python3; a repository's tests import them or
skip without them) and git, which a checkout's tests call (setuptools-scm, pre-commit)."""
IMAGE_REPO = "ooda-sandbox"
SANDBOX_UID = 1000
SITE_DIR = f"/usr/local/lib/python{PYTHON_VERSION}/dist-packages"
REQS_MOUNT = "/opt/ooda-reqs"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
MARKER = ".ooda-ready"
TRIM = (
    "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*",
    "usr/share/doc/*", "usr/share/man/*", "usr/share/info/*", "usr/share/locale/*",
)
"""Globs (relative to the rootfs) debootstrap leaves behind that no verifier needs."""


def toolchain_pins() -> list[str]:
    """pytest/ruff/mypy pinned to the versions installed on the host, so verdicts agree."""
    import importlib.metadata  # here: ~50 ms that most runs (a cached tag) do not need

    pins = []
    for name in TOOLCHAIN:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(name)
    return pins


def _arch() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _debian_arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(_arch(), _arch())


def recipe_hash() -> str:
    """Short hash of everything that goes into the image; part of the tag and rootfs name.
    Reading the toolchain's versions costs milliseconds (each distribution's metadata parsed)
    and a command asks several times: kept per process, and so in the daemon's workers, while
    every import directory keeps its modification time (installing, upgrading or removing a
    distribution adds or removes its .dist-info there)."""
    return _recipe_hash(_import_dir_stamps())


@functools.lru_cache(maxsize=4)
def _recipe_hash(_stamps: tuple[tuple[str, int], ...]) -> str:
    parts = [RECIPE_VERSION, SUITE, PYTHON_VERSION, _arch(), *STDLIB_DEBS, *toolchain_pins()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _import_dir_stamps() -> tuple[tuple[str, int], ...]:
    """(directory, mtime_ns) of every directory on sys.path (not "", the working directory)."""
    stamps = []
    for entry in filter(None, sys.path):
        with contextlib.suppress(OSError):
            stamps.append((entry, os.stat(entry).st_mtime_ns))
    return tuple(stamps)


def image_tag() -> str:
    return f"{IMAGE_REPO}:{recipe_hash()}"


def rootfs_path() -> Path:
    return ooda_home() / f"rootfs-{recipe_hash()}"


def rootfs_ready() -> bool:
    return (rootfs_path() / MARKER).is_file()


def requirements_sha(requirements: Path) -> str:
    return hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]


def requirements_tag(requirements: Path) -> str:
    return f"{IMAGE_REPO}:{recipe_hash()}-req-{requirements_sha(requirements)}"


def stderr_log(message: str) -> None:
    print(f"ooda sandbox: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """An exclusive advisory lock, so concurrent ooda processes build each thing once."""
    locks = ooda_home() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _run(argv: list[str], what: str, **kwargs: Any) -> None:
    proc = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False, **kwargs
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise InfraError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise InfraError(f"{what} needs root: run scripts/setup.sh or `ooda sandbox build` as root")


def _remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _mirror() -> str:
    """OODA_DEBIAN_MIRROR, else the host's own Debian mirror from apt's sources, else Debian's."""
    env = os.environ.get("OODA_DEBIAN_MIRROR")
    if env:
        return env
    sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    for source in sources:
        try:
            text = source.read_text()
        except OSError:
            continue
        for match in re.finditer(r"(?:URIs:|deb)\s+(?:\[[^\]]*\]\s+)?(\S+/debian)/?\s", text):
            return match.group(1)
    return DEFAULT_MIRROR


def _wheel_platforms() -> list[str]:
    """manylinux tags a bookworm (glibc 2.36) system accepts; pip does not expand them itself."""
    arch = _arch()
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(36, 16, -1)]
    tags.append(f"manylinux2014_{arch}")
    if arch == "x86_64":
        tags += ["manylinux2010_x86_64", "manylinux1_x86_64"]
    return tags


def _target_args() -> list[str]:
    args = ["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp"]
    for tag in _wheel_platforms():
        args += ["--platform", tag]
    return args


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]


def fetch_wheels(specs: list[str], log: Log) -> Path:
    """Make sure the wheelhouse holds wheels for `specs` (and deps) for the sandbox's Python."""
    wheelhouse = ooda_home() / "wheelhouse"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    offline = _pip("download", "--quiet", "--no-index", "--find-links", str(wheelhouse),
                   "--dest", str(wheelhouse), *_target_args(), *specs)
    if subprocess.run(offline, capture_output=True, check=False).returncode == 0:
        return wheelhouse
    log(f"downloading wheels on the host: {' '.join(specs)}")
    _run(_pip("download", "--quiet", "--dest", str(wheelhouse), *_target_args(), *specs),
         "pip download (the sandbox installs wheels only, for Python 3.11 on Linux)")
    return wheelhouse


def install_wheels(specs: list[str], target: Path, log: Log) -> None:
    """pip-install `specs` from the wheelhouse into `target` (the sandbox never sees a network)."""
    wheelhouse = fetch_wheels(specs, log)
    _run(_pip("install", "--quiet", "--no-index", "--find-links", str(wheelhouse), "--target",
              str(target), "--no-compile", "--no-warn-script-location", *_target_args(), *specs),
         "pip install into the sandbox")


# --------------------------------------------------------------------------- rootfs


def _base_path() -> Path:
    extras = hashlib.sha256(",".join(STDLIB_DEBS).encode()).hexdigest()[:8]
    return ooda_home() / f"base-{SUITE}-{_debian_arch()}-{extras}"


def _build_base(log: Log) -> Path:
    """debootstrap minbase + python3 + STDLIB_DEBS, cached: it is the slow step (a few
    minutes)."""
    base = _base_path()
    if (base / MARKER).is_file():
        return base
    if shutil.which("debootstrap") is None:
        raise InfraError("debootstrap is missing: apt-get install debootstrap (scripts/setup.sh)")
    tmp = base.with_name(base.name + f".tmp-{os.getpid()}")
    _remove_tree(tmp)
    mirror = _mirror()
    log(f"debootstrap {SUITE} (minbase + python3 + {' '.join(STDLIB_DEBS)}) from {mirror}; "
        "this takes a few minutes")
    _run(["debootstrap", "--variant=minbase", f"--include={','.join(('python3', *STDLIB_DEBS))}",
          f"--arch={_debian_arch()}", SUITE, str(tmp), mirror], "debootstrap")
    for junk in TRIM:
        for path in tmp.glob(junk):
            _remove_tree(path)
    (tmp / MARKER).write_text(f"{SUITE}\n")
    _remove_tree(base)
    tmp.rename(base)
    return base


def _fix_scripts(bin_dir: Path, dest: Path) -> None:
    """Move console scripts pip wrote under --target into /usr/local/bin, shebangs pointed at
    the sandbox's own python3."""
    dest.mkdir(parents=True, exist_ok=True)
    for script in sorted(bin_dir.iterdir()):
        data = script.read_bytes()
        if data.startswith(b"#!"):
            body = data.split(b"\n", 1)[1] if b"\n" in data else b""
            data = b"#!/usr/bin/python3\n" + body
        target = dest / script.name
        target.write_bytes(data)
        target.chmod(0o755)
    shutil.rmtree(bin_dir)


def _add_user(root: Path) -> None:
    uid = SANDBOX_UID
    with open(root / "etc/passwd", "a") as passwd:
        passwd.write(f"ooda:x:{uid}:{uid}:ooda sandbox:/tmp:/usr/sbin/nologin\n")
    with open(root / "etc/group", "a") as group:
        group.write(f"ooda:x:{uid}:\n")


def build_rootfs(*, force: bool = False, log: Log = stderr_log) -> Path:
    """The finished root filesystem for this recipe, built when missing (or when `force`)."""
    final = rootfs_path()
    with locked("rootfs"):
        if not force and (final / MARKER).is_file():
            return final
        _require_root("building the sandbox root filesystem")
        started = time.monotonic()
        old_umask = os.umask(0o022)
        try:
            if force:
                _remove_tree(_base_path())
            base = _build_base(log)
            tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
            _remove_tree(tmp)
            _run(["cp", "-a", "--reflink=auto", str(base), str(tmp)], "copying the base rootfs")
            (tmp / MARKER).unlink()
            pins = toolchain_pins()
            log(f"installing the verifier toolchain: {' '.join(pins)}")
            site = tmp / SITE_DIR.lstrip("/")
            install_wheels(pins, site, log)
            if (site / "bin").is_dir():
                _fix_scripts(site / "bin", tmp / "usr/local/bin")
            _add_user(tmp)
            for mount_point in ("work", REQS_MOUNT.lstrip("/")):
                (tmp / mount_point).mkdir(parents=True, exist_ok=True)
            log("precompiling bytecode")
            _run(["chroot", str(tmp), "/usr/bin/python3", "-m", "compileall", "-q", SITE_DIR],
                 "compiling the toolchain's bytecode")
            (tmp / MARKER).write_text(image_tag() + "\n" + "\n".join(pins) + "\n")
            old = final.with_name(final.name + f".old-{os.getpid()}")
            if final.exists():
                final.rename(old)
            tmp.rename(final)
            _remove_tree(old)
        finally:
            os.umask(old_umask)
        log(f"root filesystem ready in {time.monotonic() - started:.0f} s: {final}")
        return final


def requirements_site_path(requirements: Path) -> Path:
    """Where requirements_site() keeps the packages of `requirements` (built or not)."""
    return ooda_home() / "reqs" / f"{recipe_hash()}-{requirements_sha(requirements)}"


def requirements_site(requirements: Path, log: Log = stderr_log) -> Path:
    """A directory holding the repo's third-party packages (wheels only), cached by content."""
    site = requirements_site_path(requirements)
    with locked("reqs"):
        if (site / MARKER).is_file():
            return site
        tmp = site.with_name(site.name + f".tmp-{os.getpid()}")
        _remove_tree(tmp)
        log(f"installing the repo's requirements from {requirements}")
        install_wheels(["-r", str(requirements.resolve())], tmp, log)
        _remove_tree(tmp / "bin")
        if sys.version_info[:2] == (3, 11):
            subprocess.run([sys.executable, "-m", "compileall", "-q", "-d", REQS_MOUNT, str(tmp)],
                           capture_output=True, check=False)
        for path in [tmp, *tmp.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else (path.stat().st_mode | 0o444))
        (tmp / MARKER).write_text(requirements.read_text())
        _remove_tree(site)
        tmp.rename(site)
        return site
