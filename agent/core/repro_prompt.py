"""The reproduction-test request of a blind run, beside the parser of its answer.

A blind run (docs/SWEBENCH.md) never shows the model the tests that judge it; it asks the same
model, with this prompt of its own, for a script that reproduces the issue, and verifies
candidates against the scripts that fail on the unpatched code (verifiers/repro_check.py says
how a script is run and judged). The request carries the issue and the code the first prompt
would show, never a test id; its answer is one ```python block.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from ooda.agent.context import choose_context
from ooda.agent.contracts.protocols import REPRO_REQUEST_LINE
from ooda.agent.core import normalize
from ooda.tasks.loader import Task

SYSTEM = """\
You write reproduction tests for issues reported against Python repositories. A reproduction \
test is one standalone Python script, run as `python SCRIPT` from the repository's root with \
the project importable. While the issue is present it must fail with an AssertionError; once \
the issue is fixed it must finish normally (exit status 0). You do not fix the issue."""

ASK = """\
# Write the script
- Reproduce what the issue describes, through the project's code as the issue uses it.
- Check the behaviour the issue asks for with `assert` and a message saying what is wrong. \
When the issue is an exception or a wrong result, catch or compare it and fail with an \
assert: any other exception counts as a broken script, not a reproduction.
- When the issue asks for something new (a function, an argument), check that it is there \
inside the script and fail with an assert when it is missing.
- Use only the standard library, the project and what it already depends on: no pytest, no \
network, no files outside a temporary directory; finish within 10 seconds.
Answer with the script in one ```python block."""

CONTEXT_TOKENS = 12_000
"""Most tokens of code the request shows (fewer than the first prompt's: the script needs the
API, not every detail)."""

_BLOCK = re.compile(r"^```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)

ContextOf = Callable[[Task, int], str]
"""The code shown with the issue: (task, most tokens) -> text."""


def reproduction_prompt(
    task: Task, context_tokens: int = CONTEXT_TOKENS, context: ContextOf | None = None
) -> list[dict[str, str]]:
    """The messages that ask for one reproduction test of `task` (a blind run's visible task:
    its statement and repository; it has no test ids to show)."""
    shown = (context or code_context)(task, context_tokens)
    parts = [REPRO_REQUEST_LINE, f"Task id: {task.id}", "", "# Issue", task.statement.strip(), ""]
    if shown:
        parts += ["# Code (current contents)", "", shown, ""]
    parts.append(ASK)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def code_context(task: Task, tokens: int) -> str:
    """The code the first prompt's ranking picks (agent/context, without the model's votes),
    within `tokens`, elisions marked."""
    context = choose_context(task, tokens)
    return "\n".join(f"{f.path}\n```python\n{f.text}\n```" for f in context.files)


def parse_reproduction(answer: str) -> str | None:
    """The script of an answer: its last ```python block that parses (a bare block when none
    is marked); None when there is none."""
    blocks = [m.group(1) for m in _BLOCK.finditer(answer)]
    for block in reversed(blocks):
        source = block.strip("\n") + "\n"
        try:
            ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        if source.strip():
            return source
    return None


def script_key(source: str) -> str:
    """What two scripts that differ only in layout and comments share."""
    return normalize.python_tokens(source) or source
