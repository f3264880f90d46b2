"""Fault localisation (agent/mutation/localise.py): Ochiai's ranking, the tracebacks' weight, a
test stopped for its time, and the failure text when there is no spectrum."""

from __future__ import annotations

from ooda.agent.contracts.spectrum import Spectrum, TestTrace
from ooda.agent.mutation.localise import frames_in, localise


def trace(test_id: str, outcome: str, lines: dict[str, set[int]],
          frames: tuple[tuple[str, int], ...] = ()) -> TestTrace:
    return TestTrace(test_id, outcome, {p: frozenset(ls) for p, ls in lines.items()}, frames)


def editable(path: str) -> bool:
    return not path.startswith("tests/")


def test_lines_only_the_failing_tests_run_rank_first() -> None:
    spectrum = Spectrum((
        trace("t::a", "passed", {"m.py": {1, 2, 3}, "tests/t.py": {5}}),
        trace("t::b", "passed", {"m.py": {1, 2, 4}}),
        trace("t::c", "failed", {"m.py": {1, 2, 5}, "tests/t.py": {9}}),
        trace("t::d", "failed", {"m.py": {1, 5, 6}}),
    ))
    ranked = localise(spectrum, editable)
    assert [(s.path, s.line) for s in ranked[:2]] == [("m.py", 5), ("m.py", 1)]
    assert ranked[0].score == 1.0 and ranked[0].failing == 2 and ranked[0].passing == 0
    assert all(s.path == "m.py" for s in ranked)  # the tests' own lines are not suspects
    assert {s.line for s in ranked} == {1, 2, 5, 6}  # never run by a failing test: left out


def test_a_traceback_raises_a_line_among_equals() -> None:
    lines = {"m.py": {1, 2, 3}}
    spectrum = Spectrum((trace("t::a", "failed", lines, (("tests/t.py", 4), ("m.py", 2))),))
    assert [s.line for s in localise(spectrum, editable)] == [2, 1, 3]


def test_a_test_stopped_for_its_time_fails_unless_it_is_known_to_pass() -> None:
    spectrum = Spectrum((
        trace("t.py::slow", "timeout", {"m.py": {7}}),
        trace("t.py::bad", "failed", {"m.py": {8}}),
    ))
    assert {s.line for s in localise(spectrum, editable)} == {7, 8}
    assert {s.line for s in localise(spectrum, editable, passing_ids=["t.py"])} == {8}


def test_without_a_spectrum_the_failure_text_is_read() -> None:
    text = ('Traceback (most recent call last):\n  File "tests/t.py", line 3, in test_x\n'
            '  File "pkg/m.py", line 10, in f\n  File "pkg/m.py", line 20, in g\n'
            "ValueError\npkg/m.py:20: ValueError\n")
    assert frames_in(text)[:3] == [("tests/t.py", 3), ("pkg/m.py", 10), ("pkg/m.py", 20)]
    ranked = localise(Spectrum(), editable, failure_text=text)
    assert [(s.path, s.line) for s in ranked] == [("pkg/m.py", 20), ("pkg/m.py", 10)]
    assert localise(Spectrum(), editable) == []
