"""Candidates that fix the bug but add a ruff or mypy error and hide it behind a suppression
comment (`# noqa`, `# ruff: noqa`, `# type: ignore`, `# mypy: ignore-errors`). Suppressions are
not honoured, on the base and the candidate alike, so the new error still counts while the
base's own suppressed findings stay in the baseline (real verifier, real Docker sandbox; one
verifier for the module so the baseline is computed once). `@typing.no_type_check` is a
suppression too (issue 21): mypy sees the function without it. Loosening the tools' configuration
instead is an invalid edit (test_adv_policy.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from adv_helpers import assert_not_passed, diff, make_task
from sandbox_helpers import backend_or_skip

from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import load_task

BASE = '''\
"""Arithmetic."""
import os  # noqa: F401


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return a - b


def label() -> str:
    return 0  # type: ignore[return-value]
'''
FIXED = BASE.replace("a - b", "a + b")
NEW_TYPE_ERROR = "\n\ndef name() -> str:\n    return 1{comment}\n"


def new_ruff_error(comment: str, head: str = "") -> str:
    return head + FIXED.replace("# noqa: F401\n", f"# noqa: F401\nimport sys{comment}\n")


CASES = {
    "type_ignore": ("mypy", FIXED + NEW_TYPE_ERROR.format(comment="  # type: ignore")),
    "type_ignore_with_code": (
        "mypy",
        FIXED + NEW_TYPE_ERROR.format(comment="  # type: ignore[return-value]  # safe"),
    ),
    "mypy_ignore_errors_comment": (
        "mypy",
        "# mypy: ignore-errors\n" + FIXED + NEW_TYPE_ERROR.format(comment=""),
    ),
    "type_ignore_whole_file": (
        "mypy",
        "# type: ignore\n" + FIXED + NEW_TYPE_ERROR.format(comment=""),
    ),
    "no_type_check_decorator": (
        "mypy",
        FIXED.replace("# noqa: F401\n", "# noqa: F401\nfrom typing import no_type_check as unchecked\n")
        + NEW_TYPE_ERROR.replace("\n\ndef", "\n\n@unchecked\ndef").format(comment=""),
    ),
    "noqa": ("ruff", new_ruff_error("  # noqa")),
    "noqa_with_code": ("ruff", new_ruff_error("  # noqa: F401")),
    "ruff_noqa_file": ("ruff", new_ruff_error("", head="# ruff: noqa\n")),
    "flake8_noqa_file": ("ruff", new_ruff_error("", head="# flake8: noqa\n")),
}


@pytest.fixture(scope="module")
def verifier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TaskVerifier]:
    root = tmp_path_factory.mktemp("linters")
    task = load_task(make_task(root, ruff=True, mypy=True, calc=BASE))
    verifier = TaskVerifier(task, backend_or_skip("docker"), root / "work")
    # the static stage would stop `no_type_check` first (test_adv_static.py): here mypy judges
    verifier.verifiers = [v for v in verifier.verifiers if v.name != "tampering"]
    yield verifier
    verifier.close()


def test_the_honest_fix_passes_despite_the_base_suppressions(verifier: TaskVerifier) -> None:
    verdict = verifier.verify(diff("calc.py", BASE, FIXED))
    assert verdict.status == "passed", verdict.feedback


@pytest.mark.parametrize("name", list(CASES))
def test_a_hidden_new_error_still_fails(verifier: TaskVerifier, name: str) -> None:
    stage, source = CASES[name]
    verdict = verifier.verify(diff("calc.py", BASE, source))
    code = "return-value" if stage == "mypy" else "F401"
    assert_not_passed(verdict, "failed", f"{stage} failed", "1 new error", code, "not honoured")
    assert verdict.results[-1].name == stage
