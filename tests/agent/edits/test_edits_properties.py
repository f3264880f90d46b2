"""Property tests of agent/edits: a SEARCH/REPLACE answer built from any file edit
round-trips, and any answer at all (random or adversarial) parses to a patch or an
EditError, never another exception, within a generous bound (the fence scan is linear), and
the file reader is only ever asked for paths inside the repository."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ooda.agent.edits import EditError, parse_edits

_LINE_CHARS = st.sampled_from(list("abxy01 =:()#'\"\t.,_-"))
_LINES = st.lists(st.text(_LINE_CHARS, max_size=12), min_size=1, max_size=14)
_MARKERS = ("<<<<<<", "======", ">>>>>>", "```", "~~~", "--- ", "+++ ", "@@")


def _plain(line: str) -> bool:
    """A line that no format reads as markup (markers, fences, diff headers)."""
    return not any(m in line for m in _MARKERS)


@st.composite
def file_edits(draw: st.DrawFn) -> tuple[str, list[str], int, int, list[str]]:
    """(final newline, old lines, start, end, new lines): replace old[start:end] by new."""
    old = [ln for ln in draw(_LINES) if _plain(ln)]
    assume(old)
    start = draw(st.integers(0, len(old)))
    end = draw(st.integers(start, len(old)))
    new = [ln for ln in draw(st.lists(st.text(_LINE_CHARS, max_size=12), max_size=5))
           if _plain(ln)]
    ending = draw(st.sampled_from(["\n", "\r\n", ""]))
    assume(ending or old[-1])  # without a final newline the last line is not empty
    return ending, old, start, end, new


def _occurrences(lines: list[str], needle: list[str]) -> int:
    k = len(needle)
    return sum(1 for i in range(len(lines) - k + 1) if lines[i : i + k] == needle)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(file_edits(), st.booleans())
def test_search_replace_answer_round_trips(
    edit: tuple[str, list[str], int, int, list[str]], crlf_answer: bool
) -> None:
    ending, old, start, end, new = edit
    eol = ending or "\n"
    text = eol.join(old) + ending
    expected_lines = old[:start] + new + old[end:]
    assume(expected_lines != old)
    # widen the SEARCH part with context until it occurs exactly once
    lo, hi = start, end
    def unique(lines: list[str]) -> bool:
        return any(ln.strip() for ln in lines) and _occurrences(old, lines) == 1

    while not unique(old[lo:hi]) and (lo > 0 or hi < len(old)):
        lo, hi = max(0, lo - 1), min(len(old), hi + 1)
    search = old[lo:hi]
    replace = old[lo:start] + new + old[end:hi]
    assume(unique(search))
    answer = "Here is the fix.\n\nm.py\n<<<<<<< SEARCH\n" + "".join(s + "\n" for s in search)
    answer += "=======\n" + "".join(r + "\n" for r in replace) + ">>>>>>> REPLACE\n\nDone.\n"
    if crlf_answer:
        answer = answer.replace("\n", "\r\n")
    expected = eol.join(expected_lines) + (ending if expected_lines else "")
    parsed = parse_edits(answer, {"m.py": text}.get)
    assert parsed.edit_format == "search_replace"
    got = parsed.files.get("m.py", text)
    assert got.replace("\r\n", "\n").rstrip("\n") == expected.replace("\r\n", "\n").rstrip("\n")
    if ending == "\r\n":
        assert got.count("\n") == got.count("\r\n")


FILES = {
    "m.py": "import math\n\n\ndef gcd(a, b):\n    while b:\n        a, b = b, a % b\n"
    "    return a\n\n\nclass C:\n    @property\n    def x(self):\n        return 1\n",
    "pkg/other.py": "def gcd(a, b):\n    return 0\n",
    "README.md": "# readme\n",
}
_PIECES = st.sampled_from([
    "```", "```python", "```diff", "~~~", "`", " ", "\t", "\n", "\r\n", "\r", "m.py", "m.py\n",
    "<<<<<<< SEARCH\n", "=======\n", ">>>>>>> REPLACE\n", "--- a/m.py\n", "+++ b/m.py\n",
    "@@ -1,2 +1,2 @@\n", "-    return a\n", "+    return b\n", "def gcd(a, b):\n",
    "    return a\n", "class C:\n", "    def x(self):\n", "@property\n", "import os\n",
    "\x00", "\ud800", "\udfff", "é", "\u202e", "    ", "#", "Here is the fix:\n",
    "pkg/other.py\n", "../x.py\n", "/etc/passwd\n", "See /dev/zero and ../m.py:\n", "(", ")", ":", "\\",
])


@settings(max_examples=400, deadline=timedelta(seconds=5))
@given(st.lists(_PIECES, max_size=60) | st.text(max_size=400))
def test_any_answer_gives_a_patch_or_an_edit_error(answer: str | list[str]) -> None:
    text = answer if isinstance(answer, str) else "".join(answer)

    def read(path: str) -> str | None:
        parts = path.split("/")
        assert not path.startswith("/") and ".." not in parts and ".git" not in parts, path
        return FILES.get(path)

    try:
        parsed = parse_edits(text, read, lambda: list(FILES))
    except EditError as err:
        assert str(err) and err.kind
        return
    assert parsed.patch.startswith("diff --git ")
    parsed.patch.encode("utf-8")


@settings(max_examples=25, deadline=timedelta(seconds=5))
@given(st.sampled_from(["```", "```python", "~~~", "<<<<<<< SEARCH", "=======", "`", "@@",
                        "--- a/m.py", "def f(", "m.py"]),
       st.sampled_from([" ", "\t", "`", "\n", "=", "<", "(", "a.", "    "]),
       st.integers(20_000, 120_000))
def test_adversarial_repetitions_parse_in_bounded_time(head: str, filler: str, n: int) -> None:
    """A fence line followed by tens of thousands of spaces took cubic time in the old
    regex (8,000 spaces: 442 s); now every such answer is parsed within the deadline."""
    for answer in (head + filler * n + "`", (head + filler + "\n") * (n // 20)):
        try:
            parse_edits(answer, FILES.get, lambda: list(FILES))
        except EditError:
            pass
