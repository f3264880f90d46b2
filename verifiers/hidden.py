"""Text the candidate could not see, kept out of what goes back to the model.

A task's hidden tests (its test patch: SWE-bench's `test_patch`, `ooda run`'s tests.diff) are
in the workspace while the candidate's code runs, so that code can read them and put their
text where the verdict carries it: an exception message, printed output, a returned value
shown by pytest's assertion rewriting. Every verifier's output passes through
`HiddenText.withhold` before it reaches a verdict the model sees (agent/verify/verifier.py):
each line that holds a line the test patch added (compared without case, spaces or
punctuation, also reversed, also inside base64 or hex it decodes) is replaced by a marker.
No exception is made for the line pytest quotes for a failing test (`>` in its report): the
candidate controls what a failure report says (`pytest.fail(text, pytrace=False)`), so a
quote cannot be told from a forgery; pytest's `E` lines (the values an assertion saw, which
are not file text) still say why a test failed.

Which lines are hidden is tasks/hidden.py's account (`hidden_tests(task).lines`: added by the
test patch, not in the base version of their file nor in the statement, at least 16
characters); here they are compared by their letters and digits (MIN_CHARS at least). A candidate that transforms the text in other ways gets past this; it would first
have to read the hidden files, which the guard reports (the pytest stage then says only which
tests failed), and blind runs keep the hidden tests out of the loop entirely
(docs/SECURITY.md).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable

MIN_CHARS = 10
"""Shortest hidden line (letters and digits) worth withholding: `assert add(2, 3) == 5` is 12."""
MARKER = "[a line of the hidden tests was withheld here]"
_ALNUM = re.compile(r"[^0-9a-z]+")
_ENCODED = re.compile(r"[A-Za-z0-9+/=_-]{24,}")


def _norm(text: str) -> str:
    return _ALNUM.sub("", text.lower())


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

    def __bool__(self) -> bool:
        return bool(self.forms)

    def holds(self, line: str) -> bool:
        """Whether `line` carries a hidden line (possibly reversed or encoded)."""
        if not self.forms:
            return False
        candidates = [_norm(line)]
        for token in _ENCODED.findall(line):
            decoded = _decode(token)
            if decoded:
                candidates.append(_norm(decoded))
        return any(
            len(text) >= MIN_CHARS and any(form in text for form in self.forms)
            for text in candidates
        )

    def withhold(self, text: str) -> str:
        """`text` with every line that carries hidden text replaced by MARKER (runs of them
        by one)."""
        if not self.forms or not text:
            return text
        out: list[str] = []
        for line in text.split("\n"):
            if self.holds(line):
                indent = line[: len(line) - len(line.lstrip())]
                if not out or out[-1].strip() != MARKER:
                    out.append(indent + MARKER)
                continue
            out.append(line)
        return "\n".join(out)


def _decode(token: str) -> str | None:
    """The text behind a base64 or hex token, when it decodes to mostly printable text."""
    for decode in (_b64, _hex):
        try:
            data = decode(token)
        except (binascii.Error, ValueError):
            continue
        text = data.decode("utf-8", "ignore")
        if text and sum(ch.isprintable() or ch in "\n\t" for ch in text) >= 0.9 * len(text):
            return text
    return None


def _b64(token: str) -> bytes:
    padded = token + "=" * (-len(token) % 4)
    if "-" in token or "_" in token:
        return base64.urlsafe_b64decode(padded)
    return base64.b64decode(padded, validate=True)


def _hex(token: str) -> bytes:
    return bytes.fromhex(token)
