"""Tests for tasks/loader.py (task.toml validation) and the bundled example tasks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.tasks.loader import (
    Task,
    VerifierOptions,
    is_task_dir,
    load_task,
    load_taskset,
    task_from_repo,
)


def make_task(
    root: Path, toml: str, files: dict[str, str] | None = None, repo: bool = True
) -> Path:
    """Write a task directory under `root` with the given task.toml text and extra files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text(toml, encoding="utf-8")
    if repo:
        (root / "repo").mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


MINIMAL = 'statement = "fix it"\nfail_to_pass = ["tests/test_a.py"]\n'


def error_of(path: Path) -> str:
    with pytest.raises(UsageError) as info:
        load_task(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_minimal_task_defaults(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "gcd", MINIMAL))
    assert task.id == "gcd"
    assert task.statement == "fix it"
    assert task.repo == (tmp_path / "gcd" / "repo").resolve()
    assert task.root == (tmp_path / "gcd").resolve()
    assert task.fail_to_pass == ["tests/test_a.py"]
    assert task.pass_to_pass == []
    assert task.gold_patch is None and task.test_patch is None
    assert task.verifiers == VerifierOptions()
    assert task.test_cmd is None and task.requirements is None and task.replay is None


def test_full_task(tmp_path: Path) -> None:
    toml = """
id = "my-task"
statement_file = "ISSUE.md"
repo = "src"
fail_to_pass = ["tests/test_a.py::test_x"]
pass_to_pass = ["tests/test_b.py"]
gold_patch = "gold.diff"
test_patch = "sub/tests.diff"
test_cmd = "python -m pytest -q"
requirements = "reqs.txt"
replay = "answers.jsonl"
[verifiers]
ruff = false
mypy = true
timeout_s = 12
"""
    files = {
        "ISSUE.md": "The issue.\n",
        "gold.diff": "--- a/x\n+++ b/x\n",
        "sub/tests.diff": "tests\n",
        "src/reqs.txt": "attrs\n",
        "answers.jsonl": "{}\n",
    }
    root = make_task(tmp_path / "t", toml, files, repo=False)
    task = load_task(root)
    assert task.id == "my-task"
    assert task.statement == "The issue.\n"
    assert task.repo == root.resolve() / "src"
    assert task.pass_to_pass == ["tests/test_b.py"]
    assert task.gold_patch == "--- a/x\n+++ b/x\n"
    assert task.test_patch == "tests\n"
    assert task.test_cmd == "python -m pytest -q"
    assert task.requirements == root.resolve() / "src" / "reqs.txt"
    assert task.replay == root.resolve() / "answers.jsonl"
    assert task.verifiers == VerifierOptions(ruff=False, mypy=True, timeout_s=12.0)


def test_auto_detected_requirements_and_replay(tmp_path: Path) -> None:
    files = {"requirements.txt": "attrs\n", "replay.jsonl": "{}\n"}
    root = make_task(tmp_path / "t", MINIMAL, files)
    task = load_task(root)
    assert task.requirements == root.resolve() / "requirements.txt"
    assert task.replay == root.resolve() / "replay.jsonl"


def test_task_toml_path_names_its_directory(tmp_path: Path) -> None:
    root = make_task(tmp_path / "gcd", MINIMAL)
    assert load_task(root / "task.toml").id == "gcd"


def test_test_cmd_alone_is_enough(tmp_path: Path) -> None:
    toml = 'statement = "s"\ntest_cmd = "PYTHONPATH=src pytest -q tests"\n'
    task = load_task(make_task(tmp_path / "t", toml))
    assert task.fail_to_pass == [] and task.test_cmd == "PYTHONPATH=src pytest -q tests"


@pytest.mark.parametrize("cmd", ["make test", "pytest -q tests && true", "pytest; exit 0"])
def test_a_test_cmd_graded_by_exit_status_alone_is_refused(tmp_path: Path, cmd: str) -> None:
    toml = f'statement = "s"\ntest_cmd = "{cmd}"\n'
    message = error_of(make_task(tmp_path / "t", toml))
    assert "not a plain pytest invocation" in message and "exit status alone" in message


