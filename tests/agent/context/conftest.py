"""A repository too large to show whole at a small budget, and a private index cache."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Indexes go to this test's own OODA_HOME."""
    home = tmp_path / "ooda-home"
    monkeypatch.setenv("OODA_HOME", str(home))
    return home


def filler(name: str, n: int) -> str:
    """`n` unremarkable functions (a module's bulk)."""
    return "\n\n".join(
        f"def {name}_helper_{k}(values):\n    total = 0\n    for v in values:\n"
        f"        total += v * {k}\n    return total\n" for k in range(n))


@pytest.fixture
def big_repo(tmp_path: Path) -> Path:
    """A package whose bug is in shapes.Polygon.area; many other modules around it."""
    repo = tmp_path / "repo"
    pkg = repo / "geom"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Geometry."""\nfrom geom.shapes import Polygon\n')
    (pkg / "shapes.py").write_text(
        '"""Shapes."""\n\nimport math\n\nfrom geom.util import pairs\n\n\n'
        "class Polygon:\n    \"\"\"A closed polygon.\"\"\"\n\n"
        "    def __init__(self, points):\n        self.points = list(points)\n\n"
        "    def perimeter(self):\n        return sum(math.dist(a, b) for a, b in "
        "pairs(self.points))\n\n"
        "    def area(self):\n        \"\"\"The shoelace formula.\"\"\"\n        s = 0\n"
        "        for (x1, y1), (x2, y2) in pairs(self.points):\n"
        "            s += x1 * y2 - x2 * y1\n        return s / 2\n\n\n"
        + filler("shape", 90))
    (pkg / "util.py").write_text(
        '"""Helpers."""\n\n\ndef pairs(points):\n    """Consecutive pairs, closing."""\n'
        "    return list(zip(points, points[1:] + points[:1]))\n\n\n" + filler("util", 30))
    for k in range(12):
        (pkg / f"other{k}.py").write_text(f'"""Module {k}."""\n\n\n' + filler(f"other{k}", 30))
    tests = repo / "tests"
    tests.mkdir()
    (tests / "test_shapes.py").write_text(
        "from geom.shapes import Polygon\n\n\ndef test_area_clockwise():\n"
        "    assert Polygon([(0, 0), (0, 1), (1, 1), (1, 0)]).area() == 1\n")
    return repo
