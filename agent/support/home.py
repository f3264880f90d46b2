"""`ooda_home()`: where ooda keeps what outlives a run (the sandbox's wheelhouse and root
filesystems, environment caches, context indexes): `$OODA_HOME`, else ~/.cache/ooda."""

from __future__ import annotations

import os
from pathlib import Path


def ooda_home() -> Path:
    """$OODA_HOME, else ~/.cache/ooda."""
    env = os.environ.get("OODA_HOME")
    return Path(env) if env else Path.home() / ".cache" / "ooda"