def test_protected_patterns(tmp_path: Path) -> None:
    assert load_task(make_task(tmp_path / "a", MINIMAL)).protected == []
    toml = MINIMAL + 'protected = ["pkg/helpers.py", "!xarray/testing.py"]\n'
    task = load_task(make_task(tmp_path / "b", toml))
    assert task.protected == ["pkg/helpers.py", "!xarray/testing.py"]
    assert "'protected' must be a list" in error_of(
        make_task(tmp_path / "c", MINIMAL + 'protected = "pkg/helpers.py"\n')
    )
    assert "empty pattern" in error_of(make_task(tmp_path / "d", MINIMAL + 'protected = [" "]\n'))


def test_missing_path_and_not_a_directory(tmp_path: Path) -> None:
    assert "no such file" in error_of(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    assert "not a directory" in error_of(tmp_path / "file")


def test_plain_repo_is_not_a_task_dir(tmp_path: Path) -> None:
    message = error_of(tmp_path)
    assert "not a task directory (no task.toml)" in message
    assert "--statement" in message
    assert not is_task_dir(tmp_path)
    assert is_task_dir(make_task(tmp_path / "t", MINIMAL))


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    message = error_of(make_task(tmp_path / "t", 'statement = "s"\nfail_to_pass = [\n"a" "b"]\n'))
    assert "TOML syntax error" in message and "line 3" in message


def test_unknown_key_suggests_closest(tmp_path: Path) -> None:
    message = error_of(make_task(tmp_path / "t", MINIMAL + 'pass_to_pas = ["x"]\n'))
    assert "unknown key 'pass_to_pas'" in message
    assert "did you mean 'pass_to_pass'" in message


def test_unknown_verifier_key(tmp_path: Path) -> None:
    message = error_of(make_task(tmp_path / "t", MINIMAL + "[verifiers]\ntimeout = 5\n"))
    assert "'timeout'" in message and "did you mean 'timeout_s'" in message


def test_several_unknown_keys_all_named(tmp_path: Path) -> None:
    message = error_of(make_task(tmp_path / "t", MINIMAL + "zzz = 1\nqqq = 2\n"))
    assert "'zzz'" in message and "'qqq'" in message


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("id = 3\n", "'id' must be a string"),
        ('pass_to_pass = "tests"\n', "'pass_to_pass' must be a list of strings"),
        ("pass_to_pass = [1]\n", "'pass_to_pass' must be a list of strings"),
        ('repo = ["r"]\n', "'repo' must be a string"),
        ('verifiers = "on"\n', "'verifiers' must be a table"),
        ('[verifiers]\nruff = "yes"\n', "'verifiers.ruff' must be true or false"),
        ("[verifiers]\nmypy = 1\n", "'verifiers.mypy' must be true or false"),
        ('[verifiers]\ntimeout_s = "5"\n', "'verifiers.timeout_s' must be a number"),
        ("[verifiers]\ntimeout_s = true\n", "'verifiers.timeout_s' must be a number"),
        ("[verifiers]\ntimeout_s = 0\n", "must be a positive number"),
        ("[verifiers]\ntimeout_s = -1.5\n", "must be a positive number"),
        ("[verifiers]\ntimeout_s = nan\n", "must be a positive number"),
        ('pass_to_pass = ["--co"]\n', "looks like an option"),
        ('id = "a/b"\n', "bad task id"),
    ],
)
def test_wrong_types(tmp_path: Path, extra: str, fragment: str) -> None:
    # Put table content last so it does not swallow the top-level keys.
    assert fragment in error_of(make_task(tmp_path / "t", MINIMAL + extra))


def test_missing_repo(tmp_path: Path) -> None:
    message = error_of(make_task(tmp_path / "t", MINIMAL, repo=False))
    assert "repo directory 'repo' not found" in message


