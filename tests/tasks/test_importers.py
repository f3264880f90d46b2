"""Tests for the QuixBugs and HumanEvalFix importers, checked against the host's pytest and git.

Every imported task must load, and its gold.diff must pass `git apply --check`; for a fixed
sample of each dataset (hanging programs included) the unpatched repo must fail its tests
and the gold-patched one pass them. The real sandboxed verification is tested elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.tasks.importers import IMPORTERS, import_humanevalfix, import_quixbugs
from ooda.tasks.loader import Task, load_task, load_taskset

DATASETS = Path(
    os.environ.get("OODA_DATASETS", Path(__file__).resolve().parents[3] / "shared" / "datasets")
)
QUIXBUGS = DATASETS / "quixbugs"
HUMANEVALFIX = DATASETS / "humanevalfix"

pytestmark = pytest.mark.skipif(
    not (QUIXBUGS.is_dir() and HUMANEVALFIX.is_dir()), reason="shared datasets not present"
)

HANGS_WHEN_BUGGY = {
    "quixbugs-bitcount",
    "quixbugs-sqrt",
    "quixbugs-find_first_in_sorted",
    "humanevalfix-python-10",
    "humanevalfix-python-156",
    "humanevalfix-python-160",
}
QUIXBUGS_SAMPLE = [
    "bitcount",  # buggy loops forever
    "sqrt",  # buggy loops forever
    "find_first_in_sorted",  # buggy loops forever on one case
    "gcd",  # buggy ends in RecursionError
    "knapsack",  # its --runslow case is left out
    "levenshtein",  # its always-skipped case is left out
    "breadth_first_search",  # uses node.py
    "depth_first_search",  # the fix inserts a line
    "shortest_paths",  # no JSON data
    "wrap",  # the program has a stray CR
    "possible_change",  # comment-only differences are not part of the fix
    "mergesort",  # slow to fail
]
HUMANEVALFIX_SAMPLE = ["0", "10", "12", "32", "38", "50", "53", "100", "156", "160", "163"]


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    return env


def git_apply(repo: Path, patch: str, *, check: bool) -> subprocess.CompletedProcess[str]:
    """`git apply [--check]` of `patch` in `repo`, never looking for an enclosing git repo."""
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(repo.parent))
    args = ["git", "apply", "--check", "-"] if check else ["git", "apply", "-"]
    return subprocess.run(
        args, cwd=repo, input=patch, env=env, capture_output=True, text=True, timeout=30
    )


def pytest_outcome(task: Task, *, gold: bool, timeout: float) -> str:
    """Run the host pytest on a temp copy of the task's repo: passed, failed or timeout."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(task.repo, work)
        if gold:
            assert task.gold_patch is not None
            applied = git_apply(work, task.gold_patch, check=False)
            assert applied.returncode == 0, applied.stderr
        targets = task.fail_to_pass + task.pass_to_pass
        command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
        try:
            done = subprocess.run(
                command + targets,
                cwd=work,
                env=_env(),
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return "timeout"
        if done.returncode == 0 and "skipped" not in done.stdout:
            return "passed"
        return "failed"


def check_buggy_fails_gold_passes(tasks: list[Task]) -> None:
    """Run all the checks two at a time; assert every buggy run fails and every gold one passes."""

    def one(task: Task) -> tuple[str, str, str]:
        quick = 3.0 if task.id in HANGS_WHEN_BUGGY else 60.0
        buggy = pytest_outcome(task, gold=False, timeout=quick)
        fixed = pytest_outcome(task, gold=True, timeout=60.0)
        return task.id, buggy, fixed

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, tasks))
    wrong = [r for r in results if r[1] == "passed" or r[2] != "passed"]
    assert not wrong, f"(task, buggy, gold) not failing/passing: {wrong}"
    for task_id, buggy, _ in results:
        if task_id in HANGS_WHEN_BUGGY:
            assert buggy in ("timeout", "failed")


def tree_digest(root: Path) -> str:
    """A digest of every file's relative path and bytes under `root`."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@pytest.fixture(scope="module")
def quixbugs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("quixbugs")
    written = import_quixbugs(QUIXBUGS, dest)
    assert written == sorted(written) and len(written) == 40
    return dest


@pytest.fixture(scope="module")
def humanevalfix_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("humanevalfix")
    written = import_humanevalfix(HUMANEVALFIX, dest)
    assert len(written) == 164
    return dest


def test_registry() -> None:
    assert IMPORTERS["quixbugs"] is import_quixbugs
    assert IMPORTERS["humanevalfix"] is import_humanevalfix
    assert set(IMPORTERS) == {"quixbugs", "humanevalfix", "swebench"}


def test_quixbugs_tasks_load_and_gold_applies(quixbugs_dir: Path) -> None:
    tasks = load_taskset(quixbugs_dir)
    assert len(tasks) == 40
    for task in tasks:
        name = task.id.removeprefix("quixbugs-")
        assert task.fail_to_pass == [f"tests/test_{name}.py"]
        assert task.statement.strip() and task.gold_patch
        assert task.verifiers.ruff and task.verifiers.mypy
        assert task.verifiers.timeout_s >= 30
        test_text = (task.repo / "tests" / f"test_{name}.py").read_text()
        for leftover in ("use_correct", "run_slow", "pytest.skip", "python_programs"):
            assert leftover not in test_text, (task.id, leftover)
        assert not (task.repo / "conftest.py").exists()
        result = git_apply(task.repo, task.gold_patch, check=True)
        assert result.returncode == 0, (task.id, result.stderr)


def test_quixbugs_gold_is_one_line(quixbugs_dir: Path) -> None:
    for task in load_taskset(quixbugs_dir):
        assert task.gold_patch is not None
        body = task.gold_patch.split("\n")
        removed = [x for x in body if x.startswith("-") and not x.startswith("---")]
        added = [x for x in body if x.startswith("+") and not x.startswith("+++")]
        assert len(removed) <= 1 and len(added) == 1, (task.id, removed, added)
        assert '"""' not in "".join(removed + added)


