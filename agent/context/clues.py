"""What a task's text says about where the change belongs, read without a model: the paths
it names, the frames of its tracebacks, the dotted names and identifiers it uses (those in
code — backticks, fenced blocks, calls, tracebacks — apart from those in prose), and its
terms for lexical retrieval. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ooda.agent.context.words import terms

_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)(?:, in ([\w<>.]+))?')
"""A Python traceback frame."""
_PYTEST_FRAME = re.compile(r"^([\w./\\-]+\.py):(\d+):(?: in (\w+))?", re.MULTILINE)
"""pytest's short traceback lines: `pkg/mod.py:12: in func` (or `: AssertionError`)."""
_PATH = re.compile(r"(?<![\w/.-])(/?(?:[\w.-]+/)*[\w-]+\.py)\b")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_TICKS = re.compile(r"`([^`\n]+)`")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_CODE_LIKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]")
"""An identifier written as only code is (`to_json_dict`, `ZeroMatrix`), wherever it is."""
_WRITTEN = re.compile(r"(?<![\w-])(-{0,2}:?[A-Za-z][\w.:-]{1,47}\w)")
"""A word as a project's users write its registered names: `--import-mode`, `:kbd:`,
`autodoc_typehints`, `unused-import`, `code-block`."""
_MESSAGE = re.compile(r"^[ \t>]*(?:[\w.]+\.)?\w*(?:Error|Exception|Warning|Exit)\b:? (.{12,})$",
                      re.MULTILINE)
"""An exception's or a warning's line (`ValueError: cannot reshape ...`)."""
_VARYING = re.compile(r"""['"`]|\b\d[\d.]*\b|<[^>]*>|\([^)]*\)|\[[^\]]*\]|\{[^}]*\}""")
"""What a message fills in at run time: quoted values, numbers, reprs, brackets."""
_PROMPT_LINE = re.compile(r"^\s*(>>>|\.\.\.|In \[\d+\]:|\$) ?", re.MULTILINE)


@dataclass(frozen=True)
class Frame:
    """One frame of a traceback: the file as printed (maybe absolute), its line, its function."""

    path: str
    line: int
    function: str | None


@dataclass
class Clues:
    """Everything ranking reads from a task's text."""

    paths: list[str] = field(default_factory=list)
    """Paths to .py files, as written (a suffix of a repository path, or absolute)."""
    frames: list[Frame] = field(default_factory=list)
    """Traceback frames, in order (the innermost last)."""
    dotted: list[str] = field(default_factory=list)
    """Dotted names (`xr.Dataset.merge`, `sympy.printing.latex`), in order of first use."""
    code_names: set[str] = field(default_factory=set)
    """Identifiers that appear in code (backticks, fenced blocks, calls, doctest lines), and
    those written as only code is anywhere (`to_json_dict`, `ZeroMatrix`)."""
    prose_names: set[str] = field(default_factory=set)
    """Other identifiers of the text (words of prose among them)."""
    terms: list[str] = field(default_factory=list)
    """The text's terms for lexical retrieval (agent/context/words.py)."""
    messages: list[str] = field(default_factory=list)
    """Fixed parts of the error and warning messages the text quotes (the longest run of
    words between the values a message fills in), to find where the message is raised."""
    written: set[str] = field(default_factory=set)
    """Words that may be a name the project registers as a string (an option, a
    configuration value, a directive, a role, a message): every word of its code, and the
    words of its prose written with `-`, `_` or `:` inside (`:kbd:` also as `kbd`)."""


def read_clues(text: str) -> Clues:
    """The clues of a task statement (or of any text a user gives, such as failing output)."""
    clues = Clues(terms=terms(text))
    for match in _FRAME.finditer(text):
        clues.frames.append(Frame(match.group(1), int(match.group(2)), match.group(3)))
    for match in _PYTEST_FRAME.finditer(text):
        clues.frames.append(Frame(match.group(1), int(match.group(2)), match.group(3)))
    seen_paths: set[str] = set()
    for match in _PATH.finditer(text.replace("\\", "/")):
        path = match.group(1)
        if path not in seen_paths:
            seen_paths.add(path)
            clues.paths.append(path)
    code = _code_parts(text)
    seen_dotted: set[str] = set()
    for part in (code, text):
        for match in _DOTTED.finditer(part):
            name = match.group(0)
            if name not in seen_dotted and not name.endswith(".py") and not _is_number(name):
                seen_dotted.add(name)
                clues.dotted.append(name)
    clues.code_names = set(_IDENT.findall(code)) | set(_CALL.findall(text))
    clues.code_names |= {w for w in _IDENT.findall(text) if _CODE_LIKE.search(w)}
    clues.code_names |= {f.function for f in clues.frames if f.function}
    clues.prose_names = set(_IDENT.findall(text)) - clues.code_names
    clues.written = _written(code, text)
    clues.messages = _messages(text)
    return clues


MIN_MESSAGE_CHARS = 12


def _messages(text: str) -> list[str]:
    found: list[str] = []
    for match in _MESSAGE.finditer(text):
        parts = [p.strip(" .,:;") for p in _VARYING.split(match.group(1))]
        best = max(parts, key=len, default="")
        if len(best) >= MIN_MESSAGE_CHARS and " " in best and best not in found:
            found.append(best)
    return found


def _written(code: str, text: str) -> set[str]:
    found = {m.group(1) for m in _WRITTEN.finditer(code)}
    found |= {w for m in _WRITTEN.finditer(text)
              if re.search(r"\w[-_:]\w|^--|^:", w := m.group(1))}
    return found | {w.strip(":") for w in found if w.startswith(":")}


def _code_parts(text: str) -> str:
    """The parts of `text` that are code: fenced blocks, backticked spans, doctest and shell
    lines, traceback lines."""
    parts = [m.group(2) for m in _FENCE.finditer(text)]
    parts += [m.group(1) for m in _TICKS.finditer(text)]
    parts += [line for line in text.splitlines()
              if _PROMPT_LINE.match(line) or line.lstrip().startswith(("File ", "Traceback"))]
    return "\n".join(parts)


def _is_number(name: str) -> bool:
    return all(part.isdigit() for part in name.split("."))
