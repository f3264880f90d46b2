"""agent/verify/admit.py, red-teamed: a candidate whose patch also changes tests or configuration
is judged without those files, and nothing it wrote there reaches the judged tree; what the policy
refuses whole (unsafe paths, symlinks, binaries) is still refused whole."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest

from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.verify.admit import admit, summary
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.agent.verify.workspace import PatchError, apply_patch, check_patch_policy
from ooda.tasks.loader import load_task

FIX_OLD = "def add(a, b):\n    return a - b\n"
FIX_NEW = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def diff(path: str, old: str, new: str) -> str:
    src = f"a/{path}" if old else "/dev/null"
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 src, f"b/{path}")
    mode = "" if old else "new file mode 100644\n"
    return f"diff --git a/{path} b/{path}\n{mode}" + "".join(lines)


FIX = diff("calc.py", FIX_OLD, FIX_NEW)
CHEAT_TEST = diff("tests/test_calc.py", TEST, TEST.replace("== 5", "== -1"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(FIX_OLD)
    (root / "tests" / "test_calc.py").write_text(TEST)
    for name in ("tox.ini", "setup.cfg", "pyproject.toml", "pytest.ini"):
        (root / name).write_text("[x]\n")
    return root


PROTECTED = {
    "a test file": CHEAT_TEST,
    "a new test file": diff("tests/test_new.py", "", "def test_x():\n    pass\n"),
    "a test named so outside tests/": diff("pkg/test_more.py", "", "def test_y():\n    pass\n"),
    "a new conftest.py": diff("conftest.py", "", "def pytest_collection_modifyitems(items):\n"
                                                 "    items.clear()\n"),
    "a conftest.py in a package": diff("pkg/conftest.py", "", "x = 1\n"),
    "pytest.ini": diff("pytest.ini", "[x]\n", "[pytest]\naddopts = -p no:python\n"),
    "pyproject's [tool.pytest]": diff("pyproject.toml", "[x]\n",
                                      "[tool.pytest.ini_options]\naddopts = '-k nothing'\n"),
    "setup.cfg's [tool:pytest]": diff("setup.cfg", "[x]\n", "[tool:pytest]\naddopts = -x\n"),
    "tox.ini": diff("tox.ini", "[x]\n", "[pytest]\npython_files = none\n"),
    "a .pth": diff("zz.pth", "", "import os; os.environ['X'] = '1'\n"),
    "sitecustomize": diff("sitecustomize.py", "", "import builtins\n"),
    "usercustomize in a package": diff("pkg/usercustomize.py", "", "import builtins\n"),
    "test support": diff("pkg/testing.py", "", "def assert_close(*a):\n    return None\n"),
    "git attributes": diff(".gitattributes", "", "*.py -diff\n"),
}


@pytest.mark.parametrize("name", list(PROTECTED))
def test_protected_files_are_left_out_and_the_rest_judged(name: str, repo: Path) -> None:
    admitted = admit(FIX + PROTECTED[name])
    assert [d.path for d in admitted.dropped] and admitted.patch == FIX
    check_patch_policy(admitted.patch)  # what is judged passes the whole policy
    assert apply_patch(repo, admitted.patch) == ["calc.py"]
    assert (repo / "tests" / "test_calc.py").read_text() == TEST  # never in the judged tree
    assert not (repo / "conftest.py").exists() and not (repo / "zz.pth").exists()
    assert (repo / "pytest.ini").read_text() == "[x]\n"
    assert "left out before judging" in summary(admitted.dropped)


def test_kinds_reasons_and_order_are_recorded() -> None:
    admitted = admit(CHEAT_TEST + FIX + PROTECTED["tox.ini"])
    assert admitted.patch == FIX
    assert [(d.path, d.kind) for d in admitted.dropped] == [
        ("tests/test_calc.py", "test_file"), ("tox.ini", "protected_file")]
    assert "this is a test file" in admitted.dropped[0].reason


def test_nothing_dropped_keeps_the_patch_byte_for_byte() -> None:
    sloppy = FIX.rstrip("\n")  # no final newline: as given, not rebuilt
    assert admit(sloppy).patch == sloppy and not admit(sloppy).dropped


def test_only_protected_changes_leave_nothing_to_judge() -> None:
    admitted = admit(CHEAT_TEST + PROTECTED["a new conftest.py"])
    assert admitted.patch == "" and len(admitted.dropped) == 2


def test_files_the_repository_collects_and_task_patterns_are_dropped() -> None:
    checks = diff("checks/check_calc.py", "", "def test_z():\n    pass\n")
    helper = diff("pkg/judge.py", "", "ok = True\n")
    admitted = admit(FIX + checks + helper, protected=["pkg/judge.py"], tests=["check_*.py"])
    assert admitted.patch == FIX
    assert [(d.path, d.kind) for d in admitted.dropped] == [
        ("checks/check_calc.py", "test_file"), ("pkg/judge.py", "protected_file")]


RENAME_TEST_OUT = ("diff --git a/tests/test_calc.py b/calc_check.py\nsimilarity index 100%\n"
                   "rename from tests/test_calc.py\nrename to calc_check.py\n")
RENAME_INTO_TESTS = ("diff --git a/calc.py b/tests/test_calc2.py\nsimilarity index 100%\n"
                     "rename from calc.py\nrename to tests/test_calc2.py\n")


@pytest.mark.parametrize("rename", [RENAME_TEST_OUT, RENAME_INTO_TESTS])
def test_a_rename_touching_a_test_is_dropped_whole(rename: str, repo: Path) -> None:
    admitted = admit(FIX + rename)
    assert admitted.patch == FIX and len(admitted.dropped) == 1
    apply_patch(repo, admitted.patch)
    assert (repo / "tests" / "test_calc.py").read_text() == TEST
    assert not (repo / "calc_check.py").exists() and not (repo / "tests" / "test_calc2.py").exists()


SYMLINK_INTO_TESTS = ("diff --git a/tests/test_link.py b/tests/test_link.py\n"
                      "new file mode 120000\n--- /dev/null\n+++ b/tests/test_link.py\n@@ -0,0 +1 @@\n"
                      "+../calc.py\n\\ No newline at end of file\n")
BINARY_TEST = ("diff --git a/tests/test_bin.py b/tests/test_bin.py\nnew file mode 100644\n"
               "index 0000000..e69de29\nGIT binary patch\nliteral 0\nHcmV?d00001\n\n")


@pytest.mark.parametrize("hostile", [
    SYMLINK_INTO_TESTS,
    BINARY_TEST,
    diff("../outside/test_x.py", "", "x = 1\n"),
    diff(".git/hooks/test_pre.py", "", "x = 1\n"),
    diff("tests/__pycache__/test_calc.cpython-311.pyc", "", "x\n"),
    diff("pkg.egg-info/entry_points.txt", "", "[pytest11]\nx = calc\n"),
])
def test_what_the_policy_refuses_whole_is_never_trimmed_away(hostile: str, repo: Path) -> None:
    admitted = admit(FIX + hostile)
    assert not admitted.dropped and admitted.patch == FIX + hostile
    with pytest.raises(PatchError):
        apply_patch(repo, admitted.patch)
    assert (repo / "calc.py").read_text() == FIX_OLD  # refused before anything was written


def test_an_unreadable_patch_is_left_to_the_policy() -> None:
    assert admit("not a diff at all\n").patch == "not a diff at all\n"


EXAMPLES = Path(__file__).resolve().parents[3] / "tasks" / "examples"


def test_the_loop_verifier_judges_the_rest_and_says_what_it_judged(tmp_path: Path) -> None:
    """The loop's verifier ("drop"), on the bundled median task: a wrong fix that rewrites the
    failing tests and pytest.ini fails on the task's own tests; the right fix with an added
    test and a pytest.ini edit passes, and what was judged (the verdict's patch, patch.diff)
    is the fix alone; a conftest.py alone is an invalid edit, as before."""
    shutil.copytree(EXAMPLES / "median", tmp_path / "median")
    task = load_task(tmp_path / "median")
    tests = (task.repo / "tests" / "test_median.py").read_text()
    source = (task.repo / "median.py").read_text()
    gold = (tmp_path / "median" / "gold.diff").read_text()
    ini = diff("pytest.ini", "[pytest]\npythonpath = .\n",
               "[pytest]\npythonpath = .\naddopts = -k 'not even and not two'\n")
    wrong = (diff("median.py", source, source + "\n# handles even lengths\n")
             + diff("tests/test_median.py", tests, tests.replace("== 2.5", "== 3.0")) + ini)
    right = gold + diff("tests/test_more.py", "", "def test_more() -> None:\n    pass\n") + ini
    conftest = diff("conftest.py", "", "collect_ignore = ['tests']\n")
    _, verifier = make_plan(task, lambda p: TaskVerifier(p, LocalBackend(), tmp_path / "work",
                                                         apply_rule="drop"))
    try:
        cheat = verifier.verify(wrong, verdict_only=True)
        fixed = verifier.verify(right, log_dir=tmp_path / "logs", verdict_only=True)
        alone = verifier.verify(conftest, verdict_only=True)
    finally:
        verifier.close()
    assert cheat.status == "failed", cheat.reason
    assert [d.path for d in cheat.dropped] == ["tests/test_median.py", "pytest.ini"]
    assert cheat.patch is not None and "tests/" not in cheat.patch
    assert fixed.status == "passed", fixed.reason
    assert fixed.patch == gold and (tmp_path / "logs" / "patch.diff").read_text() == gold
    assert (tmp_path / "logs" / "proposed.diff").read_text() == right
    assert "left out before judging: tests/test_more.py, pytest.ini" in fixed.feedback
    assert alone.status == "invalid_edit" and alone.kind == "test_file" and alone.patch is None
    assert "nothing is left to judge" in alone.reason
