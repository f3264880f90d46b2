#!/usr/bin/env python3
"""bench/guard_overhead: what the pytest guard (verifiers/pytest_check/guard/) costs over plain
pytest.

A repository of N small tests (three passing asserts each: ints, a nested dict, approx) runs
under plain `python -m pytest` and under the guard as ooda launches it (installed by
`run.install_guard`; every comparison of an assert probed through the guard's rewriter; code
identity and the profile check per test). Prints the best of R wall times of each and their
ratio, and the same for the CPU time (user + system) each run took: on a shared machine the
CPU ratio moves far less with the load than the wall-clock one. With --against PATH, a second guard is timed too: an older single-file guard
(`git show REV:verifiers/pytest_check/guard.py > old.py`) or an older guard package
(`git archive REV verifiers/pytest_check/guard | tar -x -C old`, then old/verifiers/pytest_check/guard).

With --fidelity DATA, the suites are real ones instead: each project bench/fidelity prepared
in DATA (its fixed checkout, its host venv, the test files ooda judges it by), run with that
venv's Python as plain pytest and under the guard (the mutated file given as the changed one,
as for a candidate); plain pytest autoloads its plugins as on the host, the guard is named
them as ooda names them (OODA_PYTEST_PLUGINS, autoload off). Per project: both wall and CPU
ratios and whether the two runs' outcome counts are the same (the guard changing no outcome).

    bench/guard_overhead.py [--tests N] [--repeat R] [--against OLD_GUARD.py|OLD_GUARD_DIR]
    bench/guard_overhead.py --fidelity /work/wt/data/fidelity [--only NAME ...] [--repeat R]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ooda.agent.sandbox.environments.builder import PLUGINS_SCRIPT
from ooda.agent.verify.environment import PLUGINS_VAR
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


def run_timed(cmd: list[str], cwd: Path, autoload: bool = False, plugins: str = ""
              ) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall-clock and CPU seconds of one run of `cmd`, and the run. Without autoload, the
    plugins are those named (comma-separated) to the guard, as ooda names them."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        env[PLUGINS_VAR] = plugins
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - start, _children_cpu() - cpu, proc


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of `cmd`, which must pass."""
    elapsed, cpu, proc = run_timed(cmd, cwd)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[2]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    return elapsed, cpu


def guard_cmd(guard: Path, repo: Path, directory: Path | None = None,
              python: str = sys.executable, tests: tuple[str, ...] = ("tests",),
              changed: tuple[str, ...] = ()) -> list[str]:
    """The guard's command line, the guard installed in `directory` (repo/.ooda by default): a
    package directory as ooda installs it (its launcher next to it), or a single-file guard as
    older versions were."""
    directory = directory or repo / ".ooda"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    if guard.is_dir():
        package = directory / GUARD_PACKAGE
        shutil.copytree(guard, package, ignore=shutil.ignore_patterns("__pycache__"))
        (directory / "guard.py").write_text(LAUNCHER)
    else:
        shutil.copy(guard, directory / "guard.py")
    (directory / "config.json").write_text(json.dumps({"changed_files": list(changed)}))
    return [
        python, "-s", "-B", str(directory / "guard.py"), str(directory / "record.json"),
        str(directory / "config.json"), "-p", "no:cacheprovider",
        "-q", *tests,
    ]  # fmt: skip


_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b")


def outcome_counts(output: str) -> dict[str, int]:
    """pytest's closing counts ("3 failed, 40 passed, 1 skipped"), `error` and `errors` as one."""
    lines = [ln for ln in output.splitlines() if _COUNT.search(ln)]
    return {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
            for n, kind in _COUNT.findall(lines[-1])} if lines else {}


def fidelity_suites(data: Path, only: list[str], repeat: int) -> None:
    """The guard's cost and effect on bench/fidelity's real suites (see the docstring)."""
    loader = importlib.machinery.SourceFileLoader("fidelity", str(Path(__file__).with_name("fidelity")))
    spec = importlib.util.spec_from_loader("fidelity", loader)
    assert spec is not None
    fidelity = importlib.util.module_from_spec(spec)
    loader.exec_module(fidelity)
    import tomllib

    projects = tomllib.loads(fidelity.PROJECTS.read_text())["project"]
    ratios: list[tuple[float, float]] = []
    same = 0
    for project in projects:
        name = project["name"]
        host = data / "results" / f"{name}-host.json"
        python = data / "venvs" / name / "bin" / "python"
        repo = data / "repos" / name / "fixed"
        if (only and name not in only) or not host.is_file() or not python.is_file():
            continue
        files = tuple(project.get("args") or fidelity.judged_files(json.loads(host.read_text())["buggy"]))
        plain = [str(python), "-s", "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", *files]
        plugins = ",".join(subprocess.run([str(python), "-I", "-c", PLUGINS_SCRIPT], text=True,
                                          capture_output=True, check=True).stdout.split())
        with tempfile.TemporaryDirectory() as tmp:
            runs: dict[str, list[tuple[float, float]]] = {"plain": [], "guard": []}
            counts: dict[str, dict[str, int]] = {}
            tails: dict[str, str] = {}
            for _ in range(repeat):
                # installed afresh each time: the guard deletes its config once read (its key)
                guarded = guard_cmd(GUARD, repo, Path(tmp) / "ooda", str(python), files,
                                    (project["mutation"]["file"],))
                for kind, cmd in (("plain", plain), ("guard", guarded)):
                    # the host's pytest autoloads its plugins; ooda names them to the guard
                    seconds, cpu_seconds, proc = run_timed(cmd, repo, kind == "plain", plugins)
                    runs[kind].append((seconds, cpu_seconds))
                    counts[kind] = outcome_counts(proc.stdout)
                    tails[kind] = (proc.stdout + proc.stderr)[-600:]
        wall = {k: min(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: min(c for _, c in v) for k, v in runs.items()}
        ratios.append((wall["guard"] / wall["plain"], cpu["guard"] / cpu["plain"]))
        agree = counts["plain"] == counts["guard"]
        same += agree
        said = "same" if agree else f"DIFFER ({counts['guard']} under the guard)"
        print(f"{name:16} plain {wall['plain']:6.2f}s guard {wall['guard']:6.2f}s "
              f"{ratios[-1][0]:.2f}x (+{wall['guard'] - wall['plain']:.1f}s; CPU "
              f"{ratios[-1][1]:.2f}x)  outcomes {said}: "
              f"{counts['plain']}", flush=True)
        if not agree:
            print("    under the guard: " + tails["guard"].replace("\n", "\n    "), flush=True)
    if ratios:
        walls = sorted(w for w, _ in ratios)
        cpus = sorted(c for _, c in ratios)
        print(f"{len(ratios)} suites, best of {repeat}; load average {os.getloadavg()[0]:.1f}; "
              f"guard / plain median {walls[len(walls) // 2]:.2f}x wall ({cpus[len(cpus) // 2]:.2f}x "
              f"CPU), worst {walls[-1]:.2f}x wall ({cpus[-1]:.2f}x CPU); same outcome counts on "
              f"{same} of {len(ratios)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", type=Path)
    parser.add_argument("--fidelity", type=Path, help="bench/fidelity's DATA: its real suites")
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    if args.fidelity:
        fidelity_suites(args.fidelity, args.only, args.repeat)
        return
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
