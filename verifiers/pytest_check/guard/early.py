"""End a verdict-only run as soon as pytest has decided to stop at a failure (`-x`), skipping
what only a full report needs.

A candidate judged for its verdict alone (no feedback drawn from it) runs `pytest -x` with the
tests it must make pass first: once one fails, its verdict is "failed" whatever happens next.
pytest would still tear the test down, write its reports and summary, unconfigure (two full
garbage collections) and the guard would check and sign the run: ~10-20 % of a failing
verification's CPU in the warm sandbox (bench/failing_verification). Registered by main.py
only when the host asked for it (the guard's config, `stop_at_failure`): right after pytest
marked the session to stop (the failed report logged, `session.shouldfail` set), this writes
the JUnit report as it stands (the tests run so far and the failure; junitxml's own writer),
then a marker beside it naming the failed test (and the hidden test files read so far), and ends the process with exit code 1,
without the guard's signed record.

Nothing here can make a verdict pass: the host accepts a run without a record only with this
marker, a JUnit report in which the named test failed, and exit code 1, and such a run is
always failed (verifiers/pytest_check/run.py, verifiers/tests_stage.py). Code under test that
fakes the marker only fails itself. The marker holds no secret and this module nothing the
record's signature depends on.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

_exit = os._exit  # saved before the code under test could replace them
_open = os.open
_write = os.write
_close = os.close

def marker_path(junit_path: str) -> str | None:
    """Where the marker of a run whose JUnit report is `junit_path` goes: beside it,
    `stopped-NAME.json` for `NAME.xml` (None: not an .xml path). The host reads it by the same
    rule (verifiers/pytest_check/run.py, `stopped_name`)."""
    folder, name = os.path.split(junit_path)
    if not name.endswith(".xml"):
        return None
    return os.path.join(folder, f"stopped-{name[: -len('.xml')]}.json")


class StopAtFailure:
    """The plugin (one instance per run)."""

    def __init__(self, hidden_reads: list[str]) -> None:
        self.session: Any = None
        self.hidden_reads = hidden_reads
        """The task's hidden test files the candidate's code read so far (provenance.py's
        list, which the record would carry): the host then keeps their text out of the
        verdict, as for a run that went to its end."""

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: Any) -> None:
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: Any) -> None:
        """After every other plugin logged the report (junitxml, the terminal, the session's
        count of failures, which sets `shouldfail` under -x)."""
        session = self.session
        if session is None or not getattr(report, "failed", False) or not session.shouldfail:
            return
        xml = _junit(session.config)
        marker = marker_path(str(getattr(xml, "logfile", ""))) if xml is not None else None
        if xml is None or marker is None:
            return  # the run ends as usual
        try:
            xml.pytest_sessionfinish()
        except Exception:  # noqa: BLE001 - the usual end writes it
            return
        body = json.dumps({"nodeid": str(report.nodeid),
                           "hidden_reads": [str(p) for p in self.hidden_reads[:10]]}).encode()
        try:
            fd = _open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError:
            return
        try:
            _write(fd, body)
        finally:
            _close(fd)
        _say(session.config, f"stopped at the first failure ({report.nodeid}): the verdict is "
                             "failed; the rest of the run and its reports skipped")
        _exit(1)


def _junit(config: Any) -> Any:
    """pytest's JUnit writer of this run (None: none)."""
    junitxml = sys.modules.get("_pytest.junitxml")
    kind = getattr(junitxml, "LogXML", None)
    if kind is None:
        return None
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, kind):
            return plugin
    return None


def _say(config: Any, line: str) -> None:
    """One line on pytest's terminal, flushed (the output the host keeps as the run's log)."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    try:
        if terminal is not None:
            terminal.write_line("")
            terminal.write_line(line)
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: BLE001 - the line is for people; the marker is what counts
        pass
