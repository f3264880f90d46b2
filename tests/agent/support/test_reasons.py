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
