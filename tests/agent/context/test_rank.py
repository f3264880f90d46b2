"""Ranking without a model: the statement's clues point at files and units."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.context.choose import rank_task
from ooda.agent.context.clues import read_clues
from ooda.agent.context.index import load_index
from ooda.agent.context.rank import rank, resolve_paths
from ooda.tasks.loader import Task


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


def test_a_named_test_points_at_the_source_it_is_named_after(big_repo: Path) -> None:
    (big_repo / "tests" / "test_other7.py").write_text("def test_x():\n    assert True\n")
    index = load_index(big_repo, cache=False)
    task = Task(id="t", statement="something is wrong", repo=big_repo)  # type: ignore[call-arg]
    plain = dict(rank_task(index, task, []).files)
    named = dict(rank_task(index, task, ["tests/test_other7.py"]).files)
    assert named["geom/other7.py"] > plain.get("geom/other7.py", 0)


def test_module_paths_as_written_inside_their_package_and_docs_demoted(tmp_path: Path) -> None:
    for rel in ("astro/io/ascii/rst.py", "astro/io/ascii/core.py", "docs/rst_demo.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("def write(table):\n    return table\n")
    index = load_index(tmp_path, cache=False)
    files = [p for p, _ in rank(index, read_clues('tbl.write(format="ascii.rst") fails')).files]
    assert files[0] == "astro/io/ascii/rst.py"
    files = [p for p, _ in rank(index, read_clues("rst write")).files]
    assert files.index("docs/rst_demo.py") > 0
