"""QuixBugs (Python) → one self-contained task directory per program with a pytest file.

Each task `quixbugs-<program>/` holds:

- `repo/<program>.py`: the buggy program, as in `python_programs/`;
- `repo/tests/test_<program>.py`: the dataset's test file, rewritten to import the program
  directly (the `pytest.use_correct` switch and the `--correct` conftest are gone);
- `repo/tests/load_testdata.py` + `repo/json_testcases/<program>.json` and/or
  `repo/tests/node.py`, when the test file uses them; `repo/pytest.ini` (`pythonpath = .`);
- `gold.diff`: the minimal fix. The dataset's fixed files drop the docstring and some keep
  alternative versions in strings, so the fix is computed on code lines only (string-literal
  statements, comments and blank lines ignored) and applied to the buggy file;
- `ISSUE.md` (statement from the program's docstring) and `task.toml`.

Left out on purpose: test cases the dataset skips (the knapsack case that only runs with
`--runslow` and the levenshtein case skipped as too slow) are removed from the JSON data and
their skip branches from the test, since a skipped test counts as failed.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import io
import json
import tokenize
from pathlib import Path
from typing import TypeGuard

from ooda.agent.contracts.errors import UsageError
from ooda.tasks.importers.common import (
    PYTEST_INI,
    TaskFiles,
    check_dest,
    ensure_newline,
    select,
    unified_diff,
    write_task,
)

PREFIX = "quixbugs-"
"""Task ids are PREFIX + program name."""

DEFAULT_TIMEOUT_S = 30.0
"""Per-verifier limit; the buggy bitcount, sqrt and find_first_in_sorted loop forever."""

SLOW_TIMEOUT_S = {"mergesort": 60.0, "levenshtein": 60.0}
"""Slow ones: buggy mergesort takes 5-20 s to fail, fixed levenshtein's tests take seconds."""

_LAYOUT = ("python_programs", "correct_python_programs", "python_testcases")


def quixbugs_programs(src: Path) -> list[str]:
    """Names of the programs in the QuixBugs checkout `src` that have a pytest file."""
    _check_src(src)
    names = []
    for test in (src / "python_testcases").glob("test_*.py"):
        name = test.stem.removeprefix("test_")
        if (src / "python_programs" / f"{name}.py").is_file() and (
            src / "correct_python_programs" / f"{name}.py"
        ).is_file():
            names.append(name)
    return sorted(names)


def import_quixbugs(
    src: Path, dest: Path, *, only: list[str] | None = None, overwrite: bool = False
) -> list[Path]:
    """Write one task directory per QuixBugs program under `dest`; return them, sorted.

    `only` selects programs by name (`gcd`) or task id (`quixbugs-gcd`).
    """
    available = quixbugs_programs(src)
    wanted = None if only is None else [n.removeprefix(PREFIX) for n in only]
    names = select(available, wanted, "QuixBugs program")
    built = [build_task(src, name) for name in names]
    check_dest(dest, [t.name for t in built], overwrite)
    dest.mkdir(parents=True, exist_ok=True)
    return [write_task(dest, t) for t in built]


def build_task(src: Path, name: str) -> TaskFiles:
    """The task files for QuixBugs program `name` (nothing written)."""
    buggy = _read(src / "python_programs" / f"{name}.py")
    correct = _read(src / "correct_python_programs" / f"{name}.py")
    test_src = _read(src / "python_testcases" / f"test_{name}.py")
    test_text, skipped = rewrite_test(test_src, name)
    repo = {
        f"{name}.py": buggy,
        f"tests/test_{name}.py": test_text,
        "pytest.ini": PYTEST_INI,
    }
    imported = _imported_modules(test_text)
    if "load_testdata" in imported:
        repo["tests/load_testdata.py"] = _read(src / "python_testcases" / "load_testdata.py")
        cases = _read(src / "json_testcases" / f"{name}.json")
        repo[f"json_testcases/{name}.json"] = drop_cases(cases, skipped, name)
    elif skipped:
        raise UsageError(f"QuixBugs test_{name}.py skips cases but reads no JSON test data")
    if "node" in imported:
        repo["tests/node.py"] = _read(src / "python_testcases" / "node.py")
    fixed = minimal_fix(buggy, correct)
    gold = unified_diff(f"{name}.py", buggy, fixed)
    return TaskFiles(
        name=PREFIX + name,
        statement=statement(name, buggy),
        repo=repo,
        gold_patch=gold,
        fail_to_pass=[f"tests/test_{name}.py"],
        timeout_s=SLOW_TIMEOUT_S.get(name, DEFAULT_TIMEOUT_S),
        comment=f"Imported from QuixBugs (MIT licence): python_programs/{name}.py",
    )


def statement(name: str, buggy: str) -> str:
    """The task statement: the program's docstring and what is expected."""
    doc = "\n\n".join(inspect.cleandoc(s) for s in _string_statements(buggy)).strip()
    head = (
        f"The function in `{name}.py` has a bug on a single line (a wrong, missing or extra "
        f"expression), so it does not do what its description says. Fix `{name}.py` so that "
        f"the tests in `tests/test_{name}.py` pass; do not change the tests."
    )
    return f"{head}\n\nDescription:\n\n{doc}\n" if doc else head + "\n"


