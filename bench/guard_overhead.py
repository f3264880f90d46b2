#!/usr/bin/env python3
"""bench/guard_overhead: what the pytest guard (verifiers/pytest_check/guard/) costs over plain
pytest.

A repository of N small tests (three passing asserts each: ints, a nested dict, approx) runs
under plain `python -m pytest` and under the guard as ooda launches it (installed by
`run.install_guard`; assertion-pass hook on, so every passing comparison is probed; code
identity and the profile check per test). Prints the best of R wall times of each and their
ratio, and the same for the CPU time (user + system) each run took: on a shared machine the
CPU ratio moves far less with the load than the wall-clock one. With --against PATH, a second guard is timed too: an older single-file guard
(`git show REV:verifiers/pytest_check/guard.py > old.py`) or an older guard package
(`git archive REV verifiers/pytest_check/guard | tar -x -C old`, then old/verifiers/pytest_check/guard).

    bench/guard_overhead.py [--tests N] [--repeat R] [--against OLD_GUARD.py|OLD_GUARD_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ooda.verifiers.pytest_check.run import GUARD_LAUNCHER as LAUNCHER
from ooda.verifiers.pytest_check.run import GUARD_PACKAGE

GUARD = Path(__file__).resolve().parents[1] / "verifiers" / "pytest_check" / "guard"


def make_repo(root: Path, count: int) -> None:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    body = ["import pytest\n\nfrom calc import add\n"]
    for i in range(count):
        body.append(
            f"def test_{i}():\n    assert add({i}, 1) == {i + 1}\n"
            f"    assert {{'k': [add(1, {i})]}} == {{'k': [{i + 1}]}}\n"
            f"    assert add(0.5, {i}) == pytest.approx({i}.5)\n"
        )
    (root / "tests" / "test_many.py").write_text("\n".join(body))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of `cmd`."""
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[2]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    return elapsed, _children_cpu() - cpu


def guard_cmd(guard: Path, repo: Path) -> list[str]:
    """The guard's command line, the guard installed in repo/.ooda: a package directory as ooda
    installs it (its launcher next to it), or a single-file guard as older versions were."""
    directory = repo / ".ooda"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    if guard.is_dir():
        package = directory / GUARD_PACKAGE
        shutil.copytree(guard, package, ignore=shutil.ignore_patterns("__pycache__"))
        (directory / "guard.py").write_text(LAUNCHER)
    else:
        shutil.copy(guard, directory / "guard.py")
    (directory / "config.json").write_text(json.dumps({"changed_files": []}))
    return [
        sys.executable, "-s", "-B", str(directory / "guard.py"), str(directory / "record.json"),
        str(directory / "config.json"), "-p", "no:cacheprovider",
        "-o", "enable_assertion_pass_hook=true", "-q", "tests",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, args.tests)
        plain = [
            sys.executable,
            "-s",
            "-B",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests",
        ]
        guards = {"guard": GUARD, **({"against": args.against} if args.against else {})}
        runs: dict[str, list[tuple[float, float]]] = {"plain": [], **{name: [] for name in guards}}
        for _ in range(args.repeat):  # interleaved: each round sees about the same load
            runs["plain"].append(timed(plain, repo))
            for name, path in guards.items():
                runs[name].append(timed(guard_cmd(path, repo), repo))
    wall = {name: min(w for w, _ in times) for name, times in runs.items()}
    cpu = {name: min(c for _, c in times) for name, times in runs.items()}
    print(f"{args.tests} tests, best of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
    for name in runs:
        print(
            f"  {name:8} {wall[name]:6.2f}s  {wall[name] / wall['plain']:.2f}x plain pytest"
            f"   (CPU {cpu[name]:6.2f}s  {cpu[name] / cpu['plain']:.2f}x)"
        )


if __name__ == "__main__":
    main()
