#!/usr/bin/env python3
"""bench/guard_overhead: what the pytest guard (verifiers/pytest_check/guard/) costs over plain
pytest.

A repository of N small tests (three passing asserts each: ints, a nested dict, approx) runs
under plain `python -m pytest` and under the guard as ooda launches it (installed by
`run.install_guard`; assertion-pass hook on, so every passing comparison is probed; code
identity and the profile check per test). Prints the best of R wall times of each and their
ratio. With --against PATH, a second guard is timed too: an older single-file guard
(`git show REV:verifiers/pytest_check/guard.py > old.py`) or an older guard package
(`git archive REV verifiers/pytest_check/guard | tar -x -C old`, then old/verifiers/pytest_check/guard).

    bench/guard_overhead.py [--tests N] [--repeat R] [--against OLD_GUARD.py|OLD_GUARD_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
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


def timed(cmd: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[2]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    return elapsed


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
        best = {"plain": min(timed(plain, repo) for _ in range(args.repeat))}
        for name, path in guards.items():
            best[name] = min(timed(guard_cmd(path, repo), repo) for _ in range(args.repeat))
    print(f"{args.tests} tests, best of {args.repeat}")
    for name, seconds in best.items():
        print(f"  {name:8} {seconds:6.2f}s  {seconds / best['plain']:.2f}x plain pytest")


if __name__ == "__main__":
    main()