def rewrite_test(source: str, name: str) -> tuple[str, list[object]]:
    """Make a QuixBugs test file import the program directly and drop its skip branches.

    Returns the new text and the inputs of the test cases whose skip branch was removed.
    """
    tree = ast.parse(source)
    lines = source.split("\n")
    replace: dict[int, tuple[int, str | None]] = {}  # first line → (last line, new text)
    skipped: list[object] = []
    for node in tree.body:
        if isinstance(node, ast.If) and _is_pytest_attr(node.test, "use_correct"):
            replace[node.lineno] = (_end(node), _direct_import(node, name))
    for sub in ast.walk(tree):
        if isinstance(sub, ast.If) and _is_skip(sub):
            skipped.append(_skipped_input(sub, name))
            replace[sub.lineno] = (_end(sub), None)
    if not any(text for _, text in replace.values()):
        raise UsageError(f"QuixBugs test_{name}.py: no `pytest.use_correct` import switch")
    out: list[str] = []
    index = 1
    while index <= len(lines):
        if index in replace:
            last, text = replace[index]
            if text is not None:
                out.append(text)
            elif out and out[-1].rstrip().endswith(":") and last < len(lines):
                # A removed skip branch at the top of a function: drop the blank line after it.
                if not lines[last].strip():
                    last += 1
            index = last + 1
            continue
        out.append(lines[index - 1])
        index += 1
    text = "\n".join(out)
    if not _uses_pytest(text):
        text = "\n".join(line for line in out if line.strip() != "import pytest").lstrip("\n")
    return ensure_newline(text), skipped


def drop_cases(cases: str, skipped: list[object], name: str) -> str:
    """The JSON-lines test data without the cases whose input is in `skipped`."""
    kept: list[str] = []
    found = 0
    for line in cases.split("\n"):
        if not line.strip():
            continue
        if json.loads(line)[0] in skipped:
            found += 1
        else:
            kept.append(line)
    if found < len(skipped):
        raise UsageError(f"QuixBugs {name}.json: a skipped case is not in the data")
    return "\n".join(kept) + "\n"


def minimal_fix(buggy: str, correct: str) -> str:
    """`buggy` with only its differing code lines replaced by the fixed file's code lines."""
    old = _code_lines(buggy)
    new = _code_lines(correct)
    buggy_lines = buggy.split("\n")
    correct_lines = correct.split("\n")
    matcher = difflib.SequenceMatcher(None, [k for _, k in old], [k for _, k in new], False)
    edits: list[tuple[int, int, list[str]]] = []  # (start, end) line slice of buggy → lines
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        lines = correct_lines[new[j1][0] : new[j2 - 1][0] + 1] if j2 > j1 else []
        lines = [line.rstrip() for line in lines]
        if i2 > i1:
            edits.append((old[i1][0], old[i2 - 1][0] + 1, lines))
        else:
            at = old[i1 - 1][0] + 1 if i1 > 0 else (old[0][0] if old else 0)
            edits.append((at, at, lines))
    if not edits:
        raise UsageError("QuixBugs: the fixed program has the same code as the buggy one")
    for start, end, lines in sorted(edits, reverse=True):
        buggy_lines[start:end] = lines
    return "\n".join(buggy_lines)


def _code_lines(source: str) -> list[tuple[int, str]]:
    """(0-based line index, line without comment and trailing space) of each code line."""
    tree = ast.parse(source)
    ignored: set[int] = set()
    for node in ast.walk(tree):
        if _is_string_statement(node):
            ignored.update(range(node.lineno - 1, _end(node)))
    comment_at: dict[int, int] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comment_at[tok.start[0] - 1] = tok.start[1]
    result = []
    for index, line in enumerate(source.split("\n")):
        if index in ignored:
            continue
        key = line[: comment_at[index]] if index in comment_at else line
        key = key.rstrip()
        if key.strip():
            result.append((index, key))
    return result


def _string_statements(source: str) -> list[str]:
    """The module-level bare string statements (docstrings) of `source`."""
    texts = []
    for node in ast.parse(source).body:
        if _is_string_statement(node):
            texts.append(str(ast.literal_eval(node.value)))
    return texts


def _is_string_statement(node: ast.AST) -> TypeGuard[ast.Expr]:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _end(node: ast.stmt) -> int:
    return node.end_lineno if node.end_lineno is not None else node.lineno


def _is_pytest_attr(node: ast.expr, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "pytest"
    )


def _is_skip(node: ast.If) -> bool:
    if len(node.body) != 1 or node.orelse:
        return False
    stmt = node.body[0]
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and _is_pytest_attr(stmt.value.func, "skip")
    )


def _skipped_input(node: ast.If, name: str) -> object:
    for sub in ast.walk(node.test):
        if (
            isinstance(sub, ast.Compare)
            and isinstance(sub.left, ast.Name)
            and sub.left.id == "input_data"
            and len(sub.ops) == 1
            and isinstance(sub.ops[0], ast.Eq)
        ):
            return ast.literal_eval(sub.comparators[0])
    raise UsageError(f"QuixBugs test_{name}.py: a skip branch does not name its input")


def _direct_import(node: ast.If, name: str) -> str:
    if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.ImportFrom):
        imp = node.orelse[0]
        if imp.module == f"python_programs.{name}":
            return f"from {name} import " + ", ".join(a.name for a in imp.names)
    raise UsageError(f"QuixBugs test_{name}.py: unexpected import switch")


def _imported_modules(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def _uses_pytest(source: str) -> bool:
    return any(
        isinstance(node, ast.Name) and node.id == "pytest" for node in ast.walk(ast.parse(source))
    )


def _check_src(src: Path) -> None:
    if not src.is_dir():
        raise UsageError(f"{src}: not a directory (expected a QuixBugs checkout)")
    missing = [d for d in _LAYOUT if not (src / d).is_dir()]
    if missing:
        raise UsageError(f"{src}: not a QuixBugs checkout (no {missing[0]}/)")


def _read(path: Path) -> str:
    try:
        return ensure_newline(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from exc
