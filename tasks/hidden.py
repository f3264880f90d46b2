"""What of a task is hidden from the model, and the task as a blind run lets the model see it.

A task's hidden tests are those its test patch brings (SPEC: `test_patch`, "applied only when
verifying, never shown to the model"): the FAIL_TO_PASS and PASS_TO_PASS lists that judge it,
the files the test patch touches, the test names it defines and the lines it adds. In a blind
run (docs/SWEBENCH.md) none of these is named, shown, run or fed back before the one patch
ooda submits is judged: the loop works on `visible_task(task)`, which keeps the statement and
the repository at its base and drops the rest. `HiddenTests.leaks(text)` finds any of them in
a text (the request log of a blind evaluation, a first prompt). Pure: no I/O beyond reading the
task's own repository files.

A task without a test patch has nothing hidden: its tests are in its repository (QuixBugs,
HumanEvalFix imports, a user's own repository) and a run may show and feed them back.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from ooda.tasks.loader import Task

MIN_LINE_CHARS = 16
"""Added lines shorter than this (stripped) are too generic to count as the hidden tests'
text (`)`, `import pytest`, `assert x == 1`)."""

_DEFINED = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)")


@dataclass(frozen=True)
class HiddenTests:
    """The hidden part of one task (empty when it has no test patch)."""

    ids: tuple[str, ...] = ()
    """The judging lists (FAIL_TO_PASS, then PASS_TO_PASS), as ids."""
    files: tuple[str, ...] = ()
    """The files the test patch touches."""
    names: tuple[str, ...] = ()
    """Test functions and classes the test patch defines that the base does not (dunder
    methods such as `__init__` left out: they name nothing of the tests'), and the
    last part of every FAIL_TO_PASS id that the base does not define either."""
    lines: tuple[str, ...] = ()
    """The test patch's added lines (stripped, at least MIN_LINE_CHARS) that are in neither
    the base version of their file nor the statement."""

    @property
    def any(self) -> bool:
        """Whether the task has hidden tests at all."""
        return bool(self.files)

    def leaks(self, text: str) -> list[str]:
        """The hidden names and lines that occur in `text` (a word match for names)."""
        found = [n for n in self.names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text)]
        found += [line for line in self.lines if line in text]
        return found


def has_hidden_tests(task: Task) -> bool:
    """Whether `task` judges with tests the model is not meant to see (a test patch)."""
    return bool(task.test_patch and task.test_patch.strip())


def hidden_tests(task: Task) -> HiddenTests:
    """The hidden part of `task`, read from its test patch and its base files."""
    if not has_hidden_tests(task):
        return HiddenTests()
    added = _added_lines(task.test_patch or "")
    base_defined: set[str] = set()
    base_lines: set[str] = set()
    for path in added:
        text = _read(task.repo / path)
        base_lines.update(line.strip() for line in text.splitlines())
        base_defined.update(_definitions(text.splitlines()))
    statement = task.statement
    names: dict[str, None] = {}
    for lines in added.values():
        for name in _definitions(lines):
            if name not in base_defined and name not in statement and not _is_dunder(name):
                names[name] = None
    for test_id in task.fail_to_pass:
        last = _last_name(test_id)
        if last and last not in base_defined and last not in statement:
            names[last] = None
    kept: dict[str, None] = {}
    for lines in added.values():
        for line in lines:
            stripped = line.strip()
            if (len(stripped) >= MIN_LINE_CHARS and stripped not in base_lines
                    and stripped not in statement):
                kept[stripped] = None
    return HiddenTests(
        ids=tuple(dict.fromkeys([*task.fail_to_pass, *task.pass_to_pass])),
        files=tuple(added),
        names=tuple(names),
        lines=tuple(kept),
    )


def visible_task(task: Task) -> Task:
    """`task` as the loop of a blind run sees it: the statement, the repository at its base,
    its verifier options and environment; no judging lists, no test patch, no reference patch.
    Tests the loop runs are chosen from the repository itself (regression tests) or written by
    the model (reproduction tests), and run whole file by file."""
    return dataclasses.replace(
        task,
        fail_to_pass=[],
        pass_to_pass=[],
        test_patch=None,
        gold_patch=None,
        test_cmd=None,
        run_test_files=True,
    )


def _added_lines(patch: str) -> dict[str, list[str]]:
    """Added lines per target file (git's b/ prefix removed); {} for text that is no diff."""
    try:
        patchset = PatchSet(patch)
    except UnidiffParseError:
        return {}
    added: dict[str, list[str]] = {}
    for patched in patchset:
        path = patched.path
        lines = added.setdefault(path, [])
        for hunk in patched:
            lines += [line.value.rstrip("\n") for line in hunk if line.is_added]
    return added


def _is_dunder(name: str) -> bool:
    """`__init__`, `__eq__`: a protocol method a test class defines names nothing of its own
    (the same word is in every package's `__init__.py` path)."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _definitions(lines: list[str]) -> list[str]:
    return [m.group(1) for m in map(_DEFINED.match, lines) if m]


def _last_name(test_id: str) -> str:
    """`tests/test_a.py::TestB::test_c[1-2]` -> `test_c`; `test_c (mod.Class)` -> `test_c`."""
    head = test_id.split(" (", 1)[0].split("[", 1)[0]
    return head.rsplit("::", 1)[-1] if "::" in head else head if "/" not in head else ""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
