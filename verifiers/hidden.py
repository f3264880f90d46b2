"""Text the candidate could not see, kept out of what goes back to the model.

A task's hidden tests (its test patch: SWE-bench's `test_patch`, `ooda run`'s tests.diff) are
in the workspace while the candidate's code runs, so that code can read them and put their
text where the verdict carries it: an exception message, printed output, a returned value
shown by pytest's assertion rewriting. Every verifier's output passes through
`HiddenText.withhold` before it reaches a verdict the model sees (agent/verify/verifier.py):
each line that carries a line the test patch added is replaced by a marker. No exception is
made for the line pytest quotes for a failing test (`>` in its report): the candidate controls
what a failure report says (`pytest.fail(text, pytrace=False)`), so a quote cannot be told from
a forgery; pytest's `E` lines (the values an assertion saw, which are not file text) still say
why a test failed.

What "carries" means is decided by classes of transformation, not by a list of ciphers:
- the text's letters and digits, compared without case, spacing or punctuation, forwards or
  reversed, across line breaks (a hidden line cut into pieces, one per output line);
- any one-to-one substitution of those characters (ROT13, any Caesar shift, Atbash, a random
  alphabet, digits shifted too): a hidden line is matched by the pattern of its repeated
  characters (each character's distance to its previous occurrence), which no substitution
  changes; used for lines with enough repeats to be told from chance (ISO_MIN_CHARS,
  ISO_MIN_REPEATS);
- the standard encodings of bytes as text, nested and decompressed: base64 (also URL-safe),
  base32, base85, hex, percent-encoding, backslash escapes, zlib/gzip/bz2/lzma inside them.
A transformation outside these (encryption with a key, a private encoding) gets past this; it
would first have to read the hidden files, which the guard reports by the files' identity
(the pytest stage then says only which tests failed), and blind runs keep the hidden tests out
of the loop entirely (docs/SECURITY.md).

Which lines are hidden is tasks/hidden.py's account (`hidden_tests(task).lines`: added by the
test patch, not in the base version of their file nor in the statement, at least 16
characters); here they are compared by their letters and digits (MIN_CHARS at least).
"""

from __future__ import annotations

import base64
import binascii
import bz2
import codecs
import gzip
import lzma
import re
import urllib.parse
import zlib
from collections.abc import Iterable

MIN_CHARS = 10
"""Shortest hidden line (letters and digits) worth withholding: `assert add(2, 3) == 5` is 12."""
ISO_MIN_CHARS = 16
"""Shortest hidden line looked for under substitution (its pattern of repeats)."""
ISO_MIN_REPEATS = 6
"""Fewest repeated characters a hidden line needs before its pattern alone identifies it."""
MARKER = "[a line of the hidden tests was withheld here]"
_ALNUM = re.compile(r"[^0-9a-z]+")
_TOKENS = re.compile(r"[A-Za-z0-9+/=_-]{16,}|[0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]{20,}")
_MAX_DEPTH = 3
_PYTEST_PREFIX = re.compile(r"^\s*(?:E|>)(?:\s+|$)")


def _norm(text: str) -> str:
    return _ALNUM.sub("", text.lower())


def _distances(text: str) -> list[int]:
    """Each character's distance to its previous occurrence (0: the first): the same for any
    one-to-one substitution of the characters."""
    last: dict[str, int] = {}
    out = []
    for index, char in enumerate(text):
        before = last.get(char)
        out.append(index - before if before is not None else 0)
        last[char] = index
    return out


class _Shape:
    """A hidden line's pattern of repeats, to find it under any substitution."""

    def __init__(self, form: str) -> None:
        self.pattern = _distances(form)
        self.anchor = next(i for i, d in enumerate(self.pattern) if d)
        self.first = self.pattern[self.anchor]

    def found_in(self, distances: list[int], at: dict[int, list[int]]) -> int:
        """The start of a window of the text (given by its `distances` and their positions
        `at`) with this pattern, or -1."""
        pattern, size = self.pattern, len(self.pattern)
        for position in at.get(self.first, ()):
            start = position - self.anchor
            if start < 0 or start + size > len(distances):
                continue
            for offset in range(size):
                want, got = pattern[offset], distances[start + offset]
                if (got != want) if want else (0 < got <= offset):
                    break
            else:
                return start
        return -1


