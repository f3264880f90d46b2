"""Files cut into units: a partition of the lines, names, heads and imports."""

from __future__ import annotations

import pytest

from ooda.agent.context.units import cut, imports_of

SOURCE = '''"""Doc."""
import os
from . import sibling
from .pkg.mod import a, b as c

X = 1


# a comment about f
@decorator
def f(x,
      y):
    return x


class K(Base):
    """K."""
    attr = 2

    def m(self):
        return 1

    async def n(self):
        pass
    tail = 3
'''


def test_units_partition_the_file_and_name_definitions() -> None:
    parsed = cut("pkg/mod.py", SOURCE, "pkg.mod")
    spans = [(u.start, u.end) for u in parsed.units]
    assert spans[0][0] == 1 and spans[-1][1] == len(SOURCE.splitlines())
    assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:], strict=False))
    names = [(u.qualname, u.kind) for u in parsed.units]
    assert names == [("<module>", "code"), ("f", "def"), ("K", "class"), ("K.m", "def"),
                     ("K.n", "def"), ("K.<body>", "code")]
    f = parsed.units[1]
    assert f.start == 7  # the blank lines and the comment before it belong to it
    assert SOURCE.splitlines()[f.head[0] - 1] == "@decorator"
    assert SOURCE.splitlines()[f.head[1] - 1].strip() == "y):"


def test_imports_are_absolute_dotted_names() -> None:
    assert imports_of(SOURCE, "pkg.mod", False) == [
        "os", "pkg", "pkg.sibling", "pkg.pkg.mod", "pkg.pkg.mod.a", "pkg.pkg.mod.b"]
    text = "from .. import x\nfrom .core import (\n    y,\n    z,\n)\n"
    assert imports_of(text, "a.b.c", True) == ["a.b", "a.b.x", "a.b.c.core", "a.b.c.core.y",
                                               "a.b.c.core.z"]


def test_a_file_that_is_not_python_is_one_unit() -> None:
    parsed = cut("bad.py", "def f(:\n  pass\n", "bad")
    assert not parsed.parsed and [(u.start, u.end) for u in parsed.units] == [(1, 2)]


def test_a_huge_file_is_cut_by_its_top_level_lines() -> None:
    body = "\n".join(f"def rule{k}(x):\n    return x + {k}\n" for k in range(9000))
    parsed = cut("rules.py", "import os\n\n" + body, "rules")
    assert len(parsed.units) == 9001
    assert parsed.units[1].qualname == "rule0" and parsed.units[1].head == (3, 3)
    assert parsed.units[-1].end == len(("import os\n\n" + body).splitlines())


def test_a_file_too_large_to_parse_is_cut_at_its_classes_methods(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ooda.agent.context import units

    monkeypatch.setattr(units, "AST_MAX_CHARS", 10)
    text = ('"""Doc."""\nimport os\n\n\nclass Big:\n    """A big class."""\n\n    x = 1\n\n'
            "    def one(self):\n        return 1\n\n    @property\n    def two(self):\n"
            "        return 2\n\n\ndef after():\n    return os\n")
    found = units.cut("m.py", text, "m")
    assert [(u.qualname, u.kind) for u in found.units] == [
        ("<module>", "code"), ("Big", "class"), ("Big.one", "def"), ("Big.two", "def"),
        ("after", "def")]
    two = found.units[3]
    assert text.splitlines()[two.start - 1] == "    @property"
    assert [u.start for u in found.units[1:]] == [u.end + 1 for u in found.units[:-1]]
