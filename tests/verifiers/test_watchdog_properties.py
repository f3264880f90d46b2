"""Property tests of the security watchdog (verifiers/watchdog/), which runs on the model
client's thread for every chunk: any text, random or markup-heavy or made of long runs of the
rules' own keywords, is read without an exception within a generous bound, and the finding
does not depend on how the text was cut into chunks."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ooda.verifiers.watchdog import BaseCode, Finding, Watchdog

_PIECES = st.sampled_from([
    "\n", " ", "(", ")", "[", "]", "{", "}", "'", '"', '"""', "'''", "#", "\\", "f'", "rb\"",
    "```", "```python", "```diff", "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE", "--- a/m.py",
    "+++ b/m.py", "@@ -1,2 +1,2 @@", "+", "-", "m.py", "def f(", "shell=True", "eval(",
    "exec(", "pickle.loads(", "yaml.load(", "Loader=yaml.SafeLoader", "requests.get(",
    "verify=False", "SELECT * ", " FROM t ", " + x", " % x", ".format(", "{x}", "AKIA",
    "Q7RT2ZXW4PLM9NBV", "-----BEGIN RSA PRIVATE KEY-----", "password = ", "x", "1",
])
_ANSWERS = st.lists(_PIECES, max_size=120).map("".join)
_BASE = {"m.py": "import yaml\n\n\ndef f(x):\n    return eval(x)\n"}


def _watchdog() -> Watchdog:
    return Watchdog(BaseCode(_BASE.get, lambda: list(_BASE)))


def _stream(answer: str, cuts: list[int]) -> Finding | None:
    watchdog = _watchdog()
    for end in sorted({*cuts, len(answer)}):
        found = watchdog.observe(answer[:end])
        if found is not None:
            return found
    return None


@settings(max_examples=400, deadline=timedelta(seconds=2))
@given(_ANSWERS, st.lists(st.integers(0, 4000), max_size=30))
def test_any_answer_is_read_and_the_chunking_does_not_matter(answer: str,
                                                            cuts: list[int]) -> None:
    whole = _stream(answer, [])
    cut = _stream(answer, [c for c in cuts if c <= len(answer)])
    assert (whole is None) == (cut is None)
    if whole is not None and cut is not None:
        assert (whole.rule, whole.line, whole.end) == (cut.rule, cut.line, cut.end)


@settings(max_examples=30, deadline=timedelta(seconds=5))
@given(st.sampled_from(["(", "shell=True ", "select ", "update x ", "insert ", "'", '"""',
                        "requests.get(", "a"]), st.integers(2000, 20000))
def test_long_runs_of_one_piece_stay_fast(piece: str, count: int) -> None:
    for fence in ("```python\nx = ", "```python\nq = f\"", "m.py\n<<<<<<< SEARCH\n=======\n"):
        _stream(fence + piece * (count // len(piece)) + "\n```\n", [])
