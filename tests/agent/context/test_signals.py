"""The ranking signals beyond words: the reference graph, registered names, and the tests that
speak of the task."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.context.clues import read_clues
from ooda.agent.context.graph import pagerank
from ooda.agent.context.index import load_index
from ooda.agent.context.rank import rank
from ooda.agent.context.testhints import clue_tests, namesakes_of


def filler(name: str, n: int) -> str:
    """`n` unremarkable functions (a module's bulk)."""
    return "\n\n".join(
        f"def {name}_helper_{k}(values):\n    total = 0\n    for v in values:\n"
        f"        total += v * {k}\n    return total\n" for k in range(n))


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    pkg = repo / "kit"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Kit."""\n')
    (pkg / "base.py").write_text(
        '"""Bases."""\n\n\nclass Renderer:\n    """Renders nodes."""\n\n'
        "    def escape(self, text):\n        return text.replace('<', '&lt;')\n\n\n"
        + filler("base", 40))
    (pkg / "html.py").write_text(
        '"""HTML."""\n\nfrom kit.base import Renderer\n\n\nclass HtmlRenderer(Renderer):\n'
        '    """Writes HTML."""\n\n    def visit_keyboard(self, node):\n'
        "        return '<kbd>' + self.escape(node) + '</kbd>'\n\n\n" + filler("html", 40))
    (pkg / "config.py").write_text(
        '"""Settings."""\n\n\ndef setup(app):\n'
        "    app.add_config_value('html_keyboard_style', 'plain', 'env')\n\n\n"
        + filler("config", 40))
    (pkg / "frob.py").write_text('"""Frobbing."""\n\n\n' + filler("frob", 60))
    for k in range(10):
        (pkg / f"other{k}.py").write_text(f'"""Other {k}."""\n\n\n' + filler(f"other{k}", 40))
    tests = repo / "tests"
    tests.mkdir()
    (tests / "test_frob.py").write_text(
        "from kit.frob import frob_helper_3\n\n\ndef test_twist_the_gadget_sideways():\n"
        "    assert frob_helper_3([1]) == 3  # twist gadget sideways\n")
    return repo


def test_the_graph_reaches_a_base_class_from_its_subclass(tmp_path: Path) -> None:
    index = load_index(_repo(tmp_path), cache=False)
    assert index.graph is not None and index.graph.edges > 0
    sub = next(k for k, u in enumerate(index.units) if u.qualname == "HtmlRenderer")
    reached = pagerank(index.graph, {sub: 1.0})
    names = {index.units[k].qualname for k in reached}
    assert "Renderer" in names
    caller = next(k for k, u in enumerate(index.units)
                  if u.qualname == "HtmlRenderer.visit_keyboard")
    called = pagerank(index.graph, {caller: 1.0})
    escape = next(k for k, u in enumerate(index.units) if u.qualname == "Renderer.escape")
    assert escape in called


def test_a_registered_name_points_at_the_code_that_registers_it(tmp_path: Path) -> None:
    index = load_index(_repo(tmp_path), cache=False)
    clues = read_clues("Setting html_keyboard_style = 'fancy' in conf.py is ignored.")
    assert "html_keyboard_style" in clues.written
    ranking = rank(index, clues)
    assert ranking.files[0][0] == "kit/config.py"
    assert ranking.units_in(index, "kit/config.py")[0][0].qualname == "setup"


def test_a_role_written_with_colons_matches_its_literal(tmp_path: Path) -> None:
    clues = read_clues("The :kbd: role and the --fast-mode option, and plain prose.")
    assert {"kbd", "--fast-mode"} <= clues.written
    assert "plain" not in clues.written


def test_tests_that_speak_of_the_task_point_at_their_namesake(tmp_path: Path) -> None:
    index = load_index(_repo(tmp_path), cache=False)
    assert namesakes_of(index, "tests/test_frob.py") == ["kit/frob.py"]
    found = clue_tests(index, read_clues("Twisting the gadget sideways breaks").terms)
    assert found.get("kit/frob.py") == 1.0
    ranking = rank(index, read_clues("Twisting the gadget sideways breaks"))
    assert ranking.files[0][0] == "kit/frob.py"


def test_a_quoted_error_message_points_where_it_is_raised(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "kit" / "other3.py").write_text(
        '"""Other 3."""\n\n\ndef load(path):\n    if not path:\n'
        "        raise ValueError(f'cannot load the gadget from {path!r}: empty path')\n"
        "    return path\n\n\n" + filler("other3", 40))
    index = load_index(repo, cache=False)
    clues = read_clues("Loading fails:\n\nValueError: cannot load the gadget from 'x': "
                       "empty path\n")
    assert clues.messages == ["cannot load the gadget from"]
    ranking = rank(index, clues)
    assert ranking.files[0][0] == "kit/other3.py"
    assert ranking.units_in(index, "kit/other3.py")[0][0].qualname == "load"