@pytest.mark.parametrize("key", ["gold_patch", "test_patch"])
def test_missing_patch_files(tmp_path: Path, key: str) -> None:
    message = error_of(make_task(tmp_path / "t", MINIMAL + f'{key} = "x.diff"\n'))
    assert f"{key} file 'x.diff' not found" in message


def test_statement_rules(tmp_path: Path) -> None:
    no_statement = 'fail_to_pass = ["t"]\n'
    assert "no statement" in error_of(make_task(tmp_path / "a", no_statement))
    blank = 'statement = "  "\nfail_to_pass = ["t"]\n'
    assert "no statement" in error_of(make_task(tmp_path / "b", blank))
    both = MINIMAL + 'statement_file = "I.md"\n'
    assert "not both" in error_of(make_task(tmp_path / "c", both, {"I.md": "x"}))
    missing = 'statement_file = "I.md"\nfail_to_pass = ["t"]\n'
    assert "statement_file 'I.md' not found" in error_of(make_task(tmp_path / "d", missing))


def test_nothing_to_check(tmp_path: Path) -> None:
    message = error_of(make_task(tmp_path / "t", 'statement = "s"\nfail_to_pass = []\n'))
    assert "fail_to_pass" in message and "test_cmd" in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("gold_patch", "../outside.diff"),
        ("gold_patch", "/etc/passwd"),
        ("repo", "a/../../x"),
        ("statement_file", "../../ISSUE.md"),
        ("replay", "../r.jsonl"),
        ("requirements", "../requirements.txt"),
    ],
)
def test_paths_must_stay_inside(tmp_path: Path, key: str, value: str) -> None:
    (tmp_path / "outside.diff").write_text("x")
    (tmp_path / "r.jsonl").write_text("x")
    (tmp_path / "requirements.txt").write_text("x")
    toml = 'fail_to_pass = ["t"]\n' + f'{key} = "{value}"\n'
    if key != "statement_file":
        toml = 'statement = "s"\n' + toml
    message = error_of(make_task(tmp_path / "t", toml))
    assert "outside the task directory" in message or "must be relative" in message


def test_inner_dotdot_that_stays_inside_is_fine(tmp_path: Path) -> None:
    toml = MINIMAL + 'gold_patch = "x/../gold.diff"\n'
    root = make_task(tmp_path / "t", toml, {"gold.diff": "g", "x/keep": ""})
    assert load_task(root).gold_patch == "g"


def test_missing_explicit_requirements_and_replay(tmp_path: Path) -> None:
    message = error_of(make_task(tmp_path / "a", MINIMAL + 'requirements = "r.txt"\n'))
    assert "requirements file 'r.txt' not found" in message
    message = error_of(make_task(tmp_path / "b", MINIMAL + 'replay = "r.jsonl"\n'))
    assert "replay file 'r.jsonl' not found" in message


def test_task_from_repo(tmp_path: Path) -> None:
    repo = tmp_path / "myrepo"
    repo.mkdir()
    task = task_from_repo(
        repo,
        statement="fix",
        fail_to_pass=["tests/test_x.py"],
        pass_to_pass=[],
        test_cmd=None,
        verifiers=VerifierOptions(timeout_s=5),
    )
    assert isinstance(task, Task)
    assert task.id == "myrepo" and task.repo == repo.resolve() and task.root is None
    named = task_from_repo(
        repo,
        statement="fix",
        fail_to_pass=[],
        pass_to_pass=[],
        test_cmd="python -m pytest -q",
        verifiers=VerifierOptions(),
        task_id="custom",
    )
    assert named.id == "custom" and named.test_cmd == "python -m pytest -q"


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"repo": "missing"}, "no such file"),
        ({"statement": " "}, "no statement"),
        ({"fail_to_pass": []}, "nothing to check"),
        ({"test_cmd": ""}, "test command is empty"),
        ({"test_cmd": "pytest -q && true"}, "not a plain pytest invocation"),
        ({"verifiers": VerifierOptions(timeout_s=0)}, "positive number"),
        ({"task_id": "../x"}, "bad task id"),
        ({"fail_to_pass": ["-k"]}, "looks like an option"),
    ],
)
def test_task_from_repo_errors(tmp_path: Path, change: dict[str, object], fragment: str) -> None:
    (tmp_path / "r").mkdir()
    args: dict[str, object] = {
        "repo": tmp_path / "r",
        "statement": "fix",
        "fail_to_pass": ["t.py"],
        "pass_to_pass": [],
        "test_cmd": None,
        "verifiers": VerifierOptions(),
    }
    if change.get("repo") == "missing":
        change = {"repo": tmp_path / "missing"}
    args.update(change)
    with pytest.raises(UsageError, match=fragment):
        task_from_repo(**args)  # type: ignore[arg-type]


