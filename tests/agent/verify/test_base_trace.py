"""The task verifier's traced run of the base (agent/verify/base_trace.py): the median example's
bug is the first suspect, the tests are not editable, and the hidden tests' files neither."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from ooda.agent.contracts.spectrum import TracesBase
from ooda.agent.edits import make_patch
from ooda.agent.mutation.localise import localise
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import load_task

EXAMPLES = Path(__file__).resolve().parents[3] / "tasks" / "examples"


def first_suspects(backend: Any, tmp_path: Path) -> list[tuple[str, int]]:
    shutil.copytree(EXAMPLES / "median", tmp_path / "median")
    task = load_task(tmp_path / "median")
    _, verifier = make_plan(task, lambda p: TaskVerifier(p, backend, tmp_path / "work"))
    try:
        assert isinstance(verifier, TracesBase)
        trace = verifier.trace_base(deadline=time.monotonic() + 120)
    finally:
        verifier.close()
    assert trace.spectrum.complete, trace.spectrum.note
    assert trace.editable("median.py") and not trace.editable("tests/test_median.py")
    assert not trace.editable("conftest.py") and not trace.editable("README.md")
    assert "tests/test_median.py::test_odd_length" in trace.passing
    ranked = localise(trace.spectrum, trace.editable, passing_ids=trace.passing)
    return [(s.path, s.line) for s in ranked]


def test_the_median_bug_is_the_first_suspect_locally(tmp_path: Path) -> None:
    assert first_suspects(LocalBackend(), tmp_path)[0] == ("median.py", 14)


@pytest.mark.docker
def test_the_median_bug_is_the_first_suspect_in_docker(docker: Any, tmp_path: Path) -> None:
    assert first_suspects(docker, tmp_path)[0] == ("median.py", 14)


def test_a_test_time_limit_stops_a_looping_candidate_early(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "median", tmp_path / "median")
    task = load_task(tmp_path / "median")
    _, verifier = make_plan(task, lambda p: TaskVerifier(p, LocalBackend(), tmp_path / "work"))
    source = (task.repo / "median.py").read_text()
    looping = source.replace("    ordered = sorted(values)\n",
                             "    ordered = sorted(values)\n    while True:\n        pass\n")
    loops = make_patch({"median.py": looping}, lambda path: source)
    try:
        verifier.limit_test_time(3)
        check = verifier._check(["median.py"])  # the tests' own limit; the other stages keep theirs
        assert check.tests_timeout_s == 3 and check.timeout_s == verifier.plan.stages.timeout_s
        started = time.monotonic()
        verdict = verifier.verify(loops, verdict_only=True)
    finally:
        verifier.close()
    assert verdict.status == "timeout", verdict.reason
    assert time.monotonic() - started < 30
