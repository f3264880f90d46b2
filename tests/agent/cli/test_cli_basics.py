"""The usual flags and the config file (issue 15.9), through the real command line (no
sandbox needed: every case ends before one would start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MEDIAN = ROOT / "tasks" / "examples" / "median"


def ooda(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OODA_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=cwd,
                          env={**base, "OODA_DAEMON": "0", **(env or {})},
                          capture_output=True, text=True, timeout=60)


def test_version_short_help_and_completion() -> None:
    version = ooda("--version")
    assert version.returncode == 0 and version.stdout.startswith("ooda ")
    helped = ooda("-h")
    assert helped.returncode == 0
    for flag in ("--verbose", "--quiet", "--version", "--install-completion", "config"):
        assert flag in helped.stdout
    run_help = ooda("run", "-h").stdout
    assert "-n, --samples N" in run_help and "[docker|bwrap|local]" in run_help
    assert "OODA_TIME_BUDGET" in run_help and "$OPENAI_BASE_URL" in run_help
    assert "<bool>" not in run_help and "<str>" not in run_help and " ." not in run_help


def test_bare_ooda_prints_help_and_exits_2() -> None:
    bare = ooda()
    assert bare.returncode == 2
    assert "Usage:" in bare.stdout + bare.stderr


def test_precedence_flag_over_env_over_config_over_default(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.ooda]\nsamples = 0\nrounds = 5\n'
                                             '[tool.ooda.eval]\nrounds = 6\n')
    args = ("run", str(MEDIAN), "--model", "replay")
    config_only = ooda(*args, cwd=tmp_path)
    assert config_only.returncode == 2 and "--samples must be at least 1 (got 0)" in \
        config_only.stderr
    env = ooda(*args, cwd=tmp_path, env={"OODA_SAMPLES": "-3"})
    assert env.returncode == 2 and "(got -3)" in env.stderr
    flag = ooda(*args, "--samples", "-5", cwd=tmp_path, env={"OODA_SAMPLES": "-3"})
    assert flag.returncode == 2 and "(got -5)" in flag.stderr
    shown = ooda("config", "eval", "--json", cwd=tmp_path, env={"OODA_TIME_BUDGET": "30"})
    rows = {r["option"]: r for r in json.loads(shown.stdout)["options"]}
    assert rows["--rounds"]["value"] == 6 and rows["--rounds"]["source"].endswith("pyproject.toml")
    assert rows["--time-budget"]["source"] == "OODA_TIME_BUDGET"
    assert rows["--temperature"]["source"] == "default" and rows["--temperature"]["value"] == 0.8


def test_an_unknown_config_key_is_exit_2_with_a_suggestion(tmp_path: Path) -> None:
    (tmp_path / "ooda.toml").write_text("sampels = 2\n")
    bad = ooda("config", cwd=tmp_path)
    assert bad.returncode == 2
    assert "unknown option 'sampels' (did you mean 'samples'?)" in bad.stderr
