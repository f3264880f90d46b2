"""agent/verify/harness_apply.py: a prediction goes in as the SWE-bench harness puts it
(git apply, then patch --fuzz=5; any file; the test patch's files put back), and a patch whose
only fault is a missing final newline applies under both rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.verify.harness_apply import apply_prediction, restore_test_files
from ooda.agent.verify.workspace import PatchError, apply_patch, check_patch_policy

CALC = 'import os\n\n\ndef add(a, b):\n    """Add."""\n    return a - b\n'
FIX = ("--- a/calc.py\n+++ b/calc.py\n@@ -4,3 +4,3 @@\n def add(a, b):\n"
       '     """Add."""\n-    return a - b\n+    return a + b\n')
FUZZY = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,6 +1,6 @@\n import sys\n \n \n def add(a, b):\n"
         '     """Add."""\n-    return a - b\n+    return a + b\n')
"""Its first context line is wrong: git apply refuses it, patch --fuzz applies it."""


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / "tox.ini").write_text("[pytest]\naddopts = -q\n")
    (root / "tests" / "test_calc.py").write_text("def test_old():\n    pass\n")
    return root


def test_git_apply_first_and_a_missing_final_newline_is_no_fault(repo: Path) -> None:
    applied = apply_prediction(repo, FIX.rstrip("\n"))
    assert applied.method == "git apply" and applied.changed == ["calc.py"]
    assert "return a + b" in (repo / "calc.py").read_text()


def test_patch_with_fuzz_when_git_apply_refuses(repo: Path) -> None:
    applied = apply_prediction(repo, FUZZY)
    assert applied.method == "patch --fuzz=5"
    assert "return a + b" in (repo / "calc.py").read_text()
    assert sorted(p.name for p in repo.iterdir()) == ["calc.py", "tests", "tox.ini"]  # no .orig


def test_neither_way_applies_is_a_patch_error(repo: Path) -> None:
    bad = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-nothing like it\n+x\n-at all\n+y\n"
    with pytest.raises(PatchError, match="patch --fuzz=5 failed too"):
        apply_prediction(repo, bad)
    assert (repo / "calc.py").read_text() == CALC


def test_configuration_and_test_edits_apply_where_the_strict_policy_refuses(repo: Path) -> None:
    config = "--- a/tox.ini\n+++ b/tox.ini\n@@ -1,2 +1,2 @@\n [pytest]\n-addopts = -q\n+addopts = -x\n"
    with pytest.raises(PatchError, match="tool configuration"):
        check_patch_policy(config)
    assert apply_prediction(repo, config).changed == ["tox.ini"]
    assert "-x" in (repo / "tox.ini").read_text()


def test_the_test_patchs_files_go_back_to_the_base(repo: Path, tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "tests").mkdir()
    (base / "tests" / "test_calc.py").write_text("def test_old():\n    pass\n")
    edit = ("--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -1,2 +1,2 @@\n"
            " def test_old():\n-    pass\n+    assert True\n"
            "--- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1 @@\n+X = 1\n")
    applied = apply_prediction(repo, edit)
    restore_test_files(repo, base, ["tests/test_calc.py", "tests/test_new.py"], applied.changed)
    assert (repo / "tests" / "test_calc.py").read_text() == "def test_old():\n    pass\n"
    assert not (repo / "tests" / "test_new.py").exists()


@pytest.mark.parametrize(("old", "new"), [("a/../outside.py", "b/../outside.py"),
                                          ("/etc/passwd", "/etc/passwd"),
                                          ("a/.git/config", "b/.git/config")])
def test_paths_still_stay_inside_the_repository(repo: Path, old: str, new: str) -> None:
    with pytest.raises(PatchError):
        apply_prediction(repo, f"--- {old}\n+++ {new}\n@@ -0,0 +1 @@\n+x\n")
    assert not (repo.parent / "outside.py").exists()


def test_the_strict_rule_also_takes_a_patch_without_its_final_newline(repo: Path) -> None:
    assert apply_patch(repo, FIX.rstrip("\n")) == ["calc.py"]
    with pytest.raises(PatchError, match="empty"):
        apply_prediction(repo, "  \n")
