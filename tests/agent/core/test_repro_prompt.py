"""The reproduction-test request and its parser (agent/core/repro_prompt.py)."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.contracts.protocols import REPRO_REQUEST_LINE
from ooda.agent.core.repro_prompt import parse_reproduction, reproduction_prompt, script_key
from ooda.tasks.loader import Task


def test_the_request_shows_the_issue_and_the_code_and_asks_for_one_script(
    tmp_path: Path,
) -> None:
    (tmp_path / "calc.py").write_text("def mean(xs):\n    return sum(xs) // len(xs)\n")
    task = Task(id="calc-1", statement="mean([1, 2]) returns 1, not 1.5", repo=tmp_path)
    system, user = reproduction_prompt(task)
    assert system["role"] == "system" and "AssertionError" in system["content"]
    text = user["content"]
    assert text.splitlines()[:2] == [REPRO_REQUEST_LINE, "Task id: calc-1"]
    assert "mean([1, 2]) returns 1, not 1.5" in text and "return sum(xs) // len(xs)" in text
    assert "```python block" in text


def test_the_script_is_the_last_python_block_that_parses() -> None:
    answer = ("Here it is.\n```python\nfrom calc import mean\nassert mean([1, 2]) == 1.5\n```\n"
              "Or, broken:\n```python\ndef x(:\n```\n")
    assert parse_reproduction(answer) == "from calc import mean\nassert mean([1, 2]) == 1.5\n"
    assert parse_reproduction("```\nassert 1 == 2\n```") == "assert 1 == 2\n"
    assert parse_reproduction("no code at all") is None
    assert parse_reproduction("```python\n```") is None


def test_scripts_that_differ_in_layout_share_a_key() -> None:
    one = "x = f( 1 )  # call\nassert x == 2\n"
    two = "x = f(1)\n\nassert x == 2\n"
    assert script_key(one) == script_key(two) != script_key("x = f(2)\nassert x == 2\n")
