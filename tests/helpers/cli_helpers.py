"""The real `ooda` command line for tests that end before a sandbox would start: run from the
checkout, without the warm daemon, with none of the caller's OODA_/OPENAI_ settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEDIAN = ROOT / "tasks" / "examples" / "median"


def ooda(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OODA_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=cwd,
                          env={**base, "OODA_DAEMON": "0", **(env or {})},
                          capture_output=True, text=True, timeout=60)
