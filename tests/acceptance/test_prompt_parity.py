"""`ooda prompt` shows the choice a run makes (issue 39), from the outside: the real CLI, real
HTTP to the bundled endpoint (scripted votes on where the change belongs), a real sandbox.

A repository too large to show whole at the budget; the endpoint's context votes name a file
the model-free ranking puts low. `ooda run` and `ooda prompt --model` against the same
endpoint show the same files; `ooda prompt` without a model shows the model-free choice. The
repository counts as one too large to index whole (OODA_CONTEXT_QUICK_FILES), so both index
the part the task points at, as on a repository of tens of thousands of files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer

STATEMENT = "scale_values() gives wrong totals when the factor is negative"
BUDGET = "2500"


def ooda(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    if "OODA_HOME" in os.environ:
        env["OODA_HOME"] = os.environ["OODA_HOME"]
    # more files than this: indexed where the task points (agent/context/quick.py), as a
    # repository of tens of thousands of files is; the choice must agree there too (issue 40)
    env["OODA_CONTEXT_QUICK_FILES"] = "5"
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=cwd,
                          env={**env, "OODA_DAEMON": "0"}, capture_output=True, text=True,
                          timeout=900)


def filler(name: str, n: int) -> str:
    return "\n\n".join(f"def {name}_step_{k}(values):\n    total = 0\n    for v in values:\n"
                       f"        total += v * {k}\n    return total\n" for k in range(n))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "calc" / "__init__.py").write_text('"""Calculations."""\n')
    (root / "calc" / "scale.py").write_text(
        '"""Scaling."""\n\n\ndef scale_values(values, factor):\n'
        "    return [v * abs(factor) for v in values]\n\n\n" + filler("scale", 30))
    for k in range(8):
        (root / "calc" / f"part{k}.py").write_text(f'"""Part {k}."""\n\n\n'
                                                   + filler(f"part{k}", 30))
    (root / "tests" / "test_scale.py").write_text(
        "from calc.scale import scale_values\n\n\ndef test_negative():\n"
        "    assert scale_values([1], -2) == [-2]\n")
    return root


def served(tmp_path: Path, name: str) -> Path:
    """The scripts: the votes name calc/part6.py (context), one answer for the task."""
    script = tmp_path / f"{name}.jsonl"
    vote = "calc/part6.py::part6_step_3"
    script.write_text(json.dumps({"task": "demo/context", "answer": vote}) + "\n"
                      + json.dumps({"task": "demo", "answer": "no idea"}) + "\n")
    return script


def shown(report_files: list[dict[str, object]]) -> list[str]:
    return [str(f["path"]) for f in report_files]


@pytest.mark.slow
def test_prompt_shows_the_files_a_run_shows(repo: Path, tmp_path: Path,
                                           sandbox_name: str) -> None:
    backend_or_skip(sandbox_name)
    # the failing test named: a run given only --test-cmd learns it from the base run, which
    # `ooda prompt` does not make (docs/CONTEXT.md)
    common = ["--statement", STATEMENT, "--test-cmd", "pytest -q", "--context-tokens", BUDGET,
              "--fail-to-pass", "tests/test_scale.py::test_negative"]
    with ReplayServer([served(tmp_path, "run")]) as server:
        done = ooda("run", ".", *common, "-n", "1", "--rounds", "1", "--model", "m",
                    "--base-url", server.start(), "--runs-dir", str(tmp_path / "runs"),
                    cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    run_json = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    run_files = shown(run_json["context"]["files"])
    assert run_json["context"]["votes"]["files"][0] == "calc/part6.py"
    with ReplayServer([served(tmp_path, "prompt")]) as server:
        asked = ooda("prompt", ".", *common, "--model", "m", "--base-url", server.start(),
                     "--json", cwd=repo)
    assert asked.returncode == 0, asked.stderr
    report = json.loads(asked.stdout)
    assert shown(report["context"]) == run_files
    assert "calc/part6.py" in run_files and report["votes"]["files"][0] == "calc/part6.py"
    plain = json.loads(ooda("prompt", ".", *common, "--json", cwd=repo).stdout)
    assert "votes" not in plain and shown(plain["context"]) != run_files
