"""The guard's record of the toolchain (verifiers/pytest_check/guard/provenance.py): code that
existed before any repository code ran is trusted, including functions the toolchain wrapped
(pytest 6's `@lru_cache` PytestPluginManager._getconftestmodules: a conftest registered from
inside it was called "registered by the code under test", and pallets__flask-4045's gold failed)."""

from __future__ import annotations

import sys
import time
import types

from ooda.verifiers.pytest_check.guard.provenance import Provenance

TOOLCHAIN_SOURCE = """\
import functools


class Manager:
    @functools.lru_cache(maxsize=8)
    def cached(self, path):
        return path

    def plain(self):
        pass


def _wrapped():
    pass


partial = functools.partial(_wrapped)
del _wrapped
"""


def _toolchain_module() -> types.ModuleType:
    """A module as the toolchain's are (its code objects reachable only through it)."""
    module = types.ModuleType("ooda_test_toolchain_module")
    exec(compile(TOOLCHAIN_SOURCE, "toolchain_module.py", "exec"), module.__dict__)  # noqa: S102
    return module


def test_functions_the_toolchain_wrapped_are_trusted(tmp_path: object) -> None:
    module = _toolchain_module()
    sys.modules[module.__name__] = module
    try:
        provenance = Provenance(str(tmp_path), set(), time.time())
        provenance._record_toolchain()
    finally:
        del sys.modules[module.__name__]
    manager = module.Manager  # type: ignore[attr-defined]
    assert provenance.trusted(manager.plain.__code__) is True
    assert provenance.trusted(manager.cached.__wrapped__.__code__) is True
    assert provenance.trusted(module.partial.func.__code__) is True  # type: ignore[attr-defined]


def test_code_made_later_is_not_known() -> None:
    provenance = Provenance("/nonexistent", set(), time.time())
    provenance._record_toolchain()

    namespace: dict[str, object] = {}
    exec(compile("def later():\n    pass\n", "<later>", "exec"), namespace)  # noqa: S102
    later = namespace["later"]
    assert isinstance(later, types.FunctionType)
    assert provenance.trusted(later.__code__) is None
