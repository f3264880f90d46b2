"""Issue 15 through the real CLI and the bundled endpoint: infrastructure failures are exit 3
in `ooda run` and errors in `ooda eval` even when the budget ends first (15.5), and a broken
test command or test id is found on the base before the first model call (15.6)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tasks" / "examples"


@pytest.fixture(autouse=True)
def _docker() -> None:
    backend_or_skip("docker")


def ooda(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_endpoint_failing_until_the_budget_ends_is_exit_3_and_an_eval_error(
    median: Path, tmp_path: Path
) -> None:
    with ReplayServer([EXAMPLES], faults=["500"]) as server:
        base_url = server.start()
        run = ooda("run", str(median), "--model", "m", "--base-url", base_url, "-n", "2",
                   "--time-budget", "4", "--runs-dir", str(tmp_path / "runs"), "--json")
        assert run.returncode == 3, run.stderr
        assert json.loads(run.stdout)["status"] == "error"
        assert "no answer" in json.loads(run.stdout)["reason"]
        tasks = tmp_path / "set"
        tasks.mkdir()
        shutil.copytree(median, tasks / "median")
        ev = ooda("eval", str(tasks), "--model", "m", "--base-url", base_url, "-n", "1",
                  "--time-budget", "4", "--runs-dir", str(tmp_path / "evals"),
                  "--eval-id", "e1", "--json")
    summary = json.loads((tmp_path / "evals" / "e1" / "summary.json").read_text())
    assert ev.returncode == 3, ev.stderr  # every task an infrastructure error
    assert summary["errors"] == 1 and summary["resolved"] == 0, summary


def test_a_misspelled_test_id_or_command_is_exit_2_before_any_candidate_is_judged(
    median: Path, tmp_path: Path
) -> None:
    toml = median / "task.toml"
    toml.write_text(toml.read_text().replace('test_two_values"', 'test_two_valuez"'))
    plain = tmp_path / "plain"
    shutil.copytree(median / "repo", plain)
    with ReplayServer([EXAMPLES]) as server:
        base_url = server.start()
        common = ("--model", "m", "--base-url", base_url, "--runs-dir", str(tmp_path / "runs"))
        bad_path = ooda("run", str(plain), "--statement", "fix median", "--test-cmd",
                        "pytest -q tests/test_nothere.py", *common)
        bad_cmd = ooda("run", str(plain), "--statement", "fix median", "--test-cmd",
                       "pytets -q", *common)
        chats = server.stats["chat_requests"]  # a test command's failures are the prompt's
        bad_id = ooda("run", str(median), *common)  # named tests: asked while the base runs
    assert bad_id.returncode == 2, bad_id.stderr
    assert "test_two_valuez" in bad_id.stderr and "spelling" in bad_id.stderr
    assert bad_path.returncode == 2 and "collects no test" in bad_path.stderr
    assert bad_cmd.returncode == 2 and "pytets -q" in bad_cmd.stderr
    assert all(len(p.stderr.strip().splitlines()) == 1 for p in (bad_id, bad_path, bad_cmd))
    assert chats == 0
    [record] = (tmp_path / "runs").glob("*/run.json")  # no candidate judged, run.json says so
    summary = json.loads(record.read_text())
    assert summary["status"] == "error" and "the base check failed" in summary["reason"]
    assert "test_two_valuez" in summary["reason"] and not summary["statuses"].get("failed")


def test_a_plain_repository_without_a_model_gets_messages_that_fit_it(
    median: Path, tmp_path: Path
) -> None:
    """15.4/15.10: no suggestion of gold or replay on a plain repository; `ooda verify` works
    there with --test-cmd; a patch that is no diff is exit 2 with one line."""
    plain = tmp_path / "plain"
    shutil.copytree(median / "repo", plain)
    for model in ("gold", "replay"):
        run = ooda("run", str(plain), "--statement", "fix", "--test-cmd", "pytest -q",
                   "--model", model)
        assert run.returncode == 2 and "plain repository" in run.stderr
        assert "--statement" not in run.stderr
    no_model = ooda("run", str(plain), "--statement", "fix", "--test-cmd", "pytest -q")
    assert no_model.returncode == 2 and "gold" not in no_model.stderr
    gold = median / "gold.diff"
    unnamed = ooda("verify", str(plain), "--patch", str(gold))
    assert unnamed.returncode == 2 and "--test-cmd" in unnamed.stderr
    assert "--statement" not in unnamed.stderr
    verified = ooda("verify", str(plain), "--patch", str(gold), "--test-cmd", "pytest -q",
                    "--json")
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["status"] == "passed"
    # 27.9: which tests failing without the patch pass with it
    assert json.loads(verified.stdout)["fail_to_pass"] == {
        "tests/test_median.py::test_even_length": "passed",
        "tests/test_median.py::test_two_values": "passed"}
    said = ooda("verify", str(plain), "--patch", str(gold), "--test-cmd", "pytest -q")
    assert "2 of 2 test(s) failing without the patch pass with it: " \
        "tests/test_median.py::test_even_length, tests/test_median.py::test_two_values" \
        in said.stdout
    (tmp_path / "notadiff.txt").write_text("hello\n")
    bad = ooda("verify", str(median), "--patch", str(tmp_path / "notadiff.txt"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert bad.stdout == ""


def test_ctrl_c_says_where_the_partial_run_is_and_leaves_a_run_json(
    median: Path, tmp_path: Path
) -> None:
    """15.11: Ctrl-C names the partial run (and, in eval, --resume); run.json is written."""
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    tasks = tmp_path / "set"
    tasks.mkdir()
    shutil.copytree(median, tasks / "median")
    with ReplayServer([EXAMPLES], faults=["hang"]) as server:
        base_url = server.start()
        outputs = []
        for command in (["run", str(median)],
                        ["eval", str(tasks), "--eval-id", "e1"]):
            seen = server.stats["chat_requests"]
            proc = subprocess.Popen(
                [sys.executable, "-m", "ooda.agent.cli", *command, "--model", "m",
                 "--base-url", base_url, "-n", "1", "--runs-dir", str(tmp_path / "runs")],
                cwd=ROOT, env={**env, "OPENAI_API_KEY": "k"}, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while server.stats["chat_requests"] <= seen and time.monotonic() < deadline:
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 130, err
            assert err.strip().splitlines()[-1] == "ooda: error: interrupted", err
            outputs.append(err)
    run_dirs = [p for p in (tmp_path / "runs").iterdir() if p.name.endswith(tuple("0123456789abcdef"))
                and (p / "run.json").is_file()]
    assert run_dirs and f"is in {run_dirs[0]}" in outputs[0]
    assert json.loads((run_dirs[0] / "run.json").read_text())["reason"] == "interrupted (Ctrl-C)"
    assert f"kept in {tmp_path / 'runs' / 'e1'}" in outputs[1] and "--resume" in outputs[1]


def test_quiet_hides_the_display_and_verbose_shows_retries(median: Path, tmp_path: Path) -> None:
    """15.9: -q leaves the result alone; -v shows what the client does (a retried 500);
    27.2: wherever they stand on the line."""
    with ReplayServer([EXAMPLES], faults=["500", "ok"]) as server:
        base_url = server.start()
        common = ("run", str(median), "--model", "m", "--base-url", base_url, "-n", "1",
                  "--rounds", "2", "--runs-dir", str(tmp_path / "runs"))
        quiet = ooda(*common, "-q")
        verbose = ooda(*common[:2], "-v", *common[2:])
    assert quiet.returncode in (0, 1) and "round " not in quiet.stderr
    assert "tokens" in quiet.stderr and "run directory:" in quiet.stderr
    assert "retrying" in verbose.stderr and "round " in verbose.stderr


def test_a_patch_of_latin1_files_is_verified_as_its_bytes(tmp_path: Path) -> None:
    """27.9: a patch is bytes; one of a latin-1 file (not UTF-8) applies as it is."""
    repo = tmp_path / "legacy"
    (repo / "tests").mkdir(parents=True)
    cookie = b"# -*- coding: latin-1 -*-\n"
    (repo / "names.py").write_bytes(cookie + b"def sign() -> str:\n    return 'Caf\xe9 ferm\xe9'\n")
    (repo / "tests" / "test_names.py").write_bytes(
        cookie + b"from names import sign\n\n\ndef test_sign() -> None:\n"
        b"    assert sign() == 'Caf\xe9 ouvert'\n")
    patch = tmp_path / "fix.diff"
    patch.write_bytes(b"--- a/names.py\n+++ b/names.py\n@@ -1,3 +1,3 @@\n " + cookie
                      + b" def sign() -> str:\n-    return 'Caf\xe9 ferm\xe9'\n"
                      b"+    return 'Caf\xe9 ouvert'\n")
    done = ooda("verify", str(repo), "--patch", str(patch), "--test-cmd", "python -m pytest -q",
                "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["status"] == "passed"
    assert (repo / "names.py").read_bytes().endswith(b"ferm\xe9'\n")  # the repository: untouched


def test_a_wrong_key_is_said_before_the_base_run(median: Path, tmp_path: Path) -> None:
    """27.4: the endpoint is checked while the sandbox starts, before the unpatched tests run:
    a key it rejects is exit 2 without a single completion asked for."""
    with ReplayServer([EXAMPLES], api_key="right") as server:
        base_url = server.start()
        env_key = {"OPENAI_API_KEY": "wrong"}
        proc = subprocess.run(
            [sys.executable, "-m", "ooda.agent.cli", "run", str(median), "--model", "m",
             "--base-url", base_url, "--runs-dir", str(tmp_path / "runs")],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**{k: v for k, v in os.environ.items()
                    if not k.startswith(("OPENAI_", "OODA_"))}, **env_key})
        assert server.stats["chat_requests"] == 0
    assert proc.returncode == 2, proc.stderr
    assert "rejected the API key" in proc.stderr and "round 1" not in proc.stderr


def test_verify_judges_what_it_can_before_the_base_run(median: Path, tmp_path: Path) -> None:
    """27.9: a patch that touches a test, or does not apply, is exit 2 before any sandbox or
    base run (here the base's tests would take a minute: the answer comes well within it)."""
    plain = tmp_path / "plain"
    shutil.copytree(median / "repo", plain)
    (plain / "tests" / "test_slow.py").write_text(
        "import time\n\n\ndef test_slow() -> None:\n    time.sleep(60)\n")
    touches_a_test = tmp_path / "tests.diff"
    touches_a_test.write_text("--- a/tests/test_median.py\n+++ b/tests/test_median.py\n"
                              "@@ -1 +1 @@\n-x\n+y\n")
    stale = tmp_path / "stale.diff"
    stale.write_text("--- a/median.py\n+++ b/median.py\n@@ -1 +1 @@\n-not in the file\n+y\n")
    for patch, said in ((touches_a_test, "this is a test file"),
                        (stale, "the patch does not apply")):
        done = ooda("verify", str(plain), "--patch", str(patch), "--test-cmd",
                    "python -m pytest -q", timeout=45)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_model_the_endpoint_lacks_is_one_line_naming_it(median: Path, tmp_path: Path) -> None:
    """27.4: a real `ooda serve` that, like OpenAI and vLLM, answers 404 model_not_found for a
    name it does not serve: exit 2, one line naming the model and the ones the endpoint lists
    (from the listing read at start-up: no request more), no attempt shown or recorded as a
    failure; `ooda eval` stops on it too, with the same line."""
    with subprocess.Popen([sys.executable, "-m", "ooda.agent.cli", "serve", "--replay",
                           str(EXAMPLES), "--port", "0", "--strict-models", "--served-model",
                           "fast", "--served-model", "strong"], stdout=subprocess.PIPE,
                          text=True, env={**os.environ, "OODA_DAEMON": "0"}) as serve:
        try:
            assert serve.stdout is not None
            base_url = serve.stdout.readline().split(" at ")[1].split()[0]
            proc = ooda("run", str(median), "--model", "fats", "--base-url", base_url, "-n",
                        "2", "--runs-dir", str(tmp_path / "runs"))
            with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats") as answer:
                stats = json.loads(answer.read())
            # an evaluation stops at the first task that meets it: every task would
            evaluated = ooda("eval", str(EXAMPLES), "--model", "fats", "--base-url", base_url,
                             "-n", "1", "--runs-dir", str(tmp_path / "evals"))
        finally:
            serve.terminate()
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"ooda: error: {base_url} has no model 'fats' (HTTP 404: ")
    assert line.endswith(f"it lists fast, strong (GET {base_url}/models)")
    # GET /models once at start-up, the two samples, and this GET /stats: no probe request
    assert stats["chat_requests"] == 2 and stats["requests"] == 4
    (run,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    summary = json.loads((run / "run.json").read_text())
    assert summary["status"] == "error" and "has no model 'fats'" in summary["reason"]
    attempts = [json.loads(x) for x in (run / "attempts.jsonl").read_text().splitlines()]
    assert {a["status"] for a in attempts} == {"cancelled"}
    assert evaluated.returncode == 2, evaluated.stderr
    assert evaluated.stderr.strip().splitlines() == [line]
