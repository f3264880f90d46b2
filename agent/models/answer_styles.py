"""Rewrite a scripted answer the way chat models often answer instead: whole files or bare
functions in prose (`ooda serve --answer-as`), so the edit formats of agent/edits can be
tested end to end over HTTP with answers whose fix is known.

The scripted answer (SEARCH/REPLACE blocks or a diff) is applied to the files shown in the
prompt (agent/core/prompts.py shows each as its path on a line, then a ```python block), and the
changed files are written out again in the chosen style:

- "whole-file": prose, then the whole corrected file in a fence, its path named in the
  sentence before it (no path line), then a closing explanation;
- "definitions": prose, the buggy function(s) quoted as they are now, then the corrected
  ones as bare code without a path (the case where the parser must find the file), then an
  explanation; a change outside any function falls back to "whole-file";
- "mixed": the two alternately, request by request;
- "as-is": the script unchanged.

An answer that does not apply to the shown files is served unchanged.
"""

from __future__ import annotations

import ast
from typing import Literal

from ooda.agent.edits import EditError, parse_edits
from ooda.agent.edits.scan import clean_path, fences

AnswerStyle = Literal["as-is", "whole-file", "definitions", "mixed"]
STYLES: tuple[str, ...] = ("as-is", "whole-file", "definitions", "mixed")


def files_in_prompt(prompt: str) -> dict[str, str]:
    """Path -> content of the files a prompt shows (a path line, then a fenced block)."""
    lines = prompt.replace("\r\n", "\n").split("\n")
    shown: dict[str, str] = {}
    for fence in fences(lines):
        if fence.start == 0:
            continue
        path = clean_path(lines[fence.start - 1])
        if path is not None and "." in path:
            shown[path] = "\n".join(fence.body) + "\n"
    return shown


def restyle(answer: str, prompt: str, style: str, counter: int = 0) -> str:
    """The answer rewritten in `style` (see the module docstring); `counter` picks the
    style of a "mixed" answer."""
    if style == "as-is":
        return answer
    if style == "mixed":
        style = ("whole-file", "definitions")[counter % 2]
    shown = files_in_prompt(prompt)
    try:
        parsed = parse_edits(answer, shown.get)
    except EditError:
        return answer
    parts = ["Looking at the code, the problem is in the logic of the function below."]
    for path, new in parsed.files.items():
        old = shown.get(path)
        pairs = _changed_definitions(old, new) if style == "definitions" and old else None
        if pairs:
            olds, news = zip(*pairs, strict=True)
            parts += [
                "The current code:",
                "```python\n" + "\n\n".join(olds) + "\n```",
                "Here is the corrected version:",
                "```python\n" + "\n\n".join(news) + "\n```",
            ]
        else:
            parts += [
                f"Here is the corrected `{path}`:",
                "```python\n" + new.rstrip("\n") + "\n```",
            ]
    parts.append("This change makes the function behave as the tests expect.")
    return "\n\n".join(parts) + "\n"


def _definitions(text: str) -> dict[str, str] | None:
    """Top-level definition name -> its source; None when `text` is not valid Python."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.split("\n")
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out[node.name] = "\n".join(lines[start - 1 : node.end_lineno])
    return out


def _outside(text: str, defs: dict[str, str]) -> str:
    """The text without its definitions (what a definitions answer could not carry)."""
    for source in defs.values():
        text = text.replace(source, "")
    return "\n".join(line for line in text.split("\n") if line.strip())


def _changed_definitions(old: str, new: str) -> list[tuple[str, str]] | None:
    """(old source, new source) of each changed definition; None when the change is not
    confined to existing definitions."""
    before, after = _definitions(old), _definitions(new)
    if before is None or after is None or set(before) != set(after):
        return None
    if _outside(old, before) != _outside(new, after):
        return None
    pairs = [(before[n], after[n]) for n in after if before[n] != after[n]]
    return pairs or None
