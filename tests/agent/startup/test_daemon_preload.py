"""What the daemon prepares before it forks (agent/startup/daemon.py `preload`) is everything a
served `ooda run` needs: a worker that imports a module, builds an option parser or runs a
subprocess to learn the platform pays for it on every command.

The command runs in one process after `preload()`, as a worker runs it after the fork (real
Docker, the bundled endpoint over HTTP); only what it imported is checked, never a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import json, subprocess, sys
from ooda.agent.startup import daemon, entry
daemon.preload()
before = set(sys.modules)
ran = []
real_popen = subprocess.Popen.__init__
def popen(self, args, *rest, **kwargs):
    ran.append(args if isinstance(args, str) else list(map(str, args)))
    real_popen(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = popen
report, sys.argv = sys.argv[1], ["ooda", *sys.argv[2:]]
code = entry.run_here()
with open(report, "w") as out:
    json.dump({"code": code, "new": sorted(set(sys.modules) - before), "ran": ran}, out)
"""


def test_a_run_after_the_preload_imports_nothing_more(median: Path, tmp_path: Path) -> None:
    backend_or_skip("docker")
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_DAEMON"))}
    env.update(OPENAI_API_KEY="k", OODA_DAEMON="0")
    with ReplayServer([median]) as server:
        proc = subprocess.run(
            [sys.executable, "-P", "-c", SCRIPT, str(report), "run", str(median), "--model", "m",
             "--base-url", server.start(), "-n", "2", "--rounds", "3",
             "--runs-dir", str(tmp_path / "runs"), "--json"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "passed"
    found = json.loads(report.read_text())
    assert found["code"] == 0
    # the run's own processes (git, the sandboxes' engine calls) are fine; the platform probe
    # the model client's headers would run (`uname -p`) was made before the fork
    assert not [args for args in found["ran"] if "uname" in str(args)], found["ran"]
    assert found["new"] == [], found["new"]


BUILT = """
from openai.types import Model
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta
from ooda.agent.startup import daemon
read = (Model, ChatCompletionChunk, Choice, ChoiceDelta)
before = [t.__pydantic_complete__ for t in read]
daemon.preload()
print(before, [t.__pydantic_complete__ for t in read])
"""


def test_the_sdk_response_types_are_built_before_the_fork() -> None:
    """The openai SDK builds the validators of what it reads (the model listing, streamed chat
    chunks) on first use: the preload runs one listing and one streamed chat, answered in
    memory, so that a worker's first answer does not pay for it."""
    proc = subprocess.run([sys.executable, "-P", "-c", BUILT], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("] [") == ["[False, False, False, False", "True, True, True, True]\n"]
