"""The live display: tokens counted while they stream, Aider-style token phrases, and off a
terminal nothing cropped or wrapped."""

from __future__ import annotations

import io

from rich.console import Console

from ooda.agent.app.charts import human_tokens, money
from ooda.agent.app.progress import RunProgress, tokens_phrase
from ooda.agent.core.loop import Attempt


def test_token_phrases_read_like_aider() -> None:
    assert human_tokens(611) == "611" and human_tokens(6697) == "6.7k"
    assert tokens_phrase(6697, 611, None) == "tokens 6.7k sent, 611 received"
    assert tokens_phrase(6697, 611, 0.00312).endswith("cost $0.0031")
    assert money(0.0000004) != "$0.00" and money(12.5) == "$12.50"


def test_streamed_tokens_and_cost_are_counted_before_the_answer_ends() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, soft_wrap=True)
    progress = RunProgress("a-task-with-a-long-name", 600, 3, console, (3.0, 15.0))
    attempt = Attempt("r1c1", 1, None, [])
    with progress:
        progress(attempt, "generating")
        attempt.streamed_chars = 400  # ~100 tokens arrived
        assert progress.tokens() == (0, 100)
        assert progress.cost() == 100 * 15.0 / 1e6
        attempt.reason = "pytest failed: " + "x" * 150
        attempt.status = "failed"
        progress(attempt, "failed")
    lines = out.getvalue().splitlines()
    assert any(line.endswith("x" * 150) for line in lines), lines  # not wrapped at 80
    assert "tokens 0 sent, 100 received, cost $0.0015" in lines[-1]


def test_eval_display_counts_running_tasks_and_lists_why_tasks_failed() -> None:
    from ooda.agent.app.eval_progress import EvalProgress

    out = io.StringIO()
    console = Console(file=out, width=80, soft_wrap=True)
    bar = EvalProgress(console, "e1", 3, (1.0, 2.0))
    unresolved = {"task_id": "median", "status": "unresolved", "reason": "rounds exhausted",
                  "last_reason": "pytest failed: 1 of 6 required tests did not pass:\nFAILED "
                  "tests/test_m.py::test_even\n  E       assert 2.0 == 2.5",
                  "tokens": {"prompt": 1000, "completion": 500}, "wall_s": 3.0}
    error = {"task_id": "gcd", "status": "error", "reason": "endpoint unreachable",
             "tokens": {"prompt": 0, "completion": 0}, "wall_s": 1.0}
    with bar.shown():
        bar.start("median")
        bar.start("gcd")
        bar.start("word_count")
        assert "running: median" in bar.render().renderables[1].plain  # type: ignore[union-attr]
        bar.note([unresolved])
        bar.note([unresolved, error])
    text = out.getvalue()
    assert "rounds exhausted; last: pytest failed: 1 of 6 required tests did not pass: " \
        "tests/test_m.py::test_even: assert 2.0 == 2.5" in text
    assert "gcd  1.0s  endpoint unreachable" in text
    last = text.splitlines()[-2:]
    assert "2/3 done  resolved 0  unresolved 1  errors 1" in last[0]
    assert "cost $0.0020" in last[0] and "running: word_count" in last[1]
