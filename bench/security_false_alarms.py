"""Count the security stage's findings on benchmark gold patches (none should be charged).

Usage: python bench/security_false_alarms.py TASKS_DIR [TASKS_DIR ...]
Each task's gold patch is applied to a copy of its repo and judged against the unpatched repo,
as a candidate would be (ruff runs on the host here: gold patches are trusted text).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ooda.agent.contracts.protocols import CheckSpec
from ooda.agent.sandbox.local import LocalSandbox
from ooda.tasks.loader import load_taskset
from ooda.verifiers.security_check import SecurityVerifier


def changed_files(patch: str) -> list[str]:
    return [line[6:] for line in patch.splitlines() if line.startswith("+++ b/")]


def main(dirs: list[str]) -> None:
    stage = SecurityVerifier()
    for root in dirs:
        tasks = load_taskset(Path(root))
        alarms: list[str] = []
        judged = 0
        for task in tasks:
            if not task.gold_patch:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                base = Path(shutil.copytree(task.repo, Path(tmp) / "base"))
                cand = Path(shutil.copytree(task.repo, Path(tmp) / "cand"))
                subprocess.run(
                    ["git", "apply", "-"], cwd=cand, input=task.gold_patch, text=True, check=True
                )
                check = CheckSpec(changed_files=changed_files(task.gold_patch), timeout_s=60)
                check.baseline["security"] = stage.baseline(LocalSandbox(base), check)
                result = stage.verify(LocalSandbox(cand), check)
                judged += 1
                if result.status != "passed":
                    alarms.append(f"{task.id}: {result.summary}")
        print(f"{root}: {judged} gold patches judged, {len(alarms)} with security findings")
        for alarm in alarms:
            print("  " + alarm)


if __name__ == "__main__":
    main(sys.argv[1:])
