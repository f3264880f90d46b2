"""`ooda eval --executor ray` on a real two-node Ray cluster (a head and a worker, started here
on loopback, stopped by the fixture whatever happens): the same summary as the local executor
over 8 QuixBugs tasks with their gold patches; a worker node killed mid-evaluation leaves every
task counted once and, after `--resume --retry-errors`, the same resolved count; without Ray,
`--executor ray` is a usage error naming the extra."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ooda.agent.app import evaluate as ev
from ooda.agent.app.evaluate import ray_executor
from ooda.agent.app.run import RunOptions
from ooda.agent.contracts.errors import InfraError, UsageError
from tests.helpers.ray_cluster import Cluster, local_cluster

ROOT = Path(__file__).resolve().parents[3]
DATASETS = ROOT.parent / "shared" / "datasets"
QUIXBUGS = ["bucketsort", "find_in_sorted", "flatten", "gcd", "get_factors",
            "is_valid_parenthesization", "max_sublist_sum", "pascal"]
COMPARED = ("total", "resolved", "unresolved", "errors", "finished", "pass_at_k", "complete")

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="ray is not installed (pip install -e '.[ray]')")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ooda.tasks.importers import import_quixbugs

    if not DATASETS.is_dir():
        pytest.skip(f"no data sets at {DATASETS}")
    dest = tmp_path_factory.mktemp("sets") / "quix"
    import_quixbugs(DATASETS / "quixbugs", dest, only=QUIXBUGS)
    return dest


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with local_cluster(workers=1) as started:
        yield started


def options(tasks: Path, runs: Path, sandbox: str, **kw: Any) -> ev.EvalOptions:
    run = RunOptions.of(model="gold", samples=1, rounds=1, time_budget_s=120.0, runs_dir=runs,
                        sandbox=sandbox)
    return ev.EvalOptions(taskset=tasks, run=run, concurrency=2, **kw)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@needs_ray
def test_ray_gives_the_local_summary(tasks: Path, cluster: Cluster, sandbox_name: str,
                                     tmp_path: Path) -> None:
    local = ev.evaluate(options(tasks, tmp_path / "local", sandbox_name), show_progress=False)
    on_ray = ev.evaluate(options(tasks, tmp_path / "ray", sandbox_name, executor="ray",
                                 ray_address=cluster.address), show_progress=False)
    assert {k: on_ray.summary[k] for k in COMPARED} == {k: local.summary[k] for k in COMPARED}
    assert on_ray.summary["resolved"] == len(QUIXBUGS)
    for name in QUIXBUGS:  # the same run directory, unpacked from the node's tar
        run_dir = on_ray.eval_dir / "tasks" / f"quixbugs-{name}"
        assert (run_dir / "run.json").is_file() and (run_dir / "attempts.jsonl").is_file()
        assert (run_dir / "final.diff").read_text() == (
            local.eval_dir / "tasks" / f"quixbugs-{name}" / "final.diff").read_text()


@needs_ray
def test_a_dead_node_counts_every_task_once(tasks: Path, cluster: Cluster, sandbox_name: str,
                                            tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "ooda.agent.cli", "eval", str(tasks), "--model", "gold",
           "-n", "1", "--rounds", "1", "--time-budget", "120", "--sandbox", sandbox_name,
           "--runs-dir", str(runs), "--concurrency", "2", "--eval-id", "killed", "--json",
           "--executor", "ray", "--ray-address", cluster.address]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OODA_DAEMON": "0"})
    results = runs / "killed" / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if results.is_file() and results.read_text().strip():
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the evaluation ended before the node could be killed"
    cluster.kill_node("worker1")  # mid-evaluation: its running task is cut off
    out, err = proc.communicate(timeout=240)
    assert proc.returncode in (0, 3), err.decode()[-2000:]
    ids = [r["task_id"] for r in lines(results)]
    # each once, none lost
    assert sorted(ids) == sorted(f"quixbugs-{n}" for n in QUIXBUGS), err.decode()[-2000:]
    again = ev.evaluate(options(tasks, runs, sandbox_name, executor="ray",
                                ray_address=cluster.address, eval_id="killed", resume=True,
                                retry_errors=True), show_progress=False)
    assert again.summary["resolved"] == len(QUIXBUGS)
    assert again.summary["errors"] == 0
    assert sorted(r["task_id"] for r in lines(results)) == sorted(ids)


def test_without_ray_the_extra_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(ray_executor.importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    opts = ev.EvalOptions(taskset=ROOT / "tasks" / "examples",
                          run=RunOptions.of(model="gold", runs_dir=tmp_path), executor="ray")
    with pytest.raises(UsageError, match=r"pip install 'ooda\[ray\]'"):
        ev.evaluate(opts, show_progress=False)
    assert not any(tmp_path.iterdir())  # nothing written


def test_a_task_travels_as_bytes(tmp_path: Path) -> None:
    from ooda.tasks.loader import load_task

    task = load_task(ROOT / "tasks" / "examples" / "median")
    moved = ray_executor.unpack_task(ray_executor.pack_task(task), tmp_path / "node")
    assert moved.repo == tmp_path / "node" / "repo" and moved.repo.is_dir()
    assert sorted(p.name for p in moved.repo.rglob("*")) == sorted(
        p.name for p in task.repo.rglob("*"))
    assert moved.replay is not None and moved.replay.read_text() == task.replay.read_text()
    assert (moved.id, moved.statement, moved.gold_patch) == (task.id, task.statement,
                                                            task.gold_patch)


@needs_ray
def test_one_request_limit_for_the_cluster(cluster: Cluster) -> None:
    """The permits actor: at most `limit` held at once, whoever asks; a dead task's permits
    come back when the driver returns them."""
    import ray

    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    try:
        permits = ray.remote(ray_executor._Permits).options(num_cpus=0).remote(2)
        ray.get([permits.acquire.remote("dead"), permits.acquire.remote("dead")])
        waiting = [permits.acquire.remote("b"), permits.acquire.remote("c")]
        more, _ = ray.wait(waiting, num_returns=1, timeout=1.0)
        assert more == [] and ray.get(permits.in_use.remote()) == 2  # the limit holds
        ray.get(permits.release_all.remote("dead"))
        ray.get(waiting, timeout=60)  # both waiting requests got theirs
        assert ray.get(permits.in_use.remote()) == 2
    finally:
        ray.shutdown()


@needs_ray
def test_no_cluster_at_the_address_is_an_infrastructure_error(tmp_path: Path) -> None:
    opts = ev.EvalOptions(taskset=ROOT / "tasks" / "examples",
                          run=RunOptions.of(model="gold", runs_dir=tmp_path), executor="ray",
                          ray_address="127.0.0.9:1")
    with pytest.raises(InfraError, match="no Ray cluster answers at 127.0.0.9:1"):
        ev.evaluate(opts, show_progress=False)
    assert not any(tmp_path.iterdir())  # nothing written
