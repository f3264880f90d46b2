"""Make text a candidate wrote safe to show: on a terminal, in the reports, in a CI comment.

Candidate code and answers end up in what ooda prints (test output, verifier reasons, patches,
file names). Raw control characters there would drive the user's terminal: set its title,
write the clipboard (OSC 52), clear the screen, overwrite a line with a fake green "PASSED"
(ESC sequences or a bare carriage return), or reorder what is read (bidi controls, "Trojan
Source"). `printable()` turns each such character into visible escape text (ESC -> `\\x1b`),
keeping newlines and tabs; it is applied where text leaves ooda (agent/cli/app.py and the other
command modules, agent/app/progress.py, agent/app/report.py, agent/app/ci/github.py), never to the logs on
disk, which keep the raw bytes. `markup_safe()` also escapes rich console markup.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(
    "\r\n"  # a CRLF line end: shown as a plain newline
    "|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # C0 controls but tab and newline, DEL, C1 controls
    "|[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # bidi marks, embeddings, isolates
    "|[\ud800-\udfff]"  # lone surrogates: not encodable, would crash the output stream
)


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r\n":
        return "\n"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character except newline and tab made visible as an escape."""
    return _UNSAFE.sub(_visible, text)


def is_printable(text: str) -> bool:
    """Whether `text` holds no control character but tab, newline and CRLF line ends: safe to
    write to a terminal as it is (a patch to a CRLF file keeps its line ends byte-exact)."""
    return all(match.group() == "\r\n" for match in _UNSAFE.finditer(text))


def markup_safe(text: str) -> str:
    """`printable(text)` that rich prints literally inside a markup string (`[` escaped)."""
    from rich.markup import escape  # rich only when printing through it (start-up time)

    return escape(printable(text))


_BACKTICKS = re.compile(r"`+")
_FENCE_RUNS = re.compile(r"`{3,}|~{3,}")


def md_code(text: str, limit: int = 0, *, table: bool = False) -> str:
    """Candidate text as one inline Markdown code span, inert wherever it lands: inside a code
    span GitHub renders no HTML (`<!--`, `<img>`), no link or autolink, no `@mention`, no
    emphasis; the fence is one backtick longer than any run in the text, newlines become spaces
    (a span is one line), `|` is escaped in a table cell (GFM splits cells on it even inside a
    span). `limit` cuts the text first (0: no limit)."""
    text = printable(" ".join(text.split()))
    if limit and len(text) > limit:
        text = text[: max(limit - 3, 1)] + "..."
    if not text:
        return ""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    if table:
        text = text.replace("|", "\\|")
    return f"{fence}{text}{fence}"


def md_fence(text: str) -> str:
    """A code fence (backticks) longer than any fence-like run in `text`, so that no line of a
    candidate's patch or output can close the block and be rendered as Markdown."""
    longest = max((len(m) for m in _FENCE_RUNS.findall(text)), default=2)
    return "`" * max(3, longest + 1)
