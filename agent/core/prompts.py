"""Prompt text: the first message for a task, and the feedback message for a failed attempt."""

from __future__ import annotations

import re
from pathlib import Path

from ooda.agent.edits.search_replace import SearchReplace
from ooda.agent.edits.udiff import UnifiedDiff
from ooda.tasks.loader import Task

SYSTEM_PROMPT = f"""\
You are an expert software engineer fixing a bug in a Python repository.
{SearchReplace.prompt}
{UnifiedDiff.prompt}
Do not edit tests, conftest.py or tool configuration: such edits are rejected.
Think briefly, then give the edits."""
"""Asks for SEARCH/REPLACE blocks (the cheapest format to generate); each format's teaching
text lives beside its parser in agent/edits/. Whole files and bare definitions are accepted
too (docs/EDIT_FORMATS.md) but not asked for: they cost more tokens."""

CONTEXT_BUDGET_CHARS = 60_000
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".tox"}


def first_prompt(
    task: Task, context_chars: int = CONTEXT_BUDGET_CHARS, *, told: str = ""
) -> list[dict[str, str]]:
    """The system and user messages that start a candidate from scratch; `told`: what earlier
    candidates did and how they failed (agent/core/schedule.digest), shown before the ask."""
    parts = [f"Task id: {task.id}", "", "# Issue", task.statement.strip(), ""]
    files = relevant_files(task)
    shown: list[str] = []
    used = 0
    for rel in files:
        try:
            text = (task.repo / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if used + len(text) > context_chars:
            continue
        used += len(text)
        shown.append(f"{rel}\n```python\n{text}\n```")
    if shown:
        parts += ["# Relevant files (current contents)", "", *shown, ""]
    tests = task.fail_to_pass or ([task.test_cmd] if task.test_cmd else [])
    if tests:
        parts += ["# Tests that must pass after your change", *[f"- {t}" for t in tests], ""]
    if told:
        parts += ["# Earlier attempts", told, ""]
    parts.append("Fix the issue with SEARCH/REPLACE blocks.")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    ]


def feedback_prompt(
    status: str, reason: str, summary: str, patch: str, siblings: list[str] | None = None
) -> str:
    """The user message that follows a failed attempt's answer in a next-round conversation."""
    lines = [f"Your previous answer did not solve the task ({status}): {reason}"]
    if status == "invalid_edit":
        lines.append("None of its edits were applied: the files are as they were before it.")
    else:
        lines += [
            "Its edits are applied now; further edits apply on top of them. The change so far:",
            f"```diff\n{patch.strip()}\n```",
        ]
    if summary.strip():
        lines += ["", "What failed:", summary.strip()]
    if siblings:
        lines += ["", "Other attempts failed like this:", *[f"- {s}" for s in siblings]]
    lines += ["", "Fix it. Answer with SEARCH/REPLACE blocks against the current files."]
    return "\n".join(lines)


def relevant_files(task: Task) -> list[str]:
    """Repo files worth showing: named by the statement or the tests, then the rest, small first."""
    all_py = sorted(
        str(p.relative_to(task.repo))
        for p in task.repo.rglob("*.py")
        if not SKIP_DIRS.intersection(p.relative_to(task.repo).parts)
    )
    test_files = [t.split("::")[0] for t in task.fail_to_pass]
    mentioned = [f for f in all_py if _mentioned(f, task.statement)]
    imported = [f for f in all_py if any(_imported_by(task.repo / t, f) for t in test_files)]
    ordered: list[str] = []
    for group in (mentioned, imported, [t for t in test_files if t in all_py]):
        ordered += [f for f in group if f not in ordered]
    rest = [f for f in all_py if f not in ordered and not _is_test(f)]
    rest.sort(key=lambda f: (task.repo / f).stat().st_size)
    return ordered + rest


def _mentioned(rel: str, statement: str) -> bool:
    module = rel[:-3].replace("/", ".")
    stem = Path(rel).stem
    return (
        rel in statement
        or module in statement
        or (
            stem not in {"__init__", "main", "utils"}
            and re.search(rf"\b{re.escape(stem)}\b", statement) is not None
        )
    )


def _imported_by(test_path: Path, rel: str) -> bool:
    try:
        text = test_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    module = rel[:-3].replace("/", ".").removesuffix(".__init__")
    last = module.rsplit(".", 1)[-1]
    pattern = (
        rf"^\s*(from\s+[\w.]*\b{re.escape(last)}\b\s+import|import\s+[\w.]*\b{re.escape(last)}\b)"
    )
    return re.search(pattern, text, re.M) is not None


def _is_test(rel: str) -> bool:
    name = Path(rel).name
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or bool({"tests", "test"}.intersection(Path(rel).parts))
    )
