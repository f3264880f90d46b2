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

Lines the base files already hold are not hidden (the candidate sees the repository), and
short lines (fewer than MIN_CHARS letters and digits: `def test_x():`, `x = 1`) are not worth
withholding. A candidate that transforms the text in other ways gets past this; it would first
have to read the hidden files, which the guard reports (the pytest stage then says only which
tests failed), and blind runs keep the hidden tests out of the loop entirely
(docs/SECURITY.md).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable

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

    @classmethod
    def from_patch(cls, patch: str, base_file: Callable[[str], str | None]) -> HiddenText:
        """The lines `patch` adds that the base version of their file (`base_file(path)`,
        None when absent) does not already hold."""
        added: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in patch.splitlines():
            if line.startswith("+++ "):
                path = line[4:].strip()
                path = path[2:] if path.startswith("b/") else path
                current = added.setdefault(path, []) if path != "/dev/null" else None
            elif line.startswith("+") and current is not None:
                current.append(line[1:])
        hidden: list[str] = []
        for path, lines in added.items():
            visible = {_norm(v) for v in (base_file(path) or "").splitlines()}
            hidden += [line for line in lines if _norm(line) not in visible]
        return cls(hidden)

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
