"""The test code's own stores into watched names (verifiers/pytest_check/guard/stores.py): sh's
tests/sh_test.py sets `unittest.TestLoader.sortTestMethodsUsing` at import, and the guard
rejected the exact fix. Each store into an attribute of a dotted name in a rewritten module is
followed by a call that notes it; only a call the Judge accepts (its frame the test file's,
the whole stack trusted: tests/adversarial/test_adv_trust.py) lets that very value through."""

from __future__ import annotations

import ast
import types
import unittest
from typing import Any

import pytest

from ooda.verifiers.pytest_check.guard import stores

SOURCE = """\
import unittest

def order(a, b):
    return 0

unittest.TestLoader.sortTestMethodsUsing = staticmethod(order)
holder = types.SimpleNamespace(loader=unittest.TestLoader)
holder.loader.extra: int = 1
setattr(unittest.TestLoader, "other", None)

def later(self):
    self.value = 1  # an instance: never noted
    try:
        unittest.TestLoader.later = 2
    except Exception:
        unittest.TestLoader.failed = 3
"""


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stores, "noted", {})
    for name in ("sortTestMethodsUsing", "extra", "other", "later"):
        if name in vars(unittest.TestLoader):
            monkeypatch.setattr(unittest.TestLoader, name, vars(unittest.TestLoader)[name])
        else:
            monkeypatch.setattr(unittest.TestLoader, name, None, raising=False)
            monkeypatch.delattr(unittest.TestLoader, name)


def _run() -> dict[str, Any]:
    tree = ast.parse(SOURCE)
    stores.instrument(tree)
    rewrite = types.SimpleNamespace()
    setattr(rewrite, stores.HELPER, stores.stored)
    names: dict[str, Any] = {"@pytest_ar": rewrite, "types": types}
    exec(compile(tree, "test_sh.py", "exec"), names)  # noqa: S102
    names["later"](types.SimpleNamespace())
    return names


def test_each_store_into_a_dotted_name_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stores, "trusted_store",
                        lambda frame, value: frame.f_code.co_filename == "test_sh.py")
    names = _run()
    loader = unittest.TestLoader
    assert sorted(name for _, name in stores.noted) == ["extra", "later", "other",
                                                        "sortTestMethodsUsing"]
    stored = vars(loader)["sortTestMethodsUsing"]
    assert stores.noted_value(loader, "sortTestMethodsUsing", stored)
    assert not stores.noted_value(loader, "sortTestMethodsUsing", staticmethod(names["order"]))
    assert stores.noted_value(loader, "later", 2)
    assert stores.noted_value(loader, "extra", 1)  # reached through another name


def test_a_store_the_judge_does_not_accept_is_not_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stores, "trusted_store", lambda frame, value: False)
    _run()
    assert stores.noted == {}
    # nor is a call from anywhere else once accepted: the frame is what the Judge is asked about
    monkeypatch.setattr(stores, "trusted_store",
                        lambda frame, value: frame.f_code.co_filename == "test_sh.py")
    unittest.TestLoader.sortTestMethodsUsing = staticmethod(lambda a, b: 0)  # type: ignore[assignment]
    stores.stored(unittest.TestLoader, "sortTestMethodsUsing")
    assert stores.noted == {}
