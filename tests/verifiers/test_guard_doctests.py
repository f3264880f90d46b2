"""The guard's doctest check (verifiers/pytest_check/guard/doctests.py): a doctest of a changed
file must run the examples its file writes; a docstring rewritten at import is found, an
unchanged one (an example on its first line too, which Python 3.13+ stores dedented) is not."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path
from types import SimpleNamespace

from ooda.verifiers.pytest_check.guard import doctests

SOURCE = '''\
def add(a, b):
    """>>> add(2, 3)
    5
    """
    return a + b


class Calc:
    def sub(self, a, b):
        """Sub.

        >>> Calc().sub(3, 2)
        1
        """
        return a - b
'''


def _said(module: object, path: Path) -> dict[str, str | None]:
    found = doctest.DocTestFinder().find(module, "calc_doc")
    return {t.name: doctests.rewritten(SimpleNamespace(dtest=t), {str(path.resolve())})
            for t in found if t.examples}


def test_a_docstring_rewritten_at_import_is_found(tmp_path: Path) -> None:
    path = tmp_path / "calc_doc.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("calc_doc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doctests._literal.clear()
    assert _said(module, path) == {"calc_doc.add": None, "calc_doc.Calc.sub": None}
    assert doctests.rewritten(SimpleNamespace(dtest=None), set()) is None  # not a doctest
    module.Calc.sub.__doc__ = module.Calc.sub.__doc__.replace("        1\n", "        7\n")
    said = _said(module, path)
    assert said["calc_doc.add"] is None
    assert "Calc().sub(3, 2)" in str(said["calc_doc.Calc.sub"])
    assert _said(module, tmp_path / "elsewhere.py") == {  # not a changed file: not judged
        "calc_doc.add": None, "calc_doc.Calc.sub": None}
