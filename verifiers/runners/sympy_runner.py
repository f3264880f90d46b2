"""sympy's `bin/test -C --verbose FILES`, graded per test from the `test_name ok|F|E|f|s|X`
lines it prints; ids are `test_name`; the files are the task's test files (those its test
patch touches)."""

from __future__ import annotations

import re

from ooda.verifiers.runners.output import OutputRunner

SYMPY_CMD = "bin/test -C --verbose"
_LINE = re.compile(r"^(?P<name>_*test_\w+)\s+(?P<outcome>ok|F|E|f|s|X|T)\b", re.MULTILINE)
_OUTCOMES = {"ok": "passed", "F": "failed", "E": "error", "f": "xfailed", "s": "skipped",
             "X": "failed", "T": "failed"}


def sympy_outcomes(output: str) -> dict[str, str]:
    """`test_name` -> outcome, from `bin/test --verbose` output."""
    return {m.group("name"): _OUTCOMES[m.group("outcome")] for m in _LINE.finditer(output)}


RUNNER = OutputRunner(
    kind="sympy",
    id_format="test_name (in a file given to bin/test)",
    default_cmd=SYMPY_CMD,
    arguments=lambda request: [f for f in request.test_files if f.endswith(".py")],
    outcomes=sympy_outcomes,
)
