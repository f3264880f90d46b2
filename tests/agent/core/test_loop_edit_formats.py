"""The loop with answers in other edit formats (fake model and verifier from test_loop):
attempts.jsonl records the format and the invalid reason, hostile text is an invalid edit,
and the feedback for a block that could not be placed names what matched nothing."""

from __future__ import annotations

from pathlib import Path

from loop_fakes import FakeModel, FakeVerifier, run_loop

from ooda.agent.core.records import AttemptRecord

BARE_FUNCTION = (
    "The function subtracts instead of adding. Here is the corrected version:\n\n"
    "```python\ndef add(a, b):\n    return a + b\n```\n\nThat fixes it.\n"
)
UNKNOWN_NAME = "```python\ndef add_numbers(a, b):\n    return a + b\n```\n"


def test_a_bare_function_is_read_as_definitions_and_passes(task, tmp_path: Path) -> None:  # noqa: F811
    result, lines, _, _ = run_loop(task, FakeModel({1: [BARE_FUNCTION]}), FakeVerifier(),
                                   tmp_path, samples=1, rounds=1)
    assert result.status == "passed"
    assert lines[0]["edit_format"] == "definitions" and lines[0]["invalid_reason"] is None


def test_hostile_text_is_an_invalid_edit_every_round(task, tmp_path: Path) -> None:  # noqa: F811
    hostile = "```" + " " * 5_000 + "`\ncalc.py\n<<<<<<< SEARCH\n\ud800\n"
    result, lines, _, _ = run_loop(task, FakeModel({1: [hostile]}), FakeVerifier(), tmp_path,
                                   samples=1, rounds=2)
    assert result.status != "error"
    assert [x["status"] for x in lines] == ["invalid_edit", "invalid_edit"]
    assert {x["invalid_reason"] for x in lines} == {"invalid_text"}


def test_feedback_names_the_definitions_that_matched_nothing(task, tmp_path: Path) -> None:  # noqa: F811
    model = FakeModel({1: [UNKNOWN_NAME], 2: [BARE_FUNCTION]})
    result, lines, _, log = run_loop(task, model, FakeVerifier(), tmp_path, samples=1, rounds=2)
    assert result.status == "passed"
    assert lines[0]["status"] == "invalid_edit"
    assert lines[0]["invalid_reason"] == "unplaced_definitions"
    assert "add_numbers" in lines[0]["reason"] and "calc.py" in lines[0]["reason"]
    assert lines[1]["edit_format"] == "definitions"


def test_eval_figures_count_answers_per_format_and_invalid_reason() -> None:
    from ooda.agent.app import metrics
    from ooda.agent.app.report import eval_markdown

    attempts = [AttemptRecord.from_json(a) for a in (
        {"status": "passed", "edit_format": "definitions"},
        {"status": "failed", "edit_format": "search_replace"},
        {"status": "invalid_edit", "edit_format": None, "invalid_reason": "no_match"},
        {"status": "invalid_edit", "edit_format": None, "invalid_reason": "no_match"},
        {"status": "cancelled", "edit_format": None},
    )]
    stats = metrics.attempt_stats(attempts)
    assert stats["edit_formats"] == {"invalid": 2, "definitions": 1, "search_replace": 1}
    assert stats["invalid_reasons"] == {"no_match": 2}
    summary = metrics.summarize([{**stats, "status": "resolved"}, {**stats, "status": "unresolved"}],
                                total=2, samples=1)
    assert summary["edit_formats"]["invalid"] == 4 and summary["invalid_reasons"] == {"no_match": 4}
    report = eval_markdown(summary, [])
    assert "| no_match | 4 |" in report and "| definitions | 2 |" in report
    # 27.8: formats and reasons are two tables, not rows of one
    formats, reasons = report.split("## Answers by edit format")[1].split(
        "## Invalid answers by reason")
    assert "| edit format | answers |" in formats and "no_match" not in formats
    assert "| reason | answers |" in reasons and "definitions" not in reasons
