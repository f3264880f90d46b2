"""Feedback that widens the view: code a failure names that the model was not shown."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.context import choose_context
from ooda.agent.context.widen import widen
from ooda.tasks.loader import Task


def test_a_frame_in_unseen_code_is_shown_once(big_repo: Path) -> None:
    task = Task(id="t", statement="Polygon.area() is negative for clockwise points",
                repo=big_repo, fail_to_pass=["tests/test_shapes.py"])
    views = choose_context(task, 2500).views()
    failure = (
        "tests/test_shapes.py:5: in test_area_clockwise\n"
        '  File "/work/geom/other3.py", line 9, in other3_helper_1\n'
        "    total += v * 1\n"
        "ImportError: cannot import name 'pairs_of' from 'geom.util'\n")
    first = widen(big_repo, views, failure)
    assert "geom/other3.py\n```python" in first.text
    assert "def other3_helper_1(values):" in first.text
    assert "tests/test_shapes.py\n```" not in first.text  # tests are never shown
    assert 9 in first.revealed["geom/other3.py"]
    shown = {path: views[path].reveal(lines) if path in views else views.get(path)
             for path, lines in first.revealed.items()}
    assert all(v is None or not (v.hidden_lines() & first.revealed[p])
               for p, v in shown.items())
    nothing = widen(big_repo, views, "AssertionError: assert -1.0 == 1")
    assert nothing.text == "" and not nothing.revealed
