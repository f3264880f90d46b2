"""agent/models/answer_styles.py: scripted fixes rewritten as chat models write them, and read back
by agent/edits to the same files."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.edits import parse_edits
from ooda.agent.models.answer_styles import files_in_prompt, restyle
from ooda.agent.models.server import ReplayServer

PROMPT = (
    "Task id: t\n\n# Relevant files (current contents)\n\nm.py\n```python\nimport math\n\n\n"
    "def gcd(a, b):\n    while b:\n        a, b = a % b, b\n    return a\n\n\n"
    "def lcm(a, b):\n    return a * b // gcd(a, b)\n\n```\n"
)
FIX = "m.py\n<<<<<<< SEARCH\n        a, b = a % b, b\n=======\n        a, b = b, a % b\n>>>>>>> REPLACE\n"


# A whole file of imports and definitions only reads as those definitions (same result).
@pytest.mark.parametrize(("style", "fmt"), [("whole-file", "definitions"),
                                            ("definitions", "definitions"),
                                            ("as-is", "search_replace")])
def test_restyled_answers_parse_to_the_same_fix(style: str, fmt: str) -> None:
    shown = files_in_prompt(PROMPT)
    expected = parse_edits(FIX, shown.get).files
    answer = restyle(FIX, PROMPT, style)
    if style != "as-is":
        assert "<<<<<<<" not in answer and "```python" in answer
    parsed = parse_edits(answer, shown.get, lambda: list(shown))
    assert parsed.edit_format == fmt
    assert parsed.files == expected


def test_definitions_style_quotes_the_buggy_function_first() -> None:
    answer = restyle(FIX, PROMPT, "definitions")
    assert answer.index("a, b = a % b, b") < answer.index("a, b = b, a % b")
    assert "m.py" not in answer


def test_an_answer_that_does_not_apply_is_served_unchanged() -> None:
    assert restyle("no edits here", PROMPT, "whole-file") == "no edits here"


def test_unknown_style_is_a_usage_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match="answer style"):
        ReplayServer([tmp_path], answer_as="json")
    (tmp_path / "replay.jsonl").write_text('{"answer": "x"}\n')
    proc = subprocess.run([sys.executable, "-m", "ooda.agent.cli", "serve", "--replay",
                           str(tmp_path), "--answer-as", "json"], capture_output=True,
                          text=True, timeout=60, env={"OODA_DAEMON": "0", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and "answer style" in proc.stderr
    assert "Traceback" not in proc.stderr
