"""The `local` backend: no isolation at all, used only when the user names it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ooda.agent.contracts.protocols import ExecResult, Sandbox
from ooda.agent.sandbox.process import run_process

BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT")


class LocalSandbox:
    """Runs commands directly on the host, in the workspace copy, with the host's Python."""

    backend = "local"

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.workdir = str(workspace)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        base = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
        base["HOME"] = str(self.workspace)
        base["PYTHONDONTWRITEBYTECODE"] = "1"
        argv = [sys.executable if a == "python3" else a for a in argv]
        return run_process(
            argv, cwd=self.workspace, env={**base, **(env or {})}, timeout_s=timeout_s
        )

    def close(self) -> None:
        pass


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
