"""Reuse mypy's incremental cache: candidates start from the base's cache, the base from a seed.

Mypy checks a candidate's changed files in a second or so cold (it analyses the standard
library's stubs first) and in tens of milliseconds with a warm cache. The verifiers keep the
cache inside the workspace (verifiers.mypy_check.CACHE_DIR, under `.ooda/`, which no patch may
touch). So the host can hand every candidate a private copy of the base's cache, taken after
the base was checked (mypy revalidates each entry against the sources and options, so a copy is
never wrong, only more or less warm), and a new task's base starts from a per-machine seed:
the first base cache this machine built with this toolchain, backend and mypy configuration.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from agent.sandbox import image
from verifiers.mypy_check import CACHE_DIR, MYPY_ARGV


def cache_dir(workspace: Path) -> Path:
    """Where mypy keeps its cache when it runs in `workspace`."""
    return workspace / CACHE_DIR


CONFIG_FILES = ("mypy.ini", ".mypy.ini", "setup.cfg", "pyproject.toml")


def config_key(repo: Path) -> str:
    """A short hash of what decides mypy's options besides the toolchain: the verifiers' argv
    and the repo's mypy configuration (a seed built under other options is no use)."""
    digest = hashlib.sha256(repr(MYPY_ARGV).encode())
    for name in CONFIG_FILES:
        try:
            text = (repo / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if name in ("setup.cfg", "pyproject.toml"):  # only their mypy sections matter
            text = "\n".join(_mypy_sections(text))
        digest.update(f"{name}\0{text}\0".encode())
    return digest.hexdigest()[:12]


def _mypy_sections(text: str) -> list[str]:
    """The [mypy...] / [tool.mypy...] sections of an ini or toml file, as text."""
    kept: list[str] = []
    keep = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            header = stripped.strip("[]").strip()
            keep = header.startswith(("mypy", "tool.mypy"))
        if keep:
            kept.append(line)
    return kept


def seed_path(backend: str, repo: Path) -> Path:
    """The per-machine seed for `backend`, the current toolchain and `repo`'s mypy options."""
    name = f"{backend}-{image.recipe_hash()}-{config_key(repo)}"
    return image.ooda_home() / "mypy-seed" / name


def copy_cache(source: Path, workspace: Path) -> bool:
    """Copy a cache directory into `workspace`'s cache location; False when there is none."""
    if not source.is_dir():
        return False
    target = cache_dir(workspace)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, symlinks=False, dirs_exist_ok=True)
    return True


def prepare(workspace: Path) -> Path:
    """Create the (empty) cache location, so that it is lent to the sandbox user with the rest."""
    target = cache_dir(workspace)
    target.mkdir(parents=True, exist_ok=True)
    return target


def save_seed(workspace: Path, backend: str, repo: Path) -> None:
    """Keep `workspace`'s cache as the machine's seed unless one exists (atomic, race-safe)."""
    seed = seed_path(backend, repo)
    source = cache_dir(workspace)
    if seed.exists() or not source.is_dir() or not any(source.iterdir()):
        return
    seed.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=seed.name + ".tmp-", dir=seed.parent))
    try:
        shutil.copytree(source, tmp, symlinks=False, dirs_exist_ok=True)
        for path in [tmp, *tmp.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.rename(tmp, seed)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process won the race, or no room
