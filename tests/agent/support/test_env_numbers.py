"""The numbers users set through OODA_* variables: each setting read through
support/env_numbers.positive_from_env when it is used (never at import), so that a bad value
is one line and exit 2 wherever it is read."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.sandbox import bwrap
from ooda.agent.sandbox.docker import backend, launch
from ooda.agent.startup import daemon

ROOT = Path(__file__).resolve().parents[3]
READERS: dict[str, tuple[Callable[[], float], float]] = {
    "OODA_SANDBOX_START_TIMEOUT": (backend.start_timeout_s, 120.0),
    "OODA_SANDBOX_CPUS": (launch.cpus, 1.0),
    "OODA_BWRAP_UID_BASE": (bwrap.uid_base, 1_700_000),
    "OODA_DAEMON_IDLE_S": (daemon.idle_exit_s, 1800.0),
}


@pytest.mark.parametrize("name", list(READERS))
def test_each_setting_is_read_when_used_and_a_bad_value_is_a_usage_error(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    read, default = READERS[name]
    monkeypatch.delenv(name, raising=False)
    assert read() == default
    monkeypatch.setenv(name, "7")
    assert read() == 7
    for bad in ("abc", "0", "-1", "inf"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(UsageError, match=name):
            read()


def test_a_bad_build_timeout_is_a_usage_error(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    from ooda.agent.sandbox.environments import builder

    monkeypatch.setenv("OODA_ENV_BUILD_TIMEOUT", "an hour")
    with pytest.raises(UsageError, match="OODA_ENV_BUILD_TIMEOUT='an hour'"):
        builder.ensure_env(None, None)  # type: ignore[arg-type]


def test_a_bad_value_is_one_line_and_exit_2_from_the_command_line(tmp_path: Path) -> None:
    median = ROOT / "tasks" / "examples" / "median"
    done = subprocess.run(
        [sys.executable, "-m", "ooda.agent.cli", "verify", str(median), "--patch",
         str(median / "gold.diff"), "--sandbox", "docker"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OODA_SANDBOX_CPUS": "two"},
        capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (
        2, "ooda: error: OODA_SANDBOX_CPUS='two': give a positive number of CPUs\n")
