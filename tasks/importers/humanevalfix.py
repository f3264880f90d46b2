"""HumanEvalFix (Python part of HumanEvalPack) → one self-contained task directory per row.

Each task `humanevalfix-python-<n>/` (from task_id `Python/<n>`) holds:

- `repo/solution.py`: `declaration` + `buggy_solution`;
- `repo/tests/test_solution.py`: the row's `test` code (which defines `check(candidate)`),
  without its trailing module-level `check(...)` call, plus a pytest function calling
  `check(<entry_point>)`; it imports from `solution` the entry point and any other
  top-level name of solution.py the test code uses (e.g. `poly` for Python/32);
- `repo/pytest.ini` (`pythonpath = .`), `gold.diff` (buggy → canonical solution),
  `ISSUE.md` (statement from the `signature` and `docstring` fields) and `task.toml`.

The buggy Python/10, /156 and /160 loop forever: the verifier timeout ends them.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.tasks.importers.common import (
    PYTEST_INI,
    TaskFiles,
    check_dest,
    ensure_newline,
    reference_adds_ruff_findings,
    select,
    unified_diff,
    write_task,
)

DATA_FILE = "humanevalpack-python.jsonl"
"""The file looked for when SRC is a directory."""

PREFIX = "humanevalfix-python-"
"""Task ids are PREFIX + the number in `Python/<n>`."""

TIMEOUT_S = 30.0
"""Per-verifier limit (the tests take well under a second; three buggy rows hang)."""

FIELDS = (
    "task_id",
    "declaration",
    "buggy_solution",
    "canonical_solution",
    "test",
    "entry_point",
    "docstring",
    "signature",
)
"""Row fields the importer needs."""


def read_rows(src: Path) -> list[dict[str, Any]]:
    """The rows of the HumanEvalFix `.jsonl` (or of DATA_FILE in the directory `src`)."""
    path = src / DATA_FILE if src.is_dir() else src
    if not path.is_file():
        raise UsageError(f"{src}: not a HumanEvalFix .jsonl file or a directory with {DATA_FILE}")
    rows: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from exc
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not JSON: {exc.msg}") from exc
        if not isinstance(row, dict):
            raise UsageError(f"{path}:{number}: not a JSON object")
        missing = [f for f in FIELDS if not isinstance(row.get(f), str)]
        if missing:
            raise UsageError(f"{path}:{number}: not a HumanEvalFix row (no {missing[0]!r})")
        rows.append(row)
    if not rows:
        raise UsageError(f"{path}: no rows")
    return rows


def task_name(task_id: str) -> str:
    """`Python/0` → `humanevalfix-python-0`."""
    language, _, number = task_id.partition("/")
    if language != "Python" or not number.isdigit():
        raise UsageError(f"HumanEvalFix: unexpected task_id {task_id!r} (want Python/<n>)")
    return PREFIX + number


def import_humanevalfix(
    src: Path, dest: Path, *, only: list[str] | None = None, overwrite: bool = False
) -> list[Path]:
    """Write one task directory per HumanEvalFix row under `dest`; return them, sorted.

    `only` selects rows by task id (`Python/0`), task name (`humanevalfix-python-0`) or number.
    """
    by_name = {task_name(row["task_id"]): row for row in read_rows(src)}
    wanted = None if only is None else [_normalise(item) for item in only]
    names = select(list(by_name), wanted, "HumanEvalFix task")
    names.sort(key=lambda n: int(n.removeprefix(PREFIX)))
    built = [build_task(by_name[name]) for name in names]
    # A reference fix that itself adds ruff findings (e.g. Python/141's `not x in y`) would
    # fail its own task: such tasks run without the ruff verifier.
    noisy = reference_adds_ruff_findings({name: solutions(by_name[name]) for name in names})
    for task_files in built:
        if task_files.name in noisy:
            task_files.ruff = False
            task_files.comment += "\nruff is off: the reference fix itself adds ruff findings."
    check_dest(dest, [t.name for t in built], overwrite)
    dest.mkdir(parents=True, exist_ok=True)
    return sorted((write_task(dest, t) for t in built), key=lambda p: p.name)


def solutions(row: dict[str, Any]) -> tuple[str, str]:
    """(buggy, canonical) text of solution.py for one row."""
    declaration = row["declaration"]
    buggy = ensure_newline(declaration + row["buggy_solution"])
    canonical = ensure_newline(declaration + row["canonical_solution"])
    return buggy, canonical


def build_task(row: dict[str, Any]) -> TaskFiles:
    """The task files for one HumanEvalFix row (nothing written)."""
    name = task_name(row["task_id"])
    buggy, canonical = solutions(row)
    return TaskFiles(
        name=name,
        statement=statement(row),
        repo={
            "solution.py": buggy,
            "tests/test_solution.py": test_file(row, buggy),
            "pytest.ini": PYTEST_INI,
        },
        gold_patch=unified_diff("solution.py", buggy, canonical),
        fail_to_pass=["tests/test_solution.py"],
        timeout_s=TIMEOUT_S,
        comment=f"Imported from HumanEvalFix (HumanEvalPack, MIT licence): {row['task_id']}",
    )


def statement(row: dict[str, Any]) -> str:
    """What the model is told: which function is wrong and what it should do."""
    entry = row["entry_point"]
    doc = row["docstring"].strip()
    return (
        f"The function `{entry}` in `solution.py` has a bug. Fix it so that "
        f"`{row['signature']}` does what its description says and the tests in "
        f"`tests/test_solution.py` pass; do not change the tests.\n\n"
        f"Description:\n\n{doc}\n"
    )


def test_file(row: dict[str, Any], solution: str) -> str:
    """The pytest file wrapping the row's `check(candidate)`."""
    entry = row["entry_point"]
    tree = ast.parse(row["test"])
    calls = [node for node in tree.body if _is_check_call(node)]
    if not any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body):
        raise UsageError(f"HumanEvalFix {row['task_id']}: the test defines no check()")
    drop = {i for n in calls for i in range(n.lineno - 1, n.end_lineno or n.lineno)}
    lines = row["test"].split("\n")
    kept = "\n".join(line for i, line in enumerate(lines) if i not in drop).strip("\n")
    imports = sorted(_solution_names_used(solution, row["test"]) | {entry})
    task_id = row["task_id"]
    return (
        f'"""Tests for solution.py: HumanEvalFix {task_id}, its check() run under pytest."""\n'
        "\n"
        f"from solution import {', '.join(imports)}\n"
        "\n"
        "\n"
        f"{_separate_defs(kept)}\n"
        "\n"
        "\n"
        f"def test_{entry}() -> None:\n"
        f"    check({entry})\n"
    )


def _is_check_call(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "check"
    )


def _separate_defs(code: str) -> str:
    """Keep the test code as written but with two blank lines before each top-level def."""
    out: list[str] = []
    for line in code.split("\n"):
        if line.startswith(("def ", "async def ", "class ")) and out:
            while out and not out[-1].strip():
                out.pop()
            out.extend(["", ""])
        out.append(line)
    return "\n".join(out)


def _solution_names_used(solution: str, test: str) -> set[str]:
    """Top-level functions/classes/variables of solution.py that the test code refers to."""
    defined: set[str] = set()
    for node in ast.parse(solution).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
    test_tree = ast.parse(test)
    bound_in_test: set[str] = set()
    for sub in ast.walk(test_tree):
        if isinstance(sub, ast.Import | ast.ImportFrom):
            bound_in_test.update((a.asname or a.name).split(".")[0] for a in sub.names)
    bound_in_test.update(n.name for n in test_tree.body if isinstance(n, ast.FunctionDef))
    used = {n.id for n in ast.walk(test_tree) if isinstance(n, ast.Name)}
    return (used & defined) - bound_in_test


def _normalise(item: str) -> str:
    if item.startswith(PREFIX):
        return item
    if item.isdigit():
        return PREFIX + item
    return task_name(item)
