"""Presentation within a budget: small repositories whole, large files in part, with markers
that stand for what was left out, and views that apply edits to the real file."""

from __future__ import annotations

from pathlib import Path

from ooda.agent import edits
from ooda.agent.context import choose_context
from ooda.agent.edits.views import MARKER_RE
from ooda.tasks.loader import Task


def _task(repo: Path, statement: str, **kw: object) -> Task:
    return Task(id="t", statement=statement, repo=repo, **kw)  # type: ignore[arg-type]


def test_a_small_repository_is_shown_whole_and_tests_once(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    (tmp_path / "tests" / "test_m.py").write_text("from m import f\n\ndef test_a():\n    pass\n")
    task = _task(tmp_path, "f in m.py is wrong",
                 fail_to_pass=["tests/test_m.py::test_a", "tests/test_m.py::test_b"])
    context = choose_context(task, 4000)
    assert [(f.path, f.whole) for f in context.files] == [("m.py", True),
                                                          ("tests/test_m.py", True)]
    assert context.files[0].text == "def f():\n    return 1"
    # a source in another encoding is shown too (not skipped: the model learns it exists)
    (tmp_path / "legacy.py").write_bytes(b"# -*- coding: latin-1 -*-\nNAME = '\xe9t\xe9'\n")
    shown = {f.path: f.text for f in choose_context(task, 4000).files}
    assert "NAME = '\ufffdt\ufffd'" in shown["legacy.py"]


def test_a_large_repository_is_shown_in_part_within_the_budget(big_repo: Path) -> None:
    task = _task(big_repo, "Polygon.area() is negative for clockwise points")
    context = choose_context(task, 2500)
    assert context.tokens <= 2500
    first = context.files[0]
    assert first.path == "geom/shapes.py" and not first.whole
    assert "def area(self):" in first.text and "s += x1 * y2 - x2 * y1" in first.text
    assert any(MARKER_RE.match(line) for line in first.text.splitlines())
    real = (big_repo / "geom" / "shapes.py").read_text().splitlines()
    for start, end in first.ranges:  # the ranges are the real file's lines, shown verbatim
        assert "\n".join(real[start - 1 : end]) in first.text


def test_edits_to_a_partly_shown_file_apply_to_the_real_file(big_repo: Path) -> None:
    task = _task(big_repo, "Polygon.area() is negative for clockwise points")
    context = choose_context(task, 2500)
    views = context.views()
    shown = context.files[0].text
    real = (big_repo / "geom" / "shapes.py").read_text()

    def read(path: str) -> str | None:
        p = big_repo / path
        return p.read_text() if p.is_file() else None

    fixed = shown.replace("return s / 2", "return abs(s) / 2")
    for answer in (
        f"geom/shapes.py\n```python\n{fixed}\n```\n",  # the whole file, markers kept
        "geom/shapes.py\n```python\n" + "\n".join(
            ln for ln in fixed.splitlines() if not MARKER_RE.match(ln)) + "\n```\n",  # dropped
        "geom/shapes.py\n```python\n" + "\n".join(
            "    # ... rest of the file unchanged ..." if MARKER_RE.match(ln) else ln
            for ln in fixed.splitlines()) + "\n```\n",  # lazy placeholders
    ):
        parsed = edits.parse_edits(answer, read, views=views)
        assert parsed.files["geom/shapes.py"] == real.replace("return s / 2", "return abs(s) / 2")
    # a SEARCH that spans a marker matches the real lines it stands for
    lines = shown.splitlines()
    k = next(i for i, ln in enumerate(lines) if MARKER_RE.match(ln) and i > 0)
    search = "\n".join(lines[k - 1 : k + 2])
    answer = f"geom/shapes.py\n<<<<<<< SEARCH\n{search}\n=======\n{search}\n# ok\n>>>>>>> REPLACE\n"
    parsed = edits.parse_edits(answer, read, views=views)
    assert parsed.files["geom/shapes.py"].count("\n") == real.count("\n") + 1
    # so does a diff hunk whose context holds a marker
    diff = "\n".join(["```diff", "--- a/geom/shapes.py", "+++ b/geom/shapes.py", "@@ ... @@",
                       *(" " + ln for ln in lines[k - 1 : k + 2]), "+# ok", "```", ""])
    parsed = edits.parse_edits(diff, read, views=views)
    assert parsed.files["geom/shapes.py"].count("\n") == real.count("\n") + 1
    assert "# ... lines" not in parsed.files["geom/shapes.py"]
    # a file never shown cannot be rewritten whole
    shown_paths = {f.path for f in context.files}
    unseen = next(f"geom/other{k}.py" for k in range(12) if f"geom/other{k}.py" not in shown_paths)
    try:
        guess = (big_repo / unseen).read_text().replace("total = 0", "total = 1", 1)
        edits.parse_edits(f"{unseen}\n```python\nx = 1\n{guess}```\n", read, views=views)
    except edits.EditError as err:
        assert err.kind == "unseen_file"
    else:
        raise AssertionError("a whole-file answer for an unseen file was applied")


def test_hidden_tests_are_neither_named_nor_used(big_repo: Path) -> None:
    from ooda.agent.core.prompts import first_prompt

    patch = ("--- a/tests/test_shapes.py\n+++ b/tests/test_shapes.py\n@@ -1 +1,2 @@\n"
             " x\n+def test_secret():\n")
    task = _task(big_repo, "area is wrong", fail_to_pass=[
        "tests/test_shapes.py::test_secret", "test_bare_sympy_style"], test_patch=patch)
    text = first_prompt(task, context_tokens=3000)[1]["content"]
    assert "test_secret" not in text and "test_bare_sympy_style" not in text
    assert "tests/test_shapes.py" not in text


def test_a_long_function_is_shown_in_the_part_the_task_points_at(tmp_path: Path) -> None:
    body = "".join(f"    step_{k} = compute_step({k}, data)\n" for k in range(150))
    body = body.replace("    step_90 = compute_step(90, data)\n",
                        "    if frobnicate_widths:\n        step_90 = 0\n")
    source = f"def pipeline(data, frobnicate_widths=False):\n{body}    return data\n"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text(source)
    for k in range(6):  # more than the budget holds: the repository is ranked, not shown whole
        (tmp_path / "pkg" / f"other{k}.py").write_text(
            "".join(f"def helper_{k}_{j}(x):\n    return x + {j}\n\n" for j in range(60)))
    task = _task(tmp_path, "pipeline() ignores frobnicate_widths: widths are never frobnicated")
    context = choose_context(task, 700)  # the function whole costs 1,650 tokens
    shown = next(f for f in context.files if f.path == "pkg/long.py")
    assert not shown.whole
    text = shown.text
    assert "def pipeline(data, frobnicate_widths=False):" in text  # the head, where it belongs
    assert "    if frobnicate_widths:\n        step_90 = 0" in text  # the part it points at
    assert "step_40 = " not in text and "step_140 = " not in text  # the rest elided
    views = context.views()
    answer = ("pkg/long.py\n<<<<<<< SEARCH\n    if frobnicate_widths:\n        step_90 = 0\n"
              "=======\n    if frobnicate_widths:\n        step_90 = 1\n>>>>>>> REPLACE\n")
    parsed = edits.parse_edits(answer, lambda p: (tmp_path / p).read_text(), views=views)
    assert parsed.files["pkg/long.py"] == source.replace("step_90 = 0", "step_90 = 1")


def test_the_imports_under_a_long_licence_are_shown(tmp_path: Path) -> None:
    licence = "".join(f"# licence line {k}\n" for k in range(50))
    source = (licence + "import os\nfrom typing import (\n    Any,\n)\n\n\n"
              + "".join(f"def helper_{j}(x: Any) -> Any:\n"
                        + "".join(f"    x = x + {i}  # step {i}\n" for i in range(8))
                        + f"    return os.sep * {j}\n\n\n" for j in range(20)))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(source)
    for k in range(6):
        (tmp_path / "pkg" / f"other{k}.py").write_text(
            "".join(f"def other_{k}_{j}(x):\n    return x + {j}\n\n" for j in range(60)))
    context = choose_context(_task(tmp_path, "helper_7() returns the wrong separator"), 1000)
    shown = next(f for f in context.files if f.path == "pkg/mod.py")
    assert "def helper_7(x: Any) -> Any:" in shown.text and "return os.sep * 7" in shown.text
    assert "import os\nfrom typing import (\n    Any,\n)" in shown.text  # where a fix adds one
    assert "# licence line 10" not in shown.text