def test_quixbugs_slow_cases_left_out(quixbugs_dir: Path) -> None:
    repo = quixbugs_dir / "quixbugs-knapsack" / "repo"
    data = (repo / "json_testcases" / "knapsack.json").read_text().splitlines()
    original = (QUIXBUGS / "json_testcases" / "knapsack.json").read_text().splitlines()
    assert len(data) == len(original) - 1
    assert not any("6404180" in line for line in data)
    lev = quixbugs_dir / "quixbugs-levenshtein" / "repo" / "json_testcases" / "levenshtein.json"
    assert "amanaplanacanalpanama" not in lev.read_text()
    assert load_task(quixbugs_dir / "quixbugs-mergesort").verifiers.timeout_s > 30


def test_quixbugs_sample_buggy_fails_gold_passes(quixbugs_dir: Path) -> None:
    check_buggy_fails_gold_passes(
        [load_task(quixbugs_dir / f"quixbugs-{name}") for name in QUIXBUGS_SAMPLE]
    )


def test_humanevalfix_tasks_load_and_gold_applies(humanevalfix_dir: Path) -> None:
    tasks = load_taskset(humanevalfix_dir)
    assert len(tasks) == 164
    assert {t.id for t in tasks} == {f"humanevalfix-python-{n}" for n in range(164)}
    for task in tasks:
        assert task.fail_to_pass == ["tests/test_solution.py"]
        assert task.gold_patch and "--- a/solution.py" in task.gold_patch
        test_text = (task.repo / "tests" / "test_solution.py").read_text()
        assert "\ndef test_" in test_text and "from solution import" in test_text
        result = git_apply(task.repo, task.gold_patch, check=True)
        assert result.returncode == 0, (task.id, result.stderr)


def test_humanevalfix_helper_names_imported(humanevalfix_dir: Path) -> None:
    test_text = (humanevalfix_dir / "humanevalfix-python-32" / "repo" / "tests").joinpath(
        "test_solution.py"
    )
    assert "from solution import find_zero, poly\n" in test_text.read_text()
    statement = load_task(humanevalfix_dir / "humanevalfix-python-0").statement
    assert "has_close_elements" in statement and "threshold" in statement


def test_humanevalfix_sample_buggy_fails_gold_passes(humanevalfix_dir: Path) -> None:
    check_buggy_fails_gold_passes(
        [load_task(humanevalfix_dir / f"humanevalfix-python-{n}") for n in HUMANEVALFIX_SAMPLE]
    )


def test_deterministic_and_refuses_overwrite(tmp_path: Path, quixbugs_dir: Path) -> None:
    again = import_quixbugs(QUIXBUGS, tmp_path / "q")
    assert tree_digest(tmp_path / "q") == tree_digest(quixbugs_dir)
    with pytest.raises(UsageError, match="not empty"):
        import_quixbugs(QUIXBUGS, tmp_path / "q", only=["gcd"])
    (again[0] / "stray.txt").write_text("x")
    assert import_quixbugs(QUIXBUGS, tmp_path / "q", overwrite=True) == again
    assert tree_digest(tmp_path / "q") == tree_digest(quixbugs_dir)

    first = import_humanevalfix(HUMANEVALFIX, tmp_path / "h1", only=["Python/3", "7"])
    second = import_humanevalfix(HUMANEVALFIX / "humanevalpack-python.jsonl", tmp_path / "h2")
    assert [p.name for p in first] == ["humanevalfix-python-3", "humanevalfix-python-7"]
    assert len(second) == 164
    for path in first:
        assert tree_digest(path) == tree_digest(tmp_path / "h2" / path.name)
    with pytest.raises(UsageError, match="not empty"):
        import_humanevalfix(HUMANEVALFIX, tmp_path / "h1", only=["humanevalfix-python-3"])


def test_only_selects_and_checks_names(tmp_path: Path) -> None:
    written = import_quixbugs(QUIXBUGS, tmp_path / "q", only=["quixbugs-gcd", "hanoi"])
    assert [p.name for p in written] == ["quixbugs-gcd", "quixbugs-hanoi"]
    with pytest.raises(UsageError, match="did you mean 'gcd'"):
        import_quixbugs(QUIXBUGS, tmp_path / "q2", only=["gdc"])
    with pytest.raises(UsageError, match="unknown HumanEvalFix task"):
        import_humanevalfix(HUMANEVALFIX, tmp_path / "h", only=["Python/999"])
    assert not (tmp_path / "q2").exists() and not (tmp_path / "h").exists()


def test_bad_sources(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        import_quixbugs(QUIXBUGS, tmp_path / "file", only=["gcd"])
    with pytest.raises(UsageError, match="not a directory"):
        import_quixbugs(tmp_path / "missing", tmp_path / "out")
    with pytest.raises(UsageError, match="not a QuixBugs checkout"):
        import_quixbugs(HUMANEVALFIX, tmp_path / "out")
    with pytest.raises(UsageError, match="HumanEvalFix"):
        import_humanevalfix(QUIXBUGS, tmp_path / "out")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "Python/0"}\n')
    with pytest.raises(UsageError, match="not a HumanEvalFix row"):
        import_humanevalfix(bad, tmp_path / "out")
    bad.write_text("not json\n")
    with pytest.raises(UsageError, match="not JSON"):
        import_humanevalfix(bad, tmp_path / "out")
