"""Reuse mypy's incremental cache: candidates start from the base's cache, the base from a seed.

Mypy checks a candidate's changed files in a second or so cold (it analyses the standard
library's stubs first) and in tens of milliseconds with a warm cache. The verifiers keep the
cache inside the workspace (verifiers.mypy_check.CACHE_DIR, under `.ooda/`, which no patch may
touch). So the host can hand every candidate a private copy of the base's cache, taken after
the base was checked (mypy revalidates each entry against the sources and options, so a copy is
never wrong, only more or less warm), and a new task's base starts from a per-machine seed:
the first base cache this machine built with this toolchain and backend.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from agent.sandbox import image
from verifiers.mypy_check import CACHE_DIR


def cache_dir(workspace: Path) -> Path:
    """Where mypy keeps its cache when it runs in `workspace`."""
    return workspace / CACHE_DIR


def seed_path(backend: str) -> Path:
    """The per-machine seed for `backend` and the current toolchain."""
    return image.ooda_home() / "mypy-seed" / f"{backend}-{image.recipe_hash()}"


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


def save_seed(workspace: Path, backend: str) -> None:
    """Keep `workspace`'s cache as the machine's seed unless one exists (atomic, race-safe)."""
    seed = seed_path(backend)
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
