"""The one way ooda runs git: `git -C <repo> ARGS` with bytes in and out, a timeout, and
optionally an environment isolated from the caller's git settings.

Callers (applying patches in agent/verify/workspace.py, reading clones in
tasks/importers/swebench.py, the CI's branch and push in agent/app/ci/github.py) each turn a
failure into their own error (PatchError, UsageError, InfraError): what a failed git call means
depends on what it was for. Standard library only.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

DEFAULT_TIMEOUT_S = 300.0


def git(
    repo: Path | str,
    *args: str,
    stdin: bytes = b"",
    env: Mapping[str, str] | None = None,
    isolated: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git -C repo *args` and return how it ended (stdout and stderr as bytes; a non-zero
    exit status is returned, not raised). `env` is added to this process's environment;
    `isolated` first drops every GIT_* variable, stops git looking for a repository above
    `repo` (GIT_CEILING_DIRECTORIES) and asks for untranslated messages (LC_ALL=C).

    Raises OSError when git cannot be started (FileNotFoundError: not installed) and
    subprocess.TimeoutExpired after `timeout_s`."""
    base = dict(os.environ)
    if isolated:
        base = {k: v for k, v in base.items() if not k.startswith("GIT_")}
        base["GIT_CEILING_DIRECTORIES"] = str(Path(repo).resolve().parent)
        base["LC_ALL"] = "C"
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        env={**base, **(env or {})},
        timeout=timeout_s,
        check=False,
    )


def first_line(data: bytes, default: str = "") -> str:
    """The first non-empty line of git's output (decoded, errors replaced), else `default`."""
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else default
