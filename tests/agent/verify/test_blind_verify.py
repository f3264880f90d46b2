"""A blind run's task verifier (agent/verify/blind.py, regression.py, repro_suite.py): the
regression tests chosen from the files a candidate changes and run on the base first, and the
model's reproduction tests kept when they fail there. LocalSandbox, the real pytest."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ooda.agent.contracts.protocols import ReproTest, Sandbox
from ooda.agent.sandbox.local import LocalSandbox
from ooda.agent.verify.regression import import_pattern, module_name
from ooda.agent.verify.testnames import collected_patterns, is_test_module, subject
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, VerifierOptions
from tests.agent.verify.test_verify import diff

STATS = "def mean(xs):\n    return sum(xs) // len(xs)\n\n\ndef total(xs):\n    return sum(xs)\n"
STATS_TESTS = """\
from stats import mean, total


def test_mean_of_equal_values():
    assert mean([2, 2]) == 2


def test_total():
    assert total([1, 2]) == 3


def test_known_to_fail_on_the_base():
    assert mean([1]) == 99
"""
OTHER_TESTS = "def test_unrelated():\n    assert True\n"
REPRODUCES = "from stats import mean\nassert mean([1, 2]) == 1.5, 'mean([1, 2]) is not 1.5'\n"


class Backend:
    name = "local"
    reusable = False

    def open(self, workspace: Path, *, requirements: Path | None = None) -> Sandbox:
        return LocalSandbox(workspace)

    def adopt(self, launched: object, *, requirements: Path | None = None) -> Sandbox | None:
        return None

    def close(self) -> None:
        pass


@pytest.fixture
def verifier(tmp_path: Path) -> TaskVerifier:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "stats.py").write_text(STATS)
    (repo / "tests" / "test_stats.py").write_text(STATS_TESTS)
    (repo / "tests" / "test_other.py").write_text(OTHER_TESTS)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    task = Task(id="stats", statement="mean([1, 2]) is 1, not 1.5", repo=repo,
                verifiers=VerifierOptions(ruff=False, mypy=False, security=False, timeout_s=60),
                run_test_files=True)
    made = TaskVerifier(task, Backend(), tmp_path / "work", blind=True)
    yield made
    made.close()


def patch(new_body: str) -> str:
    return diff("stats.py", STATS, STATS.replace("sum(xs) // len(xs)", new_body))


def test_regression_and_reproduction_tests_judge_a_blind_candidate(
    verifier: TaskVerifier, tmp_path: Path
) -> None:
    judged = verifier.adopt_reproduction(
        [ReproTest("repro_1", REPRODUCES),
         ReproTest("repro_2", "from stats import mean\nassert mean([2, 2]) == 2\n"),
         ReproTest("repro_3", "from stats import median\n")],
        deadline=time.monotonic() + 60)
    assert [(j.name, j.status, j.kept, j.required) for j in judged] == [
        ("repro_1", "failed", True, True),
        ("repro_2", "passed", False, False),  # cannot tell a fix from no change
        ("repro_3", "error", True, False),  # a name the issue never mentions: ranks only
    ]
    right = verifier.verify(patch("sum(xs) / len(xs)"), log_dir=tmp_path / "right")
    assert right.status == "passed", right.feedback
    assert [(r.name, r.status) for r in right.results] == [
        ("syntax", "passed"), ("tampering", "passed"), ("pytest", "passed"), ("repro", "passed")]
    assert right.results[3].details["outcomes"] == {"repro_1": "passed", "repro_3": "error"}
    pytest_log = (tmp_path / "right" / "pytest.log").read_text()
    assert "test_total" in pytest_log and "test_unrelated" not in pytest_log
    # the test failing on the base is no regression test; the other file was never run
    runs = verifier.blind.regression.record() if verifier.blind else {}
    assert list(runs) == ["tests/test_stats.py"] and runs["tests/test_stats.py"]["passing"] == 2

    broken = verifier.verify(patch("0"))  # breaks test_mean_of_equal_values
    assert broken.status == "failed" and broken.reason.startswith("pytest")
    assert "test_mean_of_equal_values" in broken.feedback
    # the reproduction stage still ran on it: the blind selection weighs the broken test
    assert [r.name for r in broken.results][-2:] == ["pytest", "repro"]

    wrong = verifier.verify(patch("round(sum(xs) / len(xs))"))  # keeps them, fails repro_1
    assert (wrong.status, wrong.results[-1].name) == ("failed", "repro")
    assert "mean([1, 2]) is not 1.5" in wrong.feedback and "repro_3" not in wrong.feedback


def test_every_verification_waits_for_the_reproduction_tests(verifier: TaskVerifier) -> None:
    soon = time.monotonic() + 0.5
    started = time.monotonic()
    verdict = verifier.verify(patch("sum(xs) / len(xs)"), deadline=soon)
    assert time.monotonic() - started >= 0.5  # none were adopted: it waited until the deadline
    verifier.adopt_reproduction([], deadline=time.monotonic() + 5)
    verdict = verifier.verify(patch("sum(xs) / len(xs)"))
    assert verdict.status == "passed" and [r.name for r in verdict.results][-1] == "repro"


def test_which_test_files_exercise_a_source_file() -> None:
    assert module_name("src/pkg/sub/mod.py") == "pkg.sub.mod"
    assert module_name("pkg/__init__.py") == "pkg" and module_name("my-tool/x.py") is None
    pattern = import_pattern("pkg.sub.mod")
    for line in ("from pkg.sub.mod import f", "import pkg.sub.mod as m",
                 "from pkg.sub import other, mod"):
        assert pattern.search(line), line
    assert not pattern.search("from pkg.sub import modular")
    assert all(map(is_test_module, ["tests/test_a.py", "a_test.py", "tests/admin/tests.py",
                                    "sympy/core/tests/test_basic.py"]))
    assert not any(map(is_test_module, ["tests/conftest.py", "testing.py", "pkg/contest.py",
                                        "tests/unittest_brain.py"]))
    assert [subject(p) for p in ("tests/unittest_brain.py", "calc_test.py", "test_x.py",
                                 "tests.py")] == ["brain", "calc", "x", "tests"]


def test_the_repositorys_own_test_patterns_count(tmp_path: Path) -> None:
    """astroid names its tests unittest_*.py and says so to pytest (setup.cfg)."""
    assert collected_patterns(tmp_path) == ("test_*.py", "*_test.py")
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\ntestpaths = tests\n"
                                        "python_files = *test_*.py\n")
    assert collected_patterns(tmp_path) == ("*test_*.py",)
    assert is_test_module("tests/unittest_brain.py", collected_patterns(tmp_path))
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\n'
                                             'python_files = ["check_*.py"]\n')
    assert collected_patterns(tmp_path) == ("check_*.py",)  # pyproject.toml before setup.cfg
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    assert collected_patterns(tmp_path) == ("test_*.py", "*_test.py")  # pytest.ini first