def test_load_taskset(tmp_path: Path) -> None:
    make_task(tmp_path / "set" / "b", MINIMAL)
    make_task(tmp_path / "set" / "a", MINIMAL)
    (tmp_path / "set" / "not-a-task").mkdir()
    (tmp_path / "set" / "README.md").write_text("x")
    tasks = load_taskset(tmp_path / "set")
    assert [t.id for t in tasks] == ["a", "b"]


def test_load_taskset_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        load_taskset(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no task directories"):
        load_taskset(tmp_path / "empty")
    make_task(tmp_path / "single", MINIMAL)
    with pytest.raises(UsageError, match="single task directory"):
        load_taskset(tmp_path / "single")
    make_task(tmp_path / "dup" / "a", 'id = "same"\n' + MINIMAL)
    make_task(tmp_path / "dup" / "b", 'id = "same"\n' + MINIMAL)
    with pytest.raises(UsageError, match="already used"):
        load_taskset(tmp_path / "dup")


# --- the bundled example tasks -------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "tasks" / "examples"
EXAMPLE_NAMES = ["interval_merge", "median", "word_count"]
SEARCH_REPLACE = re.compile(
    r"^(?P<path>[^\n]+)\n<<<<<<< SEARCH\n(?P<search>.*?)=======\n(?P<replace>.*?)>>>>>>> REPLACE$",
    re.MULTILINE | re.DOTALL,
)
FENCED_DIFF = re.compile(r"^```diff\n(?P<diff>.*?)^```$", re.MULTILINE | re.DOTALL)


def git_apply(repo: Path, patch: str, *, check: bool = False) -> bool:
    """`git apply [--check]` in `repo` (never an enclosing git repo); True when it applies."""
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(repo.parent))
    args = ["git", "apply", "--check", "-"] if check else ["git", "apply", "-"]
    done = subprocess.run(args, cwd=repo, input=patch, env=env, capture_output=True, text=True)
    return done.returncode == 0


def run_tests(repo: Path, tests: list[str]) -> str:
    """Host pytest on `tests` in `repo`: "passed" or "failed"."""
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    return "passed" if done.returncode == 0 and "skipped" not in done.stdout else "failed"


def outcome(task: Task, answer: str | None, gold: bool = False) -> str:
    """What a replayed answer does to a copy of the task's repo.

    A small stand-in for the real edit parser and verifier: "no_match" (an edit does not
    apply), "no_op" (nothing changes), "syntax" (a Python file no longer compiles), or the
    pytest result of fail_to_pass + pass_to_pass, "passed" or "failed".
    """
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(task.repo, work)
        before = {p: p.read_text() for p in work.rglob("*.py")}
        if gold:
            assert task.gold_patch is not None and git_apply(work, task.gold_patch)
        for block in SEARCH_REPLACE.finditer(answer or ""):
            target = work / block["path"].strip()
            text = target.read_text()
            if block["search"] not in text:
                return "no_match"
            target.write_text(text.replace(block["search"], block["replace"], 1))
        for block in FENCED_DIFF.finditer(answer or ""):
            if not git_apply(work, block["diff"]):
                return "no_match"
        after = {p: p.read_text() for p in work.rglob("*.py")}
        if answer is not None and after == before:
            return "no_op"
        for path, text in after.items():
            try:
                compile(text, str(path), "exec")
            except SyntaxError:
                return "syntax"
        return run_tests(work, task.fail_to_pass + task.pass_to_pass)


