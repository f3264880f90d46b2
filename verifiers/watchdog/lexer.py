"""Python's strings, comments and brackets, read one physical line at a time with the state
carried across lines (an open triple-quoted string, open brackets, a backslash continuation),
so that the watchdog's rules see whole statements as code: string contents masked, comments
dropped. A few string searches per line, no backtracking regex; never `tokenize` (it needs a
complete logical line and raises on a partial one) nor `ast` (an answer's lines are no module).
"""

from __future__ import annotations

import re

_CODE_STOP = re.compile(r"[\"'#\\]")
_PREFIX_CHARS = "rRbBuUfFtT"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


class Lexer:
    """Python's strings, comments and brackets, one physical line at a time (state carried
    across lines: an open triple-quoted string, open brackets, a backslash continuation)."""

    def __init__(self) -> None:
        self.quote = ""
        self.fstring = False
        self.content: list[str] = []
        self.depth = 0
        self.continued = False

    @property
    def inside(self) -> bool:
        """Whether the statement goes on past the last line lexed."""
        return bool(self.quote) or self.depth > 0 or self.continued

    def line(self, text: str) -> tuple[str, list[str]]:
        """The line's code with each string that ends on it as `""` (`"^"`: an f-string
        with a placeholder) and comments dropped; and the literal text of those
        strings (an f-string's placeholders left out)."""
        code: list[str] = []
        strings: list[str] = []
        self.continued = False
        i, n = 0, len(text)
        while i < n:
            if self.quote:
                i = self._in_string(text, i, code, strings)
                continue
            match = _CODE_STOP.search(text, i)
            stop = n if match is None else match.start()
            chunk = text[i:stop]
            self.depth += sum(chunk.count(c) for c in "([{") - sum(chunk.count(c) for c in ")]}")
            self.depth = max(self.depth, 0)
            code.append(chunk)
            if match is None:
                break
            char = text[stop]
            if char == "#":
                break
            if char == "\\":
                if stop == n - 1:
                    self.continued = True
                i = stop + 2
                continue
            triple = text.startswith(char * 3, stop)
            self.quote = char * 3 if triple else char
            prefix = text[max(stop - 2, 0):stop]
            prefix = prefix[len(prefix.rstrip(_PREFIX_CHARS)):]
            self.fstring = "f" in prefix.lower()
            self.content = []
            i = stop + len(self.quote)
        if self.quote and len(self.quote) == 1:  # a one-line string left open: end it
            if not self.continued and not text.endswith("\\"):
                self._close(code, strings)
        elif self.quote:
            self.content.append("\n")
        return "".join(code), strings

    def _in_string(self, text: str, i: int, code: list[str], strings: list[str]) -> int:
        quote = self.quote
        j = i
        while True:
            k = text.find(quote, j)
            b = text.find("\\", j)
            if b != -1 and (k == -1 or b < k):
                j = b + 2
                if j >= len(text):
                    self.content.append(text[i:])
                    return len(text)
                continue
            if k == -1:
                self.content.append(text[i:])
                return len(text)
            self.content.append(text[i:k])
            self._close(code, strings)
            return k + len(quote)

    def _close(self, code: list[str], strings: list[str]) -> None:
        literal = "".join(self.content)
        placeholder = False
        if self.fstring:
            placeholder = any(m.group() not in ("{{", "}}") for m in _PLACEHOLDER.finditer(literal))
            literal = _PLACEHOLDER.sub("", literal)
        code.append('"^"' if placeholder else '""')
        strings.append(literal)
        self.quote = ""
        self.content = []
