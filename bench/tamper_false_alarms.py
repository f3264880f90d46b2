#!/usr/bin/env python3
"""bench/tamper_false_alarms: the tampering stage's false alarms on gold patches (none should
be charged: a reference fix reaches into no test run).

Each gold patch is applied to the base versions of the files it touches and judged as a
candidate would be (verifiers/tamper_check.judge_files: only primitives the patch adds count).

    bench/tamper_false_alarms.py swebench FILE.jsonl [...] --repos-dir /work/repos
    bench/tamper_false_alarms.py tasks TASKS_DIR [...]     # e.g. imported QuixBugs, HumanEvalFix

SWE-bench base files come from the clones in --repos-dir (OWNER__NAME, `git show
base_commit:path`); instances whose clone is absent are counted as skipped, by repository.
Prints, per input, how many gold patches were judged, how many would fail, and why, and the
time the stage took per patch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ooda.tasks.loader import load_taskset
from ooda.verifiers.tamper_check import judge_files


def patched_files(patch: str) -> list[str]:
    """The paths a git-style patch leaves behind (its `+++ b/` side)."""
    return [line[6:].strip() for line in patch.splitlines() if line.startswith("+++ b/")]


def apply(base: dict[str, bytes], patch: str) -> dict[str, bytes]:
    """The files of `patch` after applying it to `base` (path -> content; absent: new)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path, data in base.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
        subprocess.run(
            ["git", "apply", "--whitespace=nowarn", "-"],
            cwd=root, input=patch.encode(), check=True, capture_output=True,
        )  # fmt: skip
        return {
            path: (root / path).read_bytes()
            for path in patched_files(patch)
            if path.endswith(".py") and (root / path).is_file()
        }


def judge(name: str, base: dict[str, bytes], patch: str, alarms: list[str]) -> float:
    """Judge one gold patch; returns the stage's time (the apply is not counted)."""
    candidate = apply(base, patch)
    python_base = {p: d for p, d in base.items() if p.endswith(".py")}
    start = time.perf_counter()
    found = judge_files(python_base, candidate)
    elapsed = time.perf_counter() - start
    if found:
        alarms.append(f"{name}: " + "; ".join(d.render() for d in found[:3]))
    return elapsed


def git_show(repo: Path, commit: str, path: str) -> bytes | None:
    proc = subprocess.run(
        ["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True, check=False
    )
    return proc.stdout if proc.returncode == 0 else None


def swebench(path: Path, repos: Path) -> None:
    alarms: list[str] = []
    skipped: Counter[str] = Counter()
    times: list[float] = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        clone = repos / row["repo"].replace("/", "__")
        if not (clone / ".git").exists():
            skipped[row["repo"]] += 1
            continue
        base = {}
        for file in patched_files(row["patch"]):
            data = git_show(clone, row["base_commit"], file)
            if data is not None:
                base[file] = data
        times.append(judge(row["instance_id"], base, row["patch"], alarms))
    report(str(path), len(times), alarms, times, skipped)


def tasks(root: Path) -> None:
    alarms: list[str] = []
    times: list[float] = []
    for task in load_taskset(root):
        if not task.gold_patch:
            continue
        base = {}
        for file in patched_files(task.gold_patch):
            if (task.repo / file).is_file():
                base[file] = (task.repo / file).read_bytes()
        times.append(judge(task.id, base, task.gold_patch, alarms))
    report(str(root), len(times), alarms, times, Counter())


def report(
    name: str, judged: int, alarms: list[str], times: list[float], skipped: Counter[str]
) -> None:
    per = sum(times) / len(times) * 1000 if times else 0.0
    print(f"{name}: {judged} gold patches judged, {len(alarms)} false alarms "
          f"(stage time {per:.1f} ms per patch, max {max(times, default=0) * 1000:.1f} ms)")
    if skipped:
        print("  skipped (no clone here): " + ", ".join(f"{r} {n}" for r, n in sorted(skipped.items())))
    for alarm in alarms:
        print("  " + alarm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["swebench", "tasks"])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--repos-dir", type=Path, default=Path("/work/repos"))
    args = parser.parse_args()
    for path in args.paths:
        if args.kind == "swebench":
            swebench(path, args.repos_dir)
        else:
            tasks(path)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
