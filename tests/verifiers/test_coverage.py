"""The traced run of the tests (verifiers/coverage): per test its outcome, the repository's
lines it ran and a failure's frames; a test that loops ends at the per-test limit. Through
LocalSandbox (the repository here is the test's own) and the real Docker sandbox."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip

from ooda.agent.contracts.protocols import Sandbox
from ooda.agent.sandbox.local import LocalSandbox
from ooda.verifiers.coverage import trace_tests
from ooda.verifiers.runners.request import NotGradable, TestRequest

CODE = """\
def clamp(x, low, high):
    if x < low:
        return low
    if x > high:
        return low
    return x


def spin(n):
    while n:
        n = n
    return 0
"""
TESTS = """\
from clamp import clamp, spin


def test_inside():
    assert clamp(5, 0, 10) == 5


def test_below():
    assert clamp(-1, 0, 10) == 0


def test_above():
    assert clamp(11, 0, 10) == 10


def test_spin():
    assert spin(3) == 0
"""


def make_repo(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "clamp.py").write_text(CODE)
    (root / "tests" / "test_clamp.py").write_text(TESTS)
    (root / "pytest.ini").write_text(textwrap.dedent("""\
        [pytest]
        pythonpath = .
        """))
    return root


def check_trace(box: Sandbox) -> None:
    """test_spin is stopped by its per-test CPU limit (1 s), not by the run's 120 s: the run
    completes. CPU time, so a loaded machine does not stop the quick tests too."""
    spectrum = trace_tests(box, TestRequest(ids=("tests/test_clamp.py",), timeout_s=120),
                           per_test_s=1.0)
    assert spectrum.complete, spectrum.note
    by_id = {t.test_id.rsplit("::", 1)[1]: t for t in spectrum.traces}
    assert {k: t.outcome for k, t in by_id.items()} == {
        "test_inside": "passed", "test_below": "passed", "test_above": "failed",
        "test_spin": "timeout"}
    assert by_id["test_inside"].lines["clamp.py"] == {2, 4, 6}
    assert by_id["test_above"].lines["clamp.py"] == {2, 4, 5}
    assert ("clamp.py", 5) not in by_id["test_above"].frames  # the assert is the test's
    assert by_id["test_above"].frames[-1] == ("tests/test_clamp.py", 13)
    assert by_id["test_spin"].frames[-1][0] == "clamp.py"  # stopped inside the loop
    assert by_id["test_spin"].frames[-1][1] in (10, 11)
    assert not list((box.workspace / ".ooda").glob("*"))


def test_a_traced_run_records_lines_outcomes_and_frames(tmp_path: Path) -> None:
    check_trace(LocalSandbox(make_repo(tmp_path / "repo")))


@pytest.mark.docker
def test_a_traced_run_in_the_docker_sandbox(tmp_path: Path) -> None:
    backend = backend_or_skip("docker")
    box = backend.open(make_repo(tmp_path / "repo"))
    try:
        check_trace(box)
    finally:
        box.close()


def test_a_test_command_must_be_plain_pytest(tmp_path: Path) -> None:
    box = LocalSandbox(make_repo(tmp_path / "repo"))
    with pytest.raises(NotGradable):
        trace_tests(box, TestRequest(command="make test", timeout_s=10))
    assert trace_tests(box, TestRequest(ids=("x",)), runner_kind="django").traces == ()


def test_a_run_cut_short_keeps_the_tests_that_finished(tmp_path: Path) -> None:
    box = LocalSandbox(make_repo(tmp_path / "repo"))
    spectrum = trace_tests(box, TestRequest(ids=("tests/test_clamp.py",), timeout_s=4),
                           per_test_s=30)
    assert not spectrum.complete and "did not finish" in spectrum.note
    assert [t.test_id.rsplit("::", 1)[1] for t in spectrum.traces] == [
        "test_inside", "test_below", "test_above"]


def test_a_blocked_test_is_stopped_by_the_clock(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "tests" / "test_wait.py").write_text(
        "import time\n\n\ndef test_wait():\n    time.sleep(60)\n")
    spectrum = trace_tests(LocalSandbox(repo), TestRequest(ids=("tests/test_wait.py",),
                                                           timeout_s=60), per_test_s=0.25)
    assert spectrum.complete, spectrum.note
    assert [t.outcome for t in spectrum.traces] == ["timeout"]
