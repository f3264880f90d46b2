"""verifiers/hidden.py: the hidden tests' lines (tasks/hidden.py's account of what a test patch
hides) kept out of what goes back to the model, whatever form a candidate puts them in, while
pytest's own account of a failure (values, ids) stays."""

from __future__ import annotations

import base64
from pathlib import Path

from ooda.tasks.hidden import hidden_tests
from ooda.tasks.loader import Task
from ooda.verifiers.hidden import MARKER, HiddenText

PATCH = """\
diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1,3 +1,7 @@
 from calc import add
+
+
+def test_secret() -> None:
+    assert add(40, 2) == 42, "forty-two from the secret inputs"
 def test_add() -> None:
     assert add(2, 3) == 5
"""
BASE = "from calc import add\ndef test_add() -> None:\n    assert add(2, 3) == 5\n"
SECRET = '    assert add(40, 2) == 42, "forty-two from the secret inputs"'


def hidden(root: Path) -> HiddenText:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_calc.py").write_text(BASE)
    task = Task(id="calc", statement="add() subtracts", repo=root, test_patch=PATCH)
    return HiddenText(hidden_tests(task).lines)


def test_added_lines_are_hidden_the_base_s_are_not(tmp_path: Path) -> None:
    text = hidden(tmp_path)
    assert text.holds(SECRET) and text.holds("def test_secret() -> None:")
    assert not text.holds("    assert add(2, 3) == 5")  # the base holds it: the model saw it
    assert not HiddenText()  # no test patch, nothing to hide


def test_every_form_of_a_hidden_line_is_withheld(tmp_path: Path) -> None:
    text = hidden(tmp_path)
    encoded = base64.b64encode(SECRET.encode()).decode()
    feedback = "\n".join([
        "1 of 2 required tests did not pass:",
        "FAILED tests/test_calc.py::test_secret",
        "  E   AssertionError: " + SECRET.strip(),
        "  E   " + SECRET.strip().upper().replace(" ", "  "),
        "  E   " + SECRET.strip()[::-1],
        "  E   AssertionError: " + encoded,
        "  E   assert 41 == 42",
        "  E    +  where 41 = add(40, 2)",
    ])  # fmt: skip
    out = text.withhold(feedback)
    assert "forty-two" not in out and encoded not in out and SECRET.strip()[::-1] not in out
    assert out.count(MARKER) == 1  # a run of withheld lines is one marker
    assert "FAILED tests/test_calc.py::test_secret" in out
    assert "assert 41 == 42" in out and "where 41 = add(40, 2)" in out  # values, not file text
