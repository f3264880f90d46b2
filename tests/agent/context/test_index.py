"""The index: built once per repository state, found again by its fingerprint, rebuilt from
the per-file cache when files change; test files cut on demand and never retrieved."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.context import store
from ooda.agent.context.index import is_test_file, list_python, load_index, module_name


def test_index_is_cached_per_state_and_follows_changes(big_repo: Path) -> None:
    first = load_index(big_repo)
    assert list(store.cache_dir().glob("index-*.pickle"))
    again = load_index(big_repo)
    assert again.fingerprint == first.fingerprint and len(again.units) == len(first.units)
    shapes = big_repo / "geom" / "shapes.py"
    shapes.write_text(shapes.read_text() + "\n\ndef added_later():\n    return 1\n")
    changed = load_index(big_repo)
    assert changed.fingerprint != first.fingerprint
    assert "added_later" in changed.by_name
    assert "added_later" not in first.by_name


def test_a_copy_elsewhere_reads_its_own_files(big_repo: Path, tmp_path: Path) -> None:
    import shutil

    index = load_index(big_repo)
    copy = tmp_path / "copy"
    shutil.copytree(big_repo, copy)
    again = load_index(copy)
    assert again.fingerprint == index.fingerprint and again.repo == copy
    assert again.text_of("geom/util.py") == (copy / "geom" / "util.py").read_text()


def test_tests_are_cut_on_demand_and_not_retrieved(big_repo: Path) -> None:
    index = load_index(big_repo, cache=False)
    assert all(not is_test_file(u.path) for u in index.units)
    assert [u.qualname for u in index.units_of("tests/test_shapes.py")][-1] == (
        "test_area_clockwise")
    scores = index.unit_scores(["area", "clockwise"])
    assert scores and all(not is_test_file(index.units[k].path) for k in scores)


def test_listing_and_module_names(tmp_path: Path) -> None:
    for rel in ("src/pkg/__init__.py", "src/pkg/a.py", ".hidden/x.py", "build/lib/pkg/a.py",
                "node_modules/y.py", "pkg2/build/z.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    assert list_python(tmp_path) == ["pkg2/build/z.py", "src/pkg/__init__.py", "src/pkg/a.py"]
    assert module_name("src/pkg/__init__.py") == "pkg"
    assert module_name("src/pkg/a.py") == "pkg.a"
    assert is_test_file("testing/test_x.py") and is_test_file("pkg/tests/helpers.py")
    assert not is_test_file("sympy/testing/pytest.py")


def test_an_unwritable_cache_is_skipped(big_repo: Path, monkeypatch, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("OODA_HOME", str(blocker))
    assert load_index(big_repo).units
