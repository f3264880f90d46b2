"""headline(): a failure's one line names the first failing test and its assertion line."""

from __future__ import annotations

from ooda.agent.support.reasons import headline

PYTEST = """2 of 6 required tests did not pass:
FAILED tests/test_median.py::test_even_length
  >       assert median([4, 1, 3, 2]) == 2.5
  E       assert 2.3333333333333335 == 2.5
  E        +  where 2.3333333333333335 = median([4, 1, 3, 2])
  tests/test_median.py:17: AssertionError
FAILED tests/test_median.py::test_two_values
  E       IndexError: list index out of range
"""


def test_a_test_run_names_the_first_failing_test_its_assertion_and_where() -> None:
    assert headline(PYTEST) == (
        "2 of 6 required tests did not pass: tests/test_median.py::test_even_length: "
        "assert 2.3333333333333335 == 2.5 (tests/test_median.py:17)"
    )


def test_a_missing_test_keeps_its_explanation() -> None:
    text = "1 of 2 required tests did not pass:\nMISSING t.py::x: pytest could not find it"
    assert headline(text).endswith("t.py::x: pytest could not find it")


def test_a_plain_line_is_kept_and_empty_stays_empty() -> None:
    assert headline("median.py:3:1: F401 unused import\nmore") == "median.py:3:1: F401 unused import"
    assert headline("") == ""


def test_the_verdict_reason_and_the_feedback_headline_name_the_test() -> None:
    from ooda.agent.contracts.protocols import VerifierResult
    from ooda.agent.core.records import Attempt
    from ooda.agent.verify.watched import verdict_from

    verdict = verdict_from([VerifierResult("pytest", "failed", 0.1, PYTEST)], ["median.py"])
    assert verdict.reason.startswith("pytest failed: 2 of 6 required tests did not pass: "
                                     "tests/test_median.py::test_even_length: assert")
    attempt = Attempt("r1c1", 1, None, [], status="failed", reason=verdict.reason,
                      verdict=verdict)
    assert "test_even_length: assert 2.3333333333333335 == 2.5" in attempt.feedback_for_child([])
