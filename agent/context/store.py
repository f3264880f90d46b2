"""Where indexes are cached: `$OODA_HOME/context/` (default ~/.cache/ooda/context/).

Two levels, so that a repository seen at one commit is quick to index at the next: each
file's units and terms by the hash of its path and content (one SQLite table), and each
whole index by the fingerprint of all its files (one pickle a state, the newest MAX_INDEXES
kept). Both are ooda's own pickles in the user's own cache directory; a cache that cannot be
read or written is rebuilt or skipped, never an error.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ooda.agent.support.home import ooda_home

MAX_INDEXES = 64
"""Whole indexes kept (the least recently used are removed beyond this)."""
_BATCH = 500


def cache_dir() -> Path:
    return ooda_home() / "context"


@contextlib.contextmanager
def _db() -> Iterator[sqlite3.Connection | None]:
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(folder / "files.sqlite", timeout=30)
    except (OSError, sqlite3.Error):
        yield None
        return
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS files (key TEXT PRIMARY KEY, data BLOB)")
        yield conn
        conn.commit()
    except sqlite3.Error:
        yield None
    finally:
        conn.close()


def load_files(keys: list[str]) -> dict[str, Any]:
    """The cached entries among `keys` (missing ones are absent)."""
    found: dict[str, Any] = {}
    with _db() as conn:
        if conn is None:
            return found
        for k in range(0, len(keys), _BATCH):
            batch = keys[k : k + _BATCH]
            marks = ",".join("?" * len(batch))
            for key, data in conn.execute(
                    f"SELECT key, data FROM files WHERE key IN ({marks})", batch):
                with contextlib.suppress(Exception):
                    found[key] = pickle.loads(data)
    return found


def save_files(entries: dict[str, Any]) -> None:
    with _db() as conn:
        if conn is None:
            return
        conn.executemany(
            "INSERT OR REPLACE INTO files (key, data) VALUES (?, ?)",
            [(key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
             for key, value in entries.items()],
        )


def _index_path(fingerprint: str) -> Path:
    return cache_dir() / f"index-{fingerprint}.pickle"


def load_index(fingerprint: str) -> object | None:
    """The cached index of this fingerprint, or None."""
    path = _index_path(fingerprint)
    try:
        with path.open("rb") as handle:
            found = pickle.load(handle)
        os.utime(path)  # recently used: kept longest
        return found  # type: ignore[no-any-return]
    except Exception:
        return None


def save_index(fingerprint: str, index: object) -> None:
    """Write the index atomically, then drop the least recently used beyond MAX_INDEXES."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".index-", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(index, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, _index_path(fingerprint))
        kept = sorted(folder.glob("index-*.pickle"), key=lambda p: p.stat().st_mtime)
        for old in kept[:-MAX_INDEXES]:
            old.unlink(missing_ok=True)
    except OSError:
        return
