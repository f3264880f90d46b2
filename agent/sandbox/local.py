"""The `local` backend: no isolation at all, used only when the user names it.

Commands see the host as it is (its Python, /tmp, locale and time zone), with HOME a private
directory of the sandbox's own, outside the workspace: what tests write to ~ neither lands in
the user's home nor among the candidate's changes."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ooda.agent.contracts.protocols import ExecResult, Sandbox
from ooda.agent.sandbox.process import run_process

BASE_ENV_KEYS = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")


class LocalSandbox:
    """Runs commands directly on the host, in the workspace copy, with the host's Python."""

    backend = "local"

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.workdir = str(workspace)
        self.home = Path(tempfile.mkdtemp(prefix="ooda-home-"))

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        base = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
        base["HOME"] = str(self.home)
        base["PYTHONDONTWRITEBYTECODE"] = "1"
        argv = [sys.executable if a == "python3" else a for a in argv]
        return run_process(
            argv, cwd=self.workspace, env={**base, **(env or {})}, timeout_s=timeout_s
        )

    def close(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)


class LocalBackend:
    """No isolation: commands run on the host with the host's Python. Only when named."""

    name = "local"
    reusable = False

    def open(self, workspace: Path, *, requirements: Path | None = None) -> Sandbox:
        return LocalSandbox(workspace)

    def adopt(self, launched: object, *, requirements: Path | None = None) -> Sandbox | None:
        return None  # nothing is started ahead of need for it

    def close(self) -> None:
        pass
