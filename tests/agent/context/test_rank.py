"""Ranking without a model: the statement's clues point at files and units."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.context.clues import read_clues
from ooda.agent.context.index import load_index
from ooda.agent.context.rank import rank, resolve_paths


def test_the_named_method_and_its_file_come_first(big_repo: Path) -> None:
    index = load_index(big_repo, cache=False)
    ranking = rank(index, read_clues("Polygon.area() gives a negative area for clockwise "
                                     "points; the shoelace sum is signed."))
    assert ranking.files[0][0] == "geom/shapes.py"
    best = ranking.units_in(index, "geom/shapes.py")[0][0]
    assert best.qualname == "Polygon.area"


def test_a_traceback_frame_beats_words(big_repo: Path) -> None:
    index = load_index(big_repo, cache=False)
    text = ('Crash:\n  File "/site-packages/geom/util.py", line 6, in pairs\n'
            "TypeError: can only concatenate list")
    ranking = rank(index, read_clues(text))
    assert ranking.files[0][0] == "geom/util.py"
    assert ranking.units_in(index, "geom/util.py")[0][0].qualname == "pairs"


def test_a_hint_file_is_lifted(big_repo: Path) -> None:
    index = load_index(big_repo, cache=False)
    plain = rank(index, read_clues("something is wrong"))
    hinted = rank(index, read_clues("something is wrong"), ["geom/other7.py"])
    assert dict(hinted.files)["geom/other7.py"] > dict(plain.files).get("geom/other7.py", 0)


def test_written_paths_resolve_by_their_longest_suffix(big_repo: Path) -> None:
    index = load_index(big_repo, cache=False)
    assert resolve_paths(index, ["/x/y/geom/shapes.py", "util.py", "nowhere.py"]) == [
        "geom/shapes.py", "geom/util.py"]


def test_inner_frames_count_more_and_conventions_are_names(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "outer.py").write_text("def run(x):\n    return inner(x)\n")
    (pkg / "inner.py").write_text("def inner(x):\n    return 1 / x\n")
    (pkg / "printer.py").write_text(
        "class Printer:\n    def _print_Sum(self, e):\n        return str(e)\n\n"
        "    def _print_Product(self, e):\n        return str(e)\n")
    index = load_index(tmp_path, cache=False)
    text = ('Traceback (most recent call last):\n  File "/x/pkg/outer.py", line 2, in run\n'
            '  File "/x/pkg/inner.py", line 2, in inner\nZeroDivisionError')
    assert rank(index, read_clues(text)).files[0][0] == "pkg/inner.py"
    ranking = rank(index, read_clues("pprint(`Sum`(x, (x, 1, oo))) is misaligned"))
    assert ranking.units_in(index, "pkg/printer.py")[0][0].qualname == "Printer._print_Sum"
