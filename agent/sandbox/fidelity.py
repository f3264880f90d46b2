"""What makes a sandbox look like a normal checkout to the tests it runs, for both backends.

A verdict must equal what the repository's own pytest says on a normal machine, so what the
tests can observe of the machine is set here once: the environment (a HOME of its own,
writable and outside the workspace and /tmp; a UTF-8 locale; umask 022, set by the backends),
and the start-up hook every Python process in the sandbox runs (site/sitecustomize.py: a rename
between the workspace and /tmp, two mounts here, completes as on one filesystem). What still
differs from a normal machine, and why, is in docs/SECURITY.md ("What a test sees").
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ooda.agent.sandbox import image

HOME = "/home/ooda"
"""The sandbox user's home: a private tmpfs, emptied between candidates like /tmp."""
SITE_MOUNT = "/run/ooda-site"
"""Where the start-up hook's directory is seen inside the sandbox (read-only)."""
SITE_SOURCE = Path(__file__).with_name("site") / "sitecustomize.py"
UMASK = 0o022


def python_path(extra: str = "") -> str:
    """PYTHONPATH inside the sandbox: the hook's directory first (it takes itself off sys.path
    once it ran), then `extra` (a requirements site, a task environment's own setting)."""
    return ":".join(p for p in (SITE_MOUNT, extra) if p)


def base_env(extra: dict[str, str] | None = None, *, requirements: bool = False) -> dict[str, str]:
    """The allow-listed environment of a sandbox: `extra` (a task environment's settings) on
    top of ooda's, its PYTHONPATH kept after the hook's and the requirements site."""
    extra = dict(extra or {})
    wanted = ":".join(p for p in (image.REQS_MOUNT if requirements else "",
                                  extra.pop("PYTHONPATH", "")) if p)
    return {
        "PATH": image.SANDBOX_PATH,
        "HOME": HOME,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        **extra,
        "PYTHONPATH": python_path(wanted),
    }


def site_dir() -> Path:
    """The host directory holding the start-up hook (world-readable: the sandbox's user reads
    it), named by its content and written once under $OODA_HOME; the backends bind it
    read-only at SITE_MOUNT."""
    source = SITE_SOURCE.read_bytes()
    directory = image.ooda_home() / f"site-{hashlib.sha256(source).hexdigest()[:12]}"
    target = directory / SITE_SOURCE.name
    if target.is_file() and target.read_bytes() == source:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    staged = directory / f".{SITE_SOURCE.name}.{os.getpid()}"
    staged.write_bytes(source)
    staged.chmod(0o644)
    staged.replace(target)
    return directory
