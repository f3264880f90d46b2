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
