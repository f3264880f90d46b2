"""What a statement says, read without a model."""

from __future__ import annotations

from ooda.agent.context.clues import read_clues

STATEMENT = '''Polygon.area is negative for clockwise points

```python
>>> from geom.shapes import Polygon
>>> Polygon([(0, 0), (0, 1)]).area()
```

Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/geom/shapes.py", line 20, in area
    s += x1 * y2
See `geom/util.py` and xr.Dataset.to_stacked_array too.
'''


def test_paths_frames_names_and_terms() -> None:
    clues = read_clues(STATEMENT)
    assert "/usr/lib/python3/site-packages/geom/shapes.py" in clues.paths
    assert "geom/util.py" in clues.paths
    assert [(f.line, f.function) for f in clues.frames] == [(20, "area")]
    assert "geom.shapes" in clues.dotted and "Polygon.area" in clues.dotted
    assert "xr.Dataset.to_stacked_array" in clues.dotted
    assert {"Polygon", "area"} <= clues.code_names
    assert "negative" in clues.prose_names
    assert "clockwise" in clues.terms and "stacked" in clues.terms


def test_identifiers_written_as_only_code_is_are_code_in_prose_too() -> None:
    clues = read_clues("The ZeroMatrix blocks lose their shape in to_json_dict; Python is fine.")
    assert {"ZeroMatrix", "to_json_dict"} <= clues.code_names
    assert {"The", "blocks", "Python"}.isdisjoint(clues.code_names)
