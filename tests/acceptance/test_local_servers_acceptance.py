"""`ooda run`, `ooda eval` and `ooda doctor` against the bundled endpoint behaving like a local
server with its defaults (llama-cpp-python: one generation at a time, a stream cut when another
request waits, an empty 200 stream for a prompt over its 2,048-token window, no usage), from the
outside: the real CLI, real HTTP, a real sandbox. Nothing is faked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ooda.agent.models.replay_behaviour import behaviour_for
from ooda.agent.models.server import ReplayServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tasks" / "examples"
LLAMA = behaviour_for("llama-cpp-python")


def ooda(*args: str, env: dict[str, str] | None = None, timeout: float = 300
         ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=ROOT,
                          env={**base, "OODA_DAEMON": "0", **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def only_run(runs: Path) -> Path:
    (run,) = [p for p in runs.iterdir() if not p.name.startswith(".")]
    return run


def attempts_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "attempts.jsonl").read_text().splitlines()]


def write_replay(path: Path, task: str, answers: list[str]) -> Path:
    path.write_text("".join(json.dumps({"task": task, "answer": a}) + "\n" for a in answers))
    return path


def test_run_with_the_servers_defaults_and_ooda_s(median: Path, tmp_path: Path,
                                                  sandbox_name: str) -> None:
    """-n 4 and 8 requests at once against one generation at a time: every candidate ends with
    a finish_reason, none fails for the cut streams, and the records say what happened."""
    runs = tmp_path / "runs"
    with ReplayServer([EXAMPLES], tokens_per_s=300, behaviour=LLAMA) as server:
        url = server.start()
        proc = ooda("run", str(median), "--model", "m", "--base-url", url,
                    "--sandbox", sandbox_name, "--runs-dir", str(runs))
        stats = server.stats
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = proc.stdout + proc.stderr  # the console's lines (stderr off a terminal)
    assert "note:" in shown and "(estimated" in shown
    run = only_run(runs)
    summary = json.loads((run / "run.json").read_text())
    assert summary["status"] == "passed" and summary["tokens"]["estimated"] is True
    endpoint = summary["endpoint"]
    assert any("--interrupt_requests" in note for note in endpoint["notices"])
    assert endpoint["base_url"] == url
    assert endpoint["concurrency"]["configured"] == 8 and endpoint["concurrency"]["lowest"] == 1
    assert 1 <= endpoint["concurrency"]["streams_cut"] <= stats["interrupted"]
    attempts = attempts_of(run)
    whole = [a for a in attempts if a["status"] not in ("cancelled", "error")
             and a["invalid_reason"] != "hopeless_edit"]  # not stopped by ooda mid-stream
    assert whole and all(a["finish_reason"] == "stop" for a in whole)
    generated = [a for a in attempts if a["status"] not in ("cancelled", "error")]
    assert all(a["tokens_estimated"] for a in generated)
    assert all(a["t_request_s"] <= a["t_first_token_s"] for a in generated)
    assert not [a for a in attempts if a["status"] == "error"]


def test_a_first_prompt_over_the_window_is_one_line_and_exit_2_in_seconds(
        median: Path, tmp_path: Path, sandbox_name: str) -> None:
    with ReplayServer([EXAMPLES], behaviour=behaviour_for("llama-cpp-python",
                                                          context_window=200)) as server:
        start = time.monotonic()
        proc = ooda("-q", "run", str(median), "--model", "m", "--base-url", server.start(),
                    "--sandbox", sandbox_name, "--runs-dir", str(tmp_path / "runs"))
        took = time.monotonic() - start
        stats = server.stats
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = proc.stderr.strip().splitlines()
    assert len(error) == 1 and "context window of 200 tokens" in error[0], proc.stderr
    assert error[0].startswith("ooda: error: the prompt (~")
    assert took < 60 and stats["chat_requests"] <= 12  # no retry loop
    summary = json.loads((only_run(tmp_path / "runs") / "run.json").read_text())
    assert summary["status"] == "error" and "200 tokens" in summary["reason"]


def test_prose_without_an_edit_is_stopped_and_named(median: Path, tmp_path: Path,
                                                    sandbox_name: str) -> None:
    prose = "Let me think about medians in general. " * 200
    touch_test = ("tests/test_median.py\n<<<<<<< SEARCH\nimport pytest\n=======\nimport pytest"
                  "  # changed\n>>>>>>> REPLACE\n")
    replay = write_replay(tmp_path / "r.jsonl", "median", [prose, touch_test])
    runs = tmp_path / "runs"
    with ReplayServer([replay], tokens_per_s=2000) as server:
        proc = ooda("run", str(median), "--model", "m", "--base-url", server.start(), "-n", "2",
                    "--rounds", "1", "--max-prose-tokens", "100", "--sandbox", sandbox_name,
                    "--runs-dir", str(runs), "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    kinds = {a["invalid_reason"] for a in attempts_of(only_run(runs))}
    assert kinds == {"prose_only", "test_file"}, kinds


def test_partial_answers_stopped_at_the_deadline_are_kept(median: Path, tmp_path: Path,
                                                          sandbox_name: str) -> None:
    slow = "median.py\n" + "# thinking it through\n" * 400
    replay = write_replay(tmp_path / "r.jsonl", "median", [slow])
    runs = tmp_path / "runs"
    with ReplayServer([replay], tokens_per_s=40) as server:
        proc = ooda("run", str(median), "--model", "m", "--base-url", server.start(), "-n", "2",
                    "--time-budget", "6", "--sandbox", sandbox_name, "--runs-dir", str(runs),
                    "--json")
    assert proc.returncode in (1, 3), proc.stdout + proc.stderr
    run = only_run(runs)
    timed_out = [a for a in attempts_of(run) if a["status"] == "timeout"]
    assert timed_out and all(a["completion_tokens"] > 0 and a["tokens_estimated"]
                             and a["t_first_token_s"] is not None for a in timed_out)
    answer = (run / "attempts" / timed_out[0]["attempt_id"] / "answer.md").read_text()
    assert slow.startswith(answer) and len(answer) > 40


def test_eval_records_the_endpoint_from_the_environment_and_the_waiting(
        tmp_path: Path, sandbox_name: str) -> None:
    taskset = tmp_path / "set"
    taskset.mkdir()
    (taskset / "median").symlink_to(EXAMPLES / "median")
    with ReplayServer([EXAMPLES], tokens_per_s=300, behaviour=LLAMA) as server:
        url = server.start()
        proc = ooda("eval", str(taskset), "--model", "m", "--runs-dir", str(tmp_path / "runs"),
                    "--sandbox", sandbox_name, env={"OPENAI_BASE_URL": url})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (eval_dir,) = (tmp_path / "runs").iterdir()
    config = json.loads((eval_dir / "eval.json").read_text())
    assert config["options"]["base_url"] == url
    summary = json.loads((eval_dir / "summary.json").read_text())
    assert summary["base_url"] == url and summary["tokens"]["estimated"] is True
    assert summary["time_breakdown_s"]["first_token"] > 0


@pytest.mark.parametrize("like, expected", [("llama-cpp-python", "cut a stream short"),
                                            ("openai", "side by side")])
def test_doctor_streams_and_says_what_came_back(like: str, expected: str) -> None:
    with ReplayServer([EXAMPLES], tokens_per_s=100, behaviour=behaviour_for(like)) as server:
        proc = ooda("doctor", "--base-url", server.start(), "--json")
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    stream = checks["model stream"]
    assert stream["ok"] and "finish_reason stop" in stream["detail"]
    assert "tokens/s" in stream["detail"] and "first token after" in stream["detail"]
    assert ("usage not sent" in stream["detail"]) == (like == "llama-cpp-python")
    assert expected in checks["two streams at once"]["detail"]
