"""A candidate judged for its verdict only (no feedback follows: the last round, --model mutate)
meets the tests before ruff: most candidates fail there, and ruff's verdict is not needed then;
one that passes the tests is still judged by ruff; the tests earlier candidates failed run first
(agent/verify/verifier.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ooda.agent.contracts.protocols import Verdict
from ooda.agent.edits import make_patch
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import load_task

EXAMPLES = Path(__file__).resolve().parents[3] / "tasks" / "examples"


def test_the_tests_come_before_ruff_when_only_the_verdict_matters(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "median", tmp_path / "median")
    task = load_task(tmp_path / "median")
    source = (task.repo / "median.py").read_text()
    unfixed = make_patch({"median.py": source.replace("import Sequence\n",
                                                      "import Sequence\nimport os\n")},
                         lambda path: source)
    fixed = make_patch({"median.py": source.replace(
        "import Sequence\n", "import Sequence\nimport os\n").replace(
        "ordered[middle] + ordered[middle + 1]", "ordered[middle - 1] + ordered[middle]")},
        lambda path: source)
    # the fix, but an empty sequence no longer raises: the third pass_to_pass test fails
    breaks = make_patch({"median.py": source.replace(
        "ordered[middle] + ordered[middle + 1]", "ordered[middle - 1] + ordered[middle]").replace(
        '    if not values:\n        raise ValueError("median() of an empty sequence")\n', "")},
        lambda path: source)
    _, verifier = make_plan(task, lambda p: TaskVerifier(p, LocalBackend(), tmp_path / "work"))
    try:
        quick = verifier.verify(unfixed, verdict_only=True)
        full = verifier.verify(unfixed)
        passing_tests = verifier.verify(fixed, verdict_only=True)
        first_break = verifier.verify(breaks, verdict_only=True)
        second_break = verifier.verify(breaks, verdict_only=True)
    finally:
        verifier.close()
    assert [r.name for r in quick.results] == ["syntax", "tampering", "pytest"]
    assert quick.status == "failed" and quick.reason.startswith("pytest")
    assert [r.name for r in full.results][:3] == ["syntax", "tampering", "ruff"]
    assert full.reason.startswith("ruff")
    assert [r.name for r in passing_tests.results][:4] == ["syntax", "tampering", "pytest",
                                                           "ruff"]
    assert passing_tests.status == "failed" and passing_tests.reason.startswith("ruff")
    # the tests earlier candidates failed run first of their group: -x stops there sooner
    empty = "tests/test_median.py::test_empty_raises"
    first, second = required(first_break), required(second_break)
    assert first_break.status == second_break.status == "failed"
    assert list(first) == [*task.fail_to_pass, *task.pass_to_pass] and first[empty] == "failed"
    assert list(second)[:3] == [*task.fail_to_pass, empty] and second[empty] == "failed"
    assert all(outcome == "missing" for test, outcome in second.items()
               if test in task.pass_to_pass and test != empty)


def required(verdict: Verdict) -> dict[str, object]:
    """The tests stage's outcome of each required test, in the order they were asked for."""
    tests = next(r for r in verdict.results if r.name == "pytest")
    return dict(tests.details["required"])  # type: ignore[call-overload]
