"""The static tampering stage through the real TaskVerifier (Docker and bwrap sandboxes; the
stage itself reads the files on the host, before any test runs): the recipes of issue 21's
in-process attacks fail there, named, and so does a new type error hidden behind
`@typing.no_type_check` (with mypy on, which would otherwise have been the judge). The honest
fix, which uses none of these, passes the same cascade. (An always-equal result needs no
primitive at all: the guard's behavioural probe is what stops it, test_adv_trust.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from adv_helpers import CALC, FIXED, assert_not_passed, calc_patch, cheat, diff, make_task
from adv_helpers import verify as verify_task
from test_adv_trust import HOOK_RENAMED, HOOK_WITHOUT_CODE, UNITTEST_NO_OPS

NO_TYPE_CHECK = FIXED + '''

@typing.no_type_check
def label(n: int) -> str:
    """A new type error mypy is told not to see."""
    return n
'''
RECIPES = {
    "hook_with_a_stdlib_filename": (cheat(HOOK_RENAMED), ["TAMPER-gc", "TAMPER-code"]),
    "hook_with_no_code": (cheat(HOOK_WITHOUT_CODE), ["TAMPER-plugin", "HookImpl"]),
    "unittest_asserts_no_ops": (cheat(UNITTEST_NO_OPS), ["TAMPER-framework"]),
    "no_type_check": (
        diff("calc.py", CALC, "import typing\n" + NO_TYPE_CHECK),
        ["TAMPER-typecheck", "no_type_check"],
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_task(tmp_path_factory.mktemp("static"), mypy=True)


@pytest.mark.parametrize("name", list(RECIPES))
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_tampering_primitive_fails_before_any_test_runs(
    task: Path, tmp_path: Path, name: str, backend: str
) -> None:
    patch, words = RECIPES[name]
    verdict = verify_task(task, patch, tmp_path, backend)
    assert_not_passed(verdict, "failed", "tampering failed", *words)
    assert [r.name for r in verdict.results] == ["syntax", "tampering"]


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_the_honest_fix_passes_every_stage(task: Path, tmp_path: Path, backend: str) -> None:
    verdict = verify_task(task, calc_patch(FIXED), tmp_path, backend)
    assert verdict.status == "passed", verdict.feedback
    assert [r.name for r in verdict.results][:2] == ["syntax", "tampering"]
    assert verdict.results[-1].name == "mypy"
