"""Issue 40 #13: a repository with too many files to index before the first request is indexed
where the task's words point (agent/context/quick.py), found by `git grep` (or a scan in
Python where git cannot), and the prompt is chosen from that index as from a whole one."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from ooda.agent.context import index as index_module
from ooda.agent.context import quick, warm
from ooda.agent.context.choose import choose_context
from ooda.agent.context.clues import read_clues
from ooda.agent.context.index import list_python
from ooda.tasks.loader import Task

STATEMENT = ("scale_values() returns wrong totals for a negative factor; see "
             "calc/report.py and `calc.units.convert`:\n\n"
             "    ValueError: factor must be finite here\n")


def big_repo(root: Path, *, git: bool) -> Path:
    for k in range(300):
        folder = root / "calc" / f"part{k // 50}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{k}.py").write_text(f"def step_{k}(values):\n    return sum(values) + {k}\n")
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "scale.py").write_text(
        "def scale_values(values, factor):\n    return [v * abs(factor) for v in values]\n")
    (root / "calc" / "report.py").write_text("def report():\n    return 'report'\n")
    (root / "calc" / "units.py").write_text("def convert(x):\n    return x\n")
    (root / "calc" / "helpers.py").write_text("def helper():\n    return 1\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_totals.py").write_text(
        "from calc.helpers import helper\n\n\ndef test_total():\n    assert helper() == 1\n")
    if git:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    (root / "calc" / "checks.py").write_text(  # untracked: found all the same
        "def check(factor):\n    raise ValueError('factor must be finite here')\n")
    return root


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quick, "QUICK_MIN_FILES", 100)
    monkeypatch.setattr(quick, "QUICK_FILES", 20)


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("git", [True, False], ids=["git-grep", "python-scan"])
def test_the_index_covers_what_the_task_points_at(tmp_path: Path, git: bool) -> None:
    if git and shutil.which("git") is None:
        pytest.skip("no git")
    repo = big_repo(tmp_path / "repo", git=git)
    paths = list_python(repo)
    chosen = quick.quick_paths(repo, paths, read_clues(STATEMENT), ["tests/test_totals.py"])
    for wanted in ("calc/scale.py",  # the name the statement writes as code
                   "calc/report.py",  # named by path
                   "calc/units.py",  # named by its dotted module
                   "calc/checks.py",  # holds the quoted message (untracked)
                   "tests/test_totals.py", "calc/helpers.py"):  # the visible test, its import
        assert wanted in chosen, wanted
    assert len(chosen) <= quick.QUICK_FILES + 6 < len(paths)


@pytest.mark.usefixtures("small_limits")
def test_the_prompt_is_chosen_from_the_partial_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = big_repo(tmp_path / "repo", git=True)
    indexed: list[int] = []
    load = index_module.load_index

    def counted(repo: Path, **kwargs: object) -> index_module.RepoIndex:
        found = load(repo, **kwargs)  # type: ignore[arg-type]
        indexed.append(len(found.files))
        return found

    monkeypatch.setattr("ooda.agent.context.choose.load_index", counted)
    task = Task(id="t", statement=STATEMENT, repo=repo,
                fail_to_pass=["tests/test_totals.py::test_total"])
    context = choose_context(task, 2000, cache=False)
    assert "calc/scale.py" in [f.path for f in context.files]
    assert indexed and indexed[0] < len(list_python(repo))
    assert warm.start(repo) is None  # nothing to build ahead: the prompt's index is small


@pytest.mark.usefixtures("small_limits")
def test_files_chosen_ahead_are_those_the_prompt_would_choose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run chooses them while it checks its endpoint (warm.start); the prompt then uses
    them, once, and shows what it shows without them (`ooda prompt` chooses without)."""
    repo = big_repo(tmp_path / "repo", git=True)
    task = Task(id="t", statement=STATEMENT, repo=repo,
                fail_to_pass=["tests/test_totals.py::test_total"])
    alone = choose_context(task, 2000)
    chosen: list[str] = []
    choose = quick.statement_paths
    monkeypatch.setattr(quick, "statement_paths", lambda *a: chosen.append(
        threading.current_thread().name) or choose(*a))
    assert warm.start(repo, task) is None  # a thread of this process, not a child
    ahead = choose_context(task, 2000)
    assert chosen == ["ooda-context-ahead"]
    assert [(f.path, f.text) for f in ahead.files] == [(f.path, f.text) for f in alone.files]
    # a run given only a test command learns its failing test after the files were chosen
    # ahead: the statement's part is taken from then, the test's part added now
    learned = Task(id="t", statement=STATEMENT, repo=repo)
    assert warm.start(repo, learned) is None
    later = choose_context(task, 2000)
    assert chosen == ["ooda-context-ahead"] * 2
    assert [(f.path, f.text) for f in later.files] == [(f.path, f.text) for f in alone.files]