def read_replay(task: Task) -> list[dict[str, object]]:
    assert task.replay is not None
    lines = task.replay.read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines if line.strip()]
    for entry in entries:
        assert isinstance(entry, dict) and set(entry) <= {"round", "answer", "contains"}
        assert isinstance(entry["answer"], str) and entry["answer"].strip()
        assert isinstance(entry.get("round", 1), int) and entry.get("round", 1) >= 1
        assert isinstance(entry.get("contains", ""), str)
    return entries


def test_examples_load() -> None:
    tasks = load_taskset(EXAMPLES)
    assert [t.id for t in tasks] == EXAMPLE_NAMES
    for task in tasks:
        assert task.gold_patch is not None and task.replay is not None
        assert task.fail_to_pass and task.pass_to_pass
        assert git_apply(task.repo, task.gold_patch, check=True), task.id
        assert (EXAMPLES / "README.md").is_file()


def test_examples_clean_under_ruff_and_mypy(tmp_path: Path) -> None:
    for name in EXAMPLE_NAMES:
        repo = tmp_path / name
        shutil.copytree(EXAMPLES / name / "repo", repo)
        for tool in (
            ["ruff", "check", "--isolated", "--no-cache", "."],
            ["mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull, "."],
        ):
            done = subprocess.run(
                [sys.executable, "-m", *tool], capture_output=True, text=True, cwd=repo
            )
            assert done.returncode == 0, (name, done.stdout)


def test_examples_buggy_fail_gold_pass_and_replays_behave() -> None:
    jobs: list[tuple[str, int, Task, str | None, bool]] = []
    for task in load_taskset(EXAMPLES):
        jobs.append((task.id, 0, task, None, False))  # the buggy repo
        jobs.append((task.id, 0, task, None, True))  # the gold patch
        for entry in read_replay(task):
            round_ = entry.get("round", 1)
            assert isinstance(round_, int) and isinstance(entry["answer"], str)
            jobs.append((task.id, round_, task, entry["answer"], False))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda job: outcome(job[2], job[3], job[4]), jobs))
    by_round: dict[tuple[str, int], list[str]] = {}
    for (task_id, round_, _, answer, gold), result in zip(jobs, results, strict=True):
        if answer is None:
            assert result == ("passed" if gold else "failed"), (task_id, gold, result)
        else:
            by_round.setdefault((task_id, round_), []).append(result)
    wrong_kinds = {"no_op", "no_match", "syntax", "failed"}
    # median: solvable only through feedback, every kind of wrong answer in round 1.
    assert sorted(by_round["median", 1]) == sorted(wrong_kinds)
    assert by_round["median", 2] == ["passed"]
    for name in ("word_count", "interval_merge"):
        assert "passed" in by_round[name, 1], by_round
        assert len(wrong_kinds & set(by_round[name, 1])) >= 2, by_round
        assert set(by_round[name, 2]) == {"passed"}


@pytest.mark.parametrize(
    ("path", "patterns", "protected"),
    [
        ("pkg/testing.py", [], True),
        ("numpy/testing/_private/utils.py", [], True),
        ("pandas/_testing/asserters.py", [], True),
        ("testing.py", [], True),
        ("pkg/core.py", [], False),
        ("pkg/attesting.py", [], False),
        ("xarray/testing.py", ["!xarray/testing.py"], False),
        ("pkg/helpers.py", ["pkg/helpers.py"], True),
        ("pkg/fixtures/data.py", ["pkg/fixtures/"], True),
    ],
)
def test_test_support_rule(path: str, patterns: list[str], protected: bool) -> None:
    from ooda.agent.support.testsupport import is_test_support, support_reason

    assert is_test_support(path, patterns) is protected
    assert (support_reason(path, patterns) is not None) is protected
