"""`ooda run` in a real terminal (tmux, 80 columns) against a slowly streaming endpoint: the
clock ticks while the model generates, streamed tokens are counted per candidate, and a long
path is never broken by ooda (the terminal folds it; `capture-pane -J` joins such folds, never
a newline ooda would have inserted). Bounded: a few seconds of streaming."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer, ServedModel

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tasks" / "examples"
CLOCK = re.compile(r"(\d+\.\d)s / \d+s")
STREAMED = re.compile(r"r1c\d\s+generating\s+(\d+) tokens")


@pytest.fixture
def tmux() -> Iterator[str]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/setup.sh installs it)")
    backend_or_skip("docker")
    name = f"ooda-test-{uuid.uuid4().hex[:8]}"
    # a tmux server of its own (socket `name`): with the default one, a session started while
    # the previous test's last session is closing can meet a server on its way out (exit 1)
    subprocess.run(tmux_cmd(name, "new-session", "-d", "-s", name, "-x", "80", "-y", "40"),
                   check=True)
    try:
        yield name
    finally:
        subprocess.run(tmux_cmd(name, "kill-server"), check=False)


def tmux_cmd(name: str, *args: str) -> list[str]:
    """A tmux command line for the session `name`, on its own server."""
    return ["tmux", "-L", name, *args]


def pane(name: str) -> str:
    return subprocess.run(tmux_cmd(name, "capture-pane", "-p", "-J", "-t", name), check=True,
                          capture_output=True, text=True).stdout


def wait_until(name: str, check: object, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = pane(name)
        if check(text):  # type: ignore[operator]
            return text
        time.sleep(0.2)
    raise AssertionError(f"timed out; the pane shows:\n{pane(name)}")


def test_live_display_ticks_counts_tokens_and_keeps_paths_whole(
    tmux: str, median: Path, tmp_path: Path
) -> None:
    runs = tmp_path / ("a-rather-long-directory-name-for-the-runs-of-this-test-" + "x" * 40)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    with ReplayServer([EXAMPLES], tokens_per_s=8, ttft_s=2) as server:
        base_url = server.start()
        command = [sys.executable, "-m", "ooda.agent.cli", "run", str(median), "--model", "m",
                   "--base-url", base_url, "-n", "2", "--rounds", "1", "--time-budget", "9",
                   "--runs-dir", str(runs)]
        line = " ".join(f"{k}={shlex.quote(v)}" for k, v in
                        {"PATH": env["PATH"], "OODA_DAEMON": "0", "TERM": "xterm-256color"}
                        .items())
        line += f" {shlex.join(command)}; echo EXIT=$?"
        subprocess.run([*tmux_cmd(tmux, "send-keys", "-t", tmux), f"cd {shlex.quote(str(ROOT))} && "
                        f"clear && env -i HOME={shlex.quote(os.environ.get('HOME', '/'))} "
                        + line, "Enter"], check=True)
        first = wait_until(tmux, lambda t: CLOCK.search(t) and "generating" in t)
        t1 = float(CLOCK.findall(first)[-1])
        # nothing has finished yet (time to first token 2 s, then 8 tokens a second)
        later = wait_until(tmux, lambda t: CLOCK.findall(t) and
                           float(CLOCK.findall(t)[-1]) > t1 + 0.5 and "generating" in t)
        assert "passed" not in later.split("median  round")[-1].split("\n")[0]
        streamed = wait_until(tmux, lambda t: any(int(n) > 0 for n in STREAMED.findall(t)))
        counts = [int(n) for n in STREAMED.findall(streamed)]
        more = wait_until(tmux, lambda t: any(int(n) > max(counts) for n in STREAMED.findall(t)))
        assert "received" in more
        done = wait_until(tmux, lambda t: "EXIT=" in t, timeout=60)
    assert f"run directory: {runs}/" in done, done  # one line: the path unbroken


def test_a_line_says_what_runs_before_the_first_answer(
    tmux: str, median: Path, tmp_path: Path
) -> None:
    """27.4: the seconds before the first answer (the endpoint checked, a sandbox started,
    the tests run on the unpatched code; here a test that takes 3 s) are said on a transient
    line, in a terminal."""
    repo = tmp_path / "slowrepo"
    shutil.copytree(median / "repo", repo)
    (repo / "tests" / "test_slow.py").write_text(
        "import time\n\n\ndef test_slow() -> None:\n    time.sleep(3)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    with ReplayServer([EXAMPLES]) as server:
        command = [sys.executable, "-m", "ooda.agent.cli", "run", str(repo), "--statement",
                   "median() is wrong", "--test-cmd", "python -m pytest -q", "--model", "m",
                   "--base-url", server.start(), "--runs-dir", str(tmp_path / "runs")]
        line = " ".join(f"{k}={shlex.quote(v)}" for k, v in
                        {"PATH": env["PATH"], "OODA_DAEMON": "0", "TERM": "xterm-256color"}
                        .items())
        subprocess.run([*tmux_cmd(tmux, "send-keys", "-t", tmux), f"clear && env -i "
                        f"HOME={shlex.quote(os.environ.get('HOME', '/'))} {line} "
                        f"{shlex.join(command)}; echo EXIT=$?", "Enter"], check=True)
        said = "checking the endpoint, starting a sandbox; then the tests on the unpatched"
        shown = wait_until(tmux, lambda t: said in t or re.search(r"EXIT=\d", t)
                           or "round 1" in t, timeout=120)
        assert said in shown, shown
        # then the first request: no script answers this repository, exit 2 (27.6)
        done = wait_until(tmux, lambda t: re.search(r"EXIT=\d", t), timeout=120)
    assert "EXIT=2" in done and "no scripted answer for task 'slowrepo'" in done
    assert said not in done  # transient: gone once the run has something else to say


def test_a_model_the_endpoint_lacks_leaves_one_line_in_a_terminal(
    tmux: str, median: Path, tmp_path: Path
) -> None:
    """27.4: in a terminal too, a model name the endpoint answers with 404 model_not_found is
    the error line alone: no candidate rows, no status line left behind."""
    served = [ServedModel("fast")]
    env = {"PATH": os.environ["PATH"], "OODA_DAEMON": "0", "TERM": "xterm-256color"}
    with ReplayServer([EXAMPLES], served=served, strict_models=True) as server:
        command = [sys.executable, "-m", "ooda.agent.cli", "run", str(median), "--model",
                   "fsat", "--base-url", server.start(), "--runs-dir", str(tmp_path / "runs")]
        line = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        subprocess.run([*tmux_cmd(tmux, "send-keys", "-t", tmux), f"clear && env -i "
                        f"HOME={shlex.quote(os.environ.get('HOME', '/'))} {line} "
                        f"{shlex.join(command)}; echo EXIT=$?", "Enter"], check=True)
        done = wait_until(tmux, lambda t: re.search(r"EXIT=\d", t), timeout=120)
    assert "EXIT=2" in done and "has no model 'fsat'" in done and "it lists fast" in done
    assert "r1c" not in done and "round 1/" not in done, done  # (the command line is cleared)
