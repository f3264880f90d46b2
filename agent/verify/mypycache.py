"""Reuse mypy's incremental cache: candidates start from the base's cache, the base from a seed.

Mypy checks a candidate's changed files in a second or so cold (it analyses the standard
library's stubs first) and in tens of milliseconds with a warm cache. The verifiers keep the
cache inside the workspace (ooda.verifiers.mypy_check.CACHE_DIR, under `.ooda/`, which no patch may
touch). So the host can hand every candidate a private copy of the base's cache, taken after
the base was checked (mypy revalidates each entry against the sources and options, so a copy is
never wrong, only more or less warm), and a new task's base starts from a per-machine seed:
the first base cache this machine built with this toolchain, backend and mypy configuration.

Only runs of the unpatched code, in a workspace no candidate ever touched, feed the base cache
and the seed (a candidate's cache, even one whose mypy run failed, is never kept), and a cache
leaves a workspace only as directories and regular files: a link planted there is never
followed on the host (agent/support/fstree.py).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ooda.agent.sandbox import image
from ooda.agent.support import fstree
from ooda.verifiers.mypy_check import CACHE_DIR, MYPY_ARGV


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
    """Copy a host-held cache (the base's, a seed) into `workspace`'s cache location; False
    when there is none."""
    if not source.is_dir() or source.is_symlink():
        return False
    target = cache_dir(workspace)
    target.parent.mkdir(parents=True, exist_ok=True)
    fstree.copy_tree(source, target, file_mode=0o644, dir_mode=0o755)
    return True


def take_cache(workspace: Path, kept: Path) -> bool:
    """Copy `workspace`'s cache out to the host directory `kept` (created); False when there is
    none or it cannot be copied. Call it only on a workspace where no candidate code ever ran
    (the base's own runs): only directories and regular files come out (links, FIFOs and devices
    are left behind, never followed or read), with plain modes."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    try:
        fstree.copy_tree(workspace, kept, rel=CACHE_DIR, file_mode=0o644, dir_mode=0o755)
    except OSError:
        fstree.remove_tree(kept)
        return False
    return True


def prepare(workspace: Path) -> Path:
    """Create the (empty) cache location, so that it is lent to the sandbox user with the rest."""
    target = cache_dir(workspace)
    target.mkdir(parents=True, exist_ok=True)
    return target


def save_seed(kept: Path, backend: str, repo: Path) -> None:
    """Keep the host-held base cache `kept` as the machine's seed unless one exists (atomic,
    race-safe). `kept` must come from take_cache() on a base-only run."""
    seed = seed_path(backend, repo)
    if seed.exists() or not kept.is_dir() or not any(kept.iterdir()):
        return
    seed.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=seed.name + ".tmp-", dir=seed.parent))
    try:
        fstree.copy_tree(kept, tmp, file_mode=0o644, dir_mode=0o755)
        os.rename(tmp, seed)
    except OSError:
        fstree.remove_tree(tmp)  # another process won the race, or no room