class HiddenText:
    """The normalized lines of the hidden tests."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for line in lines:
            norm = _norm(line)
            if len(norm) >= MIN_CHARS:
                forms.add(norm)
                forms.add(norm[::-1])
        self.forms = frozenset(forms)
        self.shapes = [
            _Shape(form) for form in sorted(forms)
            if len(form) >= ISO_MIN_CHARS and sum(1 for d in _distances(form) if d) >= ISO_MIN_REPEATS
        ]  # fmt: skip

    def __bool__(self) -> bool:
        return bool(self.forms)

    def _in(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of each hidden form found in normalized `text`, as written or under a
        substitution."""
        found = []
        for form in self.forms:
            start = text.find(form)
            while start >= 0:
                found.append((start, start + len(form)))
                start = text.find(form, start + 1)
        if self.shapes and len(text) >= ISO_MIN_CHARS:
            distances = _distances(text)
            at: dict[int, list[int]] = {}
            for index, distance in enumerate(distances):
                at.setdefault(distance, []).append(index)
            for shape in self.shapes:
                start = shape.found_in(distances, at)
                if start >= 0:
                    found.append((start, start + len(shape.pattern)))
        return found

    def holds(self, line: str) -> bool:
        """Whether `line` carries a hidden line (in any of the forms above)."""
        if not self.forms:
            return False
        return any(self._in(_norm(text)) for text in [line, *_decoded(line)])

    def withhold(self, text: str) -> str:
        """`text` with every line that carries hidden text replaced by MARKER (runs of them
        by one), also the lines a hidden line was cut across."""
        if not self.forms or not text:
            return text
        lines = text.split("\n")
        marked = {i for i, line in enumerate(lines) if self.holds(line)}
        joined, owner = [], []  # the whole text normalized, and each character's line
        for index, line in enumerate(lines):
            norm = _norm(_PYTEST_PREFIX.sub("", line))  # pytest's `E   ` on each piece
            joined.append(norm)
            owner.extend([index] * len(norm))
        for start, end in self._in("".join(joined)):
            marked.update(owner[start:end])
        out: list[str] = []
        for index, line in enumerate(lines):
            if index in marked:
                indent = line[: len(line) - len(line.lstrip())]
                if not out or out[-1].strip() != MARKER:
                    out.append(indent + MARKER)
                continue
            out.append(line)
        return "\n".join(out)


def _decoded(line: str, depth: int = 0) -> list[str]:
    """The texts behind the encoded parts of `line` (decoded again, up to a few layers)."""
    if depth >= _MAX_DEPTH:
        return []
    found: list[str] = []
    if "%" in line:
        found.append(urllib.parse.unquote(line))
    if "\\" in line:
        try:
            found.append(codecs.decode(line, "unicode_escape"))
        except (UnicodeDecodeError, ValueError):
            pass
    for token in _TOKENS.findall(line):
        found.extend(_bytes_text(data) for data in _candidates(token))
    found = [text for text in found if text and text != line]
    deeper = [more for text in found for more in _decoded(text, depth + 1)]
    return found + deeper


def _candidates(token: str) -> list[bytes]:
    """What `token` could be the encoding of (each decoder that accepts it), and what each
    decompresses to."""
    out: list[bytes] = []
    for decode in (_b64, _b32, _b85, _hex):
        try:
            data = decode(token)
        except (binascii.Error, ValueError):
            continue
        out.append(data)
        for unpack in (zlib.decompress, gzip.decompress, bz2.decompress, lzma.decompress):
            try:
                out.append(unpack(data))
            except Exception:  # noqa: BLE001 - not that compression: the next one
                continue
    return out


def _bytes_text(data: bytes) -> str:
    """`data` as text when it is mostly printable (else "")."""
    text = data.decode("utf-8", "ignore")
    if text and sum(ch.isprintable() or ch in "\n\t" for ch in text) >= 0.9 * len(text):
        return text
    return ""


def _b64(token: str) -> bytes:
    padded = token + "=" * (-len(token) % 4)
    if "-" in token or "_" in token:
        return base64.urlsafe_b64decode(padded)
    return base64.b64decode(padded, validate=True)


def _b32(token: str) -> bytes:
    return base64.b32decode(token + "=" * (-len(token) % 8), casefold=True)


def _b85(token: str) -> bytes:
    return base64.b85decode(token)


def _hex(token: str) -> bytes:
    return bytes.fromhex(token)
