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


def test_a_prepared_record_trusts_what_a_fresh_one_does(tmp_path: object) -> None:
    """prepare() (the warm interpreter, before the fork) then start-time recording trusts the
    same code as recording everything at the start; a module new or grown since prepare() is
    walked again, and code made after it stays unknown."""
    from ooda.verifiers.pytest_check.guard import provenance as guard_provenance

    fresh = Provenance(str(tmp_path), set(), time.time())
    fresh._record_toolchain(stack=False)
    grown = _toolchain_module()
    sys.modules[grown.__name__] = grown
    try:
        guard_provenance.prepare()
        assert guard_provenance._prepared is not None
        exec("def added_after():\n    pass\n", grown.__dict__)  # noqa: S102  (grows the module)
        late = types.ModuleType("ooda_test_late_module")
        exec("def late():\n    pass\n", late.__dict__)  # noqa: S102
        sys.modules[late.__name__] = late
        made_after = compile("def stray():\n    pass\n", "<stray>", "exec")
        run = Provenance(str(tmp_path), set(), time.time())
        run._record_toolchain(stack=False)
    finally:
        guard_provenance._prepared = None
        sys.modules.pop(grown.__name__, None)
        sys.modules.pop("ooda_test_late_module", None)
    trusted = {key for key, origin in fresh.origins.items() if origin.trusted}
    assert trusted <= {key for key, origin in run.origins.items() if origin.trusted}
    assert run.trusted(grown.Manager.plain.__code__) is True
    assert run.trusted(grown.added_after.__code__) is True  # the module grew: walked again
    assert run.trusted(late.late.__code__) is True  # new since prepare(): walked at the start
    assert run.trusted(made_after) is None
    assert Provenance(str(tmp_path), set(), time.time()).origins == {}  # nothing left behind


def test_the_warm_interpreters_modules_are_seeded_by_real_path(tmp_path: object) -> None:
    """prepare() notes each loaded module's real file; a run's Provenance carries them, so
    the guard does not look again at modules loaded before the fork from outside its root."""
    from ooda.verifiers.pytest_check.guard import provenance as guard_provenance

    try:
        guard_provenance.prepare()
        run = Provenance(str(tmp_path), set(), time.time())
    finally:
        guard_provenance._prepared = None
    module, real = run.warm_files["json"]
    assert module is sys.modules["json"] and real.endswith("json/__init__.py")
    assert Provenance(str(tmp_path), set(), time.time()).warm_files == {}
