"""Issue 40 #8: a definitions answer for a method that three classes define said "these
definitions match nothing"; it is ambiguous, and the feedback says in which classes."""

from __future__ import annotations

import pytest

from ooda.agent import edits

SHAPES = (
    "class Circle:\n    def area(self):\n        return 0\n\n\n"
    "class Square:\n    def area(self):\n        return 1\n\n\n"
    "class Triangle:\n    def area(self):\n        return 2\n"
)


def read(files: dict[str, str]) -> edits.ReadFile:
    return files.get


def test_a_method_of_three_classes_is_ambiguous_naming_them() -> None:
    answer = "shapes.py\n```python\ndef area(self):\n    return 42\n```\n"
    with pytest.raises(edits.EditError) as err:
        edits.parse_edits(answer, read({"shapes.py": SHAPES}), lambda: ["shapes.py"])
    assert err.value.kind == "ambiguous_definitions"
    assert "area is ambiguous in shapes.py: a method of classes Circle, Square, Triangle" \
        in str(err.value)
    assert "match nothing" not in str(err.value)


def test_shown_inside_its_class_it_is_placed() -> None:
    answer = ("shapes.py\n```python\nclass Square:\n    def area(self):\n        return 4\n"
              "```\n")
    made = edits.parse_edits(answer, read({"shapes.py": SHAPES}), lambda: ["shapes.py"])
    assert made.files["shapes.py"].count("return 4") == 1
    assert "return 0" in made.files["shapes.py"] and "return 2" in made.files["shapes.py"]


def test_a_method_of_one_class_is_still_placed_bare() -> None:
    one = "class Circle:\n    def area(self):\n        return 0\n"
    answer = "shapes.py\n```python\ndef area(self):\n    return 3\n```\n"
    made = edits.parse_edits(answer, read({"shapes.py": one}), lambda: ["shapes.py"])
    assert "        return 3" in made.files["shapes.py"]
