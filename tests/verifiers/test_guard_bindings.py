"""What a rewritten test module's top level binds, recorded as its own code bound it
(verifiers/pytest_check/guard/bindings.py): the guard compares a test's module with it around
the test's call (rebound.py; tests/adversarial/test_adv_trust.py `rebinds_the_tests_add`)."""

from __future__ import annotations

import ast
import types

from ooda.verifiers.pytest_check.guard import bindings

SOURCE = '''\
"""A test module."""
import builtins as @py_builtins
import os.path
from functools import partial, reduce as fold
try:
    import json
except ImportError:
    json = None
first, *rest = [1, 2, 3]
size: int = 4
doubled = partial(int)
doubled = partial(float)  # the module's own later binding is the one kept
def test_x():
    inner = 1
class TestY:
    z = 2
'''


def _module() -> types.ModuleType:
    source = SOURCE.replace("import builtins as @py_builtins", "import builtins as _py_builtins")
    tree = ast.parse(source)
    tree.body[1].names[0].asname = "@pytest_ar"  # as pytest's rewriter adds its helper import
    bindings.instrument(tree)
    module = types.ModuleType("t")
    exec(compile(tree, "t.py", "exec"), vars(module))
    return module


def test_each_top_level_binding_is_recorded_as_bound() -> None:
    module = _module()
    found = bindings.recorded(module)
    assert set(found) == {"os", "partial", "fold", "json", "first", "rest", "size", "doubled",
                          "test_x", "TestY"}
    assert found["doubled"] is module.doubled and found["fold"] is module.fold
    assert found["test_x"] is module.test_x and found["rest"] == [2, 3]


def test_a_later_rebinding_is_not_recorded() -> None:
    module = _module()
    module.fold = print  # what the code under test would do from a thread
    assert bindings.recorded(module)["fold"] is not module.fold


def test_a_module_pytest_did_not_rewrite_records_nothing() -> None:
    tree = ast.parse("import os\nx = 1\n")
    bindings.instrument(tree)
    module = types.ModuleType("plain")
    exec(compile(tree, "plain.py", "exec"), vars(module))
    assert bindings.recorded(module) == {}
