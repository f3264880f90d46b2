"""`--environment` through the real command line: the flag, OODA_ENVIRONMENT and the config
file (an `[environment]` table in ooda.toml stands for the file), shown by `ooda config`;
bad values are exit 2, one line (no sandbox: every case ends before one would start)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import MEDIAN, ooda


def shown(cwd: Path, command: str = "run", env: dict[str, str] | None = None
          ) -> dict[str, object]:
    done = ooda("config", command, "--json", cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    [row] = [r for r in json.loads(done.stdout)["options"] if r["option"] == "--environment"]
    return dict(row)


def test_config_flag_and_environment_variable(tmp_path: Path) -> None:
    assert shown(tmp_path) == {"option": "--environment", "value": "auto", "source": "default",
                               "env": "OODA_ENVIRONMENT"}
    config = tmp_path / "ooda.toml"
    config.write_text('samples = 2\n[environment]\npython = "3.9"\n')
    assert shown(tmp_path) == {"option": "--environment", "value": str(config),
                               "source": str(config), "env": "OODA_ENVIRONMENT"}
    assert shown(tmp_path, "ci")["value"] == str(config)
    (tmp_path / "envs").mkdir()  # (a file that is not there is refused, as `ooda run` does)
    (tmp_path / "envs" / "py39.toml").write_text('[environment]\npython = "3.9"\n')
    config.write_text('environment = "envs/py39.toml"\n')  # relative to the config file
    assert shown(tmp_path)["value"] == str(tmp_path / "envs" / "py39.toml")
    row = shown(tmp_path, env={"OODA_ENVIRONMENT": "none"})
    assert (row["value"], row["source"]) == ("none", "OODA_ENVIRONMENT")
    config.write_text('[run]\nenvironment = { python = "3.9" }\n')
    bad = ooda("config", cwd=tmp_path)
    assert bad.returncode == 2 and "an [environment] table goes at the top level" in bad.stderr


def test_bad_values_exit_2_with_one_line(tmp_path: Path) -> None:
    bad = ooda("run", str(MEDIAN), "--model", "replay", "--environment", "bogus")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "ooda: error: --environment 'bogus': give auto, none, or a TOML file holding an "
        "[environment] table (no such file)"]
    env = tmp_path / "env.toml"
    env.write_text('[environment]\npython = "3.9"\nrunner = { kind = "nose" }\n')
    bad = ooda("ci", "--repo", str(tmp_path), "--test-cmd", "pytest", "--model", "m",
               "--environment", str(env), "--out", str(tmp_path / "out"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "unknown test runner 'nose'" in bad.stderr
