"""A candidate's code up to formatting: the key the loop de-duplicates candidates by.

Two candidates whose resulting files differ only in layout (spacing, blank lines, line breaks
inside brackets, comments, quote style) get the same verdict, so only the first is verified.
Python files are compared as token streams: comments and non-logical line breaks are dropped,
string literals compared by value; logical line ends, indentation and every other token kept,
so what ruff's statement rules (E70x: `;`, one-line compound statements) or mypy's type
comments (`# type: int`, kept) can tell apart stays apart. Other files, and Python files that do
not tokenize, are compared byte for byte.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from collections.abc import Callable, Mapping

_KEPT_COMMENT = re.compile(r"#\s*type:|coding[:=]")
_DROPPED = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER})


def python_tokens(source: str) -> str | None:
    """`source` as a formatting-free token stream; None when it does not tokenize."""
    parts: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and _KEPT_COMMENT.search(token.string):
                parts.append(token.string.replace(" ", ""))
                continue
            if token.type in _DROPPED:
                continue
            text = token.string
            if token.type == tokenize.STRING:
                try:
                    text = repr(ast.literal_eval(text))
                except (ValueError, SyntaxError):
                    pass  # f-strings and the like: their text as written
            elif token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                text = tokenize.tok_name[token.type]
            parts.append(text)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    return "\x1f".join(parts)


def normal_form(path: str, content: str) -> str:
    """What of `content` can change a verdict (see the module docstring)."""
    if path.endswith((".py", ".pyi")):
        tokens = python_tokens(content)
        if tokens is not None:
            return "tokens\0" + tokens
    return "text\0" + content


def normalized_key(files: Mapping[str, str], read_original: Callable[[str], str | None]) -> str:
    """A digest of the files a candidate changes, each in normal form; files equal to the
    original up to formatting are left out (the candidate does not really change them)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        new = normal_form(path, files[path])
        original = read_original(path)
        if original is not None and normal_form(path, original) == new:
            continue
        digest.update(f"{path}\0{new}\0\0".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()
