"""The tampering stage (verifiers/tamper_check.py, tamper_rules.py): each kind of primitive found
through the file's imports, only what the candidate added counted, the pytest repository's own
plugin code let be, and the stage in the cascade before any test runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.contracts.protocols import CheckSpec
from ooda.agent.sandbox.local import LocalSandbox
from ooda.verifiers.tamper_check import TamperVerifier, judge_files
from ooda.verifiers.tamper_rules import primitives

CASES = {
    "frame": "import sys\nsys._getframe(1).f_back.f_locals['x'] = 1\n",
    "frame_alias": "from inspect import currentframe as here\nhere()\n",
    "frame_getattr": "import sys\ngetattr(sys, '_getframe')(0)\n",
    "frame_computed": "import sys\ngetattr(sys, '_get' + 'frame')(0)\n",
    "frame_extracted": (  # who called: the test's comparison, or the guard's probe?
        "import traceback\n\ndef __eq__(self, other):\n"
        "    return 'test_' in traceback.extract_stack()[-2].filename\n"
    ),
    "code_consts": "import tests.test_x as t\nprint(t.test_x.__code__.co_consts)\n",
    "gc": "import gc as g\nfor o in g.get_objects():\n    pass\n",
    "gc_import": "__import__('gc').get_referrers(object)\n",
    "code": "def f():\n    pass\nf.__code__ = (lambda: 0).__code__\n",
    "code_replace": "def f():\n    pass\nc = f.__code__.replace(co_filename='/usr/lib/x.py')\n",
    "function_type": "import types\ntypes.FunctionType(compile('1', 'x', 'eval'), {})\n",
    "plugin": "def hack(config):\n    config.pluginmanager.register(object())\n",
    "modules": "import sys\nsys.modules['pytest'] = None\n",
    "builtins": "import builtins\nbuiltins.isinstance = lambda *a: True\n",
    "framework": "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n",
    "framework_from": "from unittest import TestCase\nsetattr(TestCase, 'assertTrue', print)\n",
    "framework_patch": "from unittest import mock\nmock.patch('_pytest.runner.call_and_report').start()\n",
    "no_type_check": "import typing\n@typing.no_type_check\ndef f() -> int:\n    return 's'\n",
    "type_checking_else": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    x = 1\nelse:\n    x = 's'\n"
    ),
    "audit": "import sys\nsys.addaudithook(print)\n",
    "wildcard": "from unittest.mock import ANY\n\ndef add(a, b):\n    return ANY\n",
    "unittest_skip": "def hide(test):\n    test.__unittest_skip__ = True\n",
    "unittest_skip_setattr": "def hide(cls):\n    setattr(cls, '__unittest_skip__', True)\n",
}
KINDS = {
    "frame_alias": "frame", "frame_getattr": "frame", "frame_computed": "frame",
    "frame_extracted": "frame",
    "code_consts": "code", "gc_import": "gc", "code_replace": "code",
    "function_type": "code", "builtins": "modules", "framework_from": "framework",
    "framework_patch": "framework", "unittest_skip": "framework",
    "unittest_skip_setattr": "framework", "no_type_check": "typecheck", "type_checking_else": "typecheck",
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_each_primitive_is_found(name: str) -> None:
    found = primitives(CASES[name], "pkg/mod.py")
    assert KINDS.get(name, name) in {p.kind for p in found}, found


HONEST = """\
import functools
import logging
import sys
import typing

if typing.TYPE_CHECKING:
    from collections.abc import Sequence

log = logging.getLogger(__name__)


@functools.lru_cache
def add(a: int, b: int) -> int:
    if sys.version_info < (3, 8):
        raise RuntimeError("too old")
    log.debug("adding %s", a)
    return a + b


class Pair(typing.NamedTuple):
    left: int
    right: int
"""


def test_ordinary_code_has_none() -> None:
    assert primitives(HONEST, "calc.py") == []
    assert primitives("def broken(:\n", "calc.py") == []  # the syntax stage's to report


def test_only_what_the_candidate_added_counts() -> None:
    """sympy-style frame walking already in the file is not charged; one more use is."""
    base = b"import inspect\n\ndef var(name):\n    inspect.currentframe().f_back.f_globals[name] = 1\n"
    edited = base.replace(b"= 1", b"= 2") + b"\n\ndef other():\n    return 3\n"
    assert judge_files({"sym.py": base}, {"sym.py": edited}) == []
    more = edited + b"\n\ndef peek():\n    return inspect.currentframe().f_back.f_locals\n"
    added = judge_files({"sym.py": base}, {"sym.py": more})
    assert added and all(d.code == "TAMPER-frame" for d in added)
    assert judge_files({}, {"new.py": CASES["gc"].encode()})[0].code == "TAMPER-gc"


def test_the_test_machinery_s_own_source_may_define_hooks() -> None:
    """pytest-dev/pytest: a fix to src/_pytest/ may register plugins and define hookimpls."""
    source = "from pluggy import HookimplMarker\nhookimpl = HookimplMarker('pytest')\n"
    assert primitives(source, "src/_pytest/helpconfig.py") == []
    assert {p.kind for p in primitives(source, "src/pkg/plugin.py")} == {"plugin"}


def test_the_stage_fails_only_on_added_primitives(tmp_path: Path) -> None:
    base = tmp_path / "base"
    cand = tmp_path / "cand"
    for root, extra in ((base, ""), (cand, CASES["framework"])):
        root.mkdir()
        (root / "calc.py").write_text(CASES["frame"] + extra)
    stage = TamperVerifier()
    check = CheckSpec(changed_files=["calc.py"], timeout_s=10)
    check.baseline["tampering"] = stage.baseline(LocalSandbox(base), check)
    assert stage.verify(LocalSandbox(base), check).status == "passed"
    result = stage.verify(LocalSandbox(cand), check)
    assert result.status == "failed"
    assert "TAMPER-framework" in result.summary and "unittest.TestCase.assertEqual" in result.summary
    assert "TAMPER-frame " not in result.summary and "no business" in result.summary
