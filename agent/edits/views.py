"""What the model saw of a file it was shown only in part, and how its edits still apply to
the real file.

A large file is shown as some of its lines with the others elided, each elided run replaced
by one marker line naming the lines it stands for (`# ... lines 120-161 not shown ...`).
A `FileView` keeps those runs. Edits are read against the real file:

- a marker line copied into an edit (a SEARCH, a REPLACE, a code block, a diff's context or
  removed line) stands for the lines it elides: `expand` puts them back, so a SEARCH or a hunk
  that spans one matches the real file and a block that keeps one keeps the code;
- a whole-file answer can only speak for what the model saw: `merge_whole` applies the
  difference between what was shown and the answer to the real file, and never deletes a
  line the model did not see (a marker dropped or replaced by "rest unchanged" keeps the
  lines it stood for);
- a whole-file answer for a file that was not shown at all is refused (it would replace code
  the model never read).

Pure: the views are data handed in by the caller (agent/context builds them with the prompt).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

MARKER_RE = re.compile(r"^[ \t]*# \.\.\. lines (\d+)-(\d+) not shown \.\.\.[ \t]*$")
"""A marker line, as shown (agent/context writes them with `marker`)."""
_LOOSE_MARKER_RE = re.compile(r"^[ \t]*#[ \t]*\.\.\.?[ \t]*lines? \d+", re.IGNORECASE)
_LAZY_RE = re.compile(
    r"^[ \t]*(?:#|//)?[ \t]*(?:\.\.\.|…)?[ \t]*\(?(?:the )?(?:rest|remainder|remaining|other|"
    r"existing|previous|unchanged|same)\b.*(?:unchanged|as before|here|omitted|same|code|"
    r"methods|lines|file)\b.*$|^[ \t]*#[ \t]*(?:\.\.\.|…)[ \t]*$", re.IGNORECASE)
"""A placeholder a model writes for code it leaves out ("# ... rest of the file unchanged")."""


WHOLE_SHARE = 0.8
"""A block holding this share of a partly shown file's shown lines is a whole-file answer."""


def marker(start: int, end: int, indent: str = "") -> str:
    """The line that stands for the elided lines start..end (1-based, inclusive)."""
    return f"{indent}# ... lines {start}-{end} not shown ..."


@dataclass(frozen=True)
class FileView:
    """One file as the model saw it: `hidden` maps each elided run (start, end; 1-based,
    inclusive) to its lines; a file shown whole has none."""

    path: str
    shown: tuple[str, ...] = ()
    """The lines as shown, markers included (line bodies)."""
    hidden: Mapping[tuple[int, int], tuple[str, ...]] = field(default_factory=dict)
    revealed: frozenset[int] = frozenset()
    """Elided lines shown later (in a feedback message): the model has seen them now."""

    @property
    def whole(self) -> bool:
        return not self.hidden

    def expand(self, lines: list[str]) -> list[str]:
        """`lines` with each marker line of this view replaced by the lines it stands for."""
        if not self.hidden:
            return lines
        out: list[str] = []
        for line in lines:
            found = MARKER_RE.match(line)
            span = (int(found.group(1)), int(found.group(2))) if found else None
            if span is not None and span in self.hidden:
                out += self.hidden[span]
            else:
                out.append(line)
        return out

    def answers_whole(self, lines: list[str]) -> bool:
        """True when a block of a file shown in part repeats most of what was shown (its
        skeleton included): the model rewrote the file as it saw it, not a few definitions."""
        if not self.hidden:
            return False
        wanted = {ln.strip() for ln in self.shown if ln.strip() and not MARKER_RE.match(ln)}
        have = {ln.strip() for ln in lines}
        return bool(wanted) and len(wanted & have) >= WHOLE_SHARE * len(wanted)

    def hidden_lines(self) -> set[int]:
        """The line numbers (1-based) of the base file the model did not see."""
        return {n for start, end in self.hidden for n in range(start, end + 1)} - self.revealed

    def reveal(self, lines: set[int]) -> FileView:
        """This view once the model has also seen `lines`."""
        return FileView(self.path, self.shown, self.hidden, self.revealed | frozenset(lines))

    def base(self) -> list[str]:
        """The file the view was made of (line bodies)."""
        return self.expand(list(self.shown))

    def merge_whole(self, answer: list[str]) -> list[str]:
        """The file a whole-file answer means: the base changed where the answer differs from
        it in lines the model saw, with every line it did not see kept in place."""
        new = self.expand(answer)
        hidden = self.hidden_lines()
        if not hidden:
            return new
        base = self.base()
        out: list[str] = []
        matcher = difflib.SequenceMatcher(None, base, new)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                out += base[i1:i2]
                continue
            kept = [k for k in range(i1, i2) if k + 1 in hidden]
            added = new[j1:j2]
            if kept:  # a placeholder written in place of unseen code is not code
                added = [ln for ln in added if not _placeholder(ln)]
            first_seen = next((k for k in range(i1, i2) if k + 1 not in hidden), i2)
            before = [base[k] for k in kept if k < first_seen]
            after = [base[k] for k in kept if k >= first_seen]
            out += before + [ln for ln in added if not MARKER_RE.match(ln)] + after
        return out


def _placeholder(line: str) -> bool:
    return bool(_LAZY_RE.match(line) or _LOOSE_MARKER_RE.match(line))


Views = Mapping[str, FileView]
"""Path → what the model saw of it, for every file it was shown (whole or in part)."""
