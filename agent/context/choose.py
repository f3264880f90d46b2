"""The context of a task's first prompt: which files, and which lines of them, within a token
budget.

A repository whose source files (with the tests the model may see) fit in the budget is shown
whole, as before: the files the statement names or the visible tests import first, then the
visible tests, then the rest, small first. A larger one is indexed (agent/context/index.py),
ranked from the task's text (rank.py) and shown in part (present.py); a very large one is
indexed only where the task's words point (quick.py), so the first request does not wait for
an index of every file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ooda.agent.context import quick
from ooda.agent.context.clues import read_clues
from ooda.agent.context.index import RepoIndex, is_test_file, list_python, load_index
from ooda.agent.context.present import Context, ShownFile, present, render, shown_tokens
from ooda.agent.context.rank import Ranking, rank
from ooda.agent.context.testhints import imported_sources, namesakes_of
from ooda.agent.context.visible import test_file, visible_tests
from ooda.tasks.loader import Task

RANKED_KEPT = 100
"""How many of the ranked files a context remembers (Context.ranked)."""
MAX_WHOLE_FILES = 200
"""More files than this are never all shown whole, however small."""


Refine = Callable[[RepoIndex, Ranking], Ranking]
"""A second opinion on a model-free ranking (the fast model's votes, agent/context/votes.py)."""


def choose_context(task: Task, budget: int, *, cache: bool = True,
                   refine: Refine | None = None) -> Context:
    """What the first prompt shows of `task.repo` within `budget` tokens; `refine` may
    re-rank a repository too large to show whole."""
    tests = shown_tests(task)
    paths = list_python(task.repo)
    whole = _whole_repo(task, paths, tests, budget)
    if whole is not None:
        return whole
    if quick.is_large(paths):  # too many to index before the first request: the task's part
        paths = quick.task_paths(task.repo, paths, task.statement, tests)
    index = load_index(task.repo, cache=cache, paths=paths)
    ranking = rank_task(index, task, tests)
    if refine is not None:
        ranking = refine(index, ranking)
    context = present(index, ranking, budget, must=tests)
    context.ranked = ranking.files[:RANKED_KEPT]
    return context


def shown_tests(task: Task) -> list[str]:
    """The files of the visible failing tests, each once: always in the prompt."""
    return [t for t in dict.fromkeys(test_file(t) for t in visible_tests(task))
            if (task.repo / t).is_file()]


def rank_task(index: RepoIndex, task: Task, tests: list[str]) -> Ranking:
    """The model-free ranking of `index` for the task (hints: the sources the visible tests
    import, and those they are named after)."""
    hints: list[str] = []
    for test in tests:
        for path in [*imported_sources(index, test), *namesakes_of(index, test)]:
            if path not in hints:
                hints.append(path)
    return rank(index, read_clues(task.statement), hints)


def _whole_repo(task: Task, paths: list[str], tests: list[str], budget: int) -> Context | None:
    """Every source file and visible test whole, when they fit the budget (else None)."""
    sources = [p for p in paths if not is_test_file(p)]
    if len(sources) + len(tests) > MAX_WHOLE_FILES:
        return None
    texts: dict[str, str] = {}
    for rel in [*sources, *tests]:
        try:  # a file in another encoding is shown as the index reads it (edits refuse it)
            texts[rel] = (task.repo / rel).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
    shown = [_whole_file(rel, text) for rel, text in texts.items()]
    if sum(f.tokens for f in shown) > budget:
        return None
    order = _whole_order(task, [f.path for f in shown if f.path not in tests], tests, texts)
    by_path = {f.path: f for f in shown}
    files = [by_path[p] for p in order]
    return Context(files, sum(f.tokens for f in files))


def _whole_file(rel: str, text: str) -> ShownFile:
    lines = text.splitlines()
    shown = render(rel, lines, [], set(), set())
    shown.tokens = shown_tokens(rel, text)
    return shown


def _whole_order(task: Task, sources: list[str], tests: list[str],
                 texts: dict[str, str]) -> list[str]:
    """Named in the statement, imported by a visible test, the visible tests, the rest
    small first."""
    named = set(resolve_paths_plain(sources, task.statement))
    imported = {s for s in sources for t in tests if _imports_module(texts.get(t, ""), s)}
    first = [s for s in sources if s in named]
    first += [s for s in sources if s in imported and s not in first]
    rest = sorted((s for s in sources if s not in first), key=lambda s: (len(texts[s]), s))
    return [*first, *tests, *rest]


def resolve_paths_plain(sources: list[str], statement: str) -> list[str]:
    """The sources the statement names by path, module or file stem."""
    named: list[str] = []
    for rel in sources:
        module = rel[:-3].replace("/", ".")
        stem = Path(rel).stem
        if (rel in statement or module in statement or (
                stem not in {"__init__", "main", "utils"}
                and re.search(rf"\b{re.escape(stem)}\b", statement))):
            named.append(rel)
    return named


def _imports_module(test_text: str, rel: str) -> bool:
    module = rel[:-3].replace("/", ".").removesuffix(".__init__")
    last = re.escape(module.rsplit(".", 1)[-1])
    pattern = rf"^\s*(from\s+[\w.]*\b{last}\b\s+import|import\s+[\w.]*\b{last}\b)"
    return re.search(pattern, test_text, re.MULTILINE) is not None


__all__ = ["Context", "choose_context", "rank_task"]
