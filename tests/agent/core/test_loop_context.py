"""The loop on a repository too large to show whole: the model sees the file in part, answers
with the whole file as it saw it (markers dropped), and the patch verified changes only the
line it fixed — never the code it was not shown."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ooda.agent.contracts.protocols import Completion, Verdict
from ooda.agent.core.loop import Loop, LoopOptions
from ooda.agent.core.runlog import RunLog
from ooda.agent.edits.views import MARKER_RE
from ooda.tasks.loader import Task


class WholeFileModel:
    """Rewrites the first partly shown file of the prompt whole, fixing `return s / 2`."""

    name = "whole-file"

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        user = messages[1]["content"]
        path, body = re.search(r"\n(geom/shapes\.py)\n```python\n(.*?)\n```", user, re.S).groups()
        fixed = [ln for ln in body.replace("return s / 2", "return abs(s) / 2").splitlines()
                 if not MARKER_RE.match(ln)]
        return Completion(f"Here is the corrected file.\n\n{path}\n```python\n"
                          + "\n".join(fixed) + "\n```\n")


class OneLineVerifier:
    """Passes a patch that changes exactly one line."""

    backend_name = "fake"

    def verify(self, patch: str, *, log_dir: Path | None = None, deadline: float | None = None,
               verdict_only: bool = False, stop: object = None) -> Verdict:
        removed = [ln for ln in patch.splitlines() if ln.startswith("-") and
                   not ln.startswith("---")]
        added = [ln for ln in patch.splitlines() if ln.startswith("+") and
                 not ln.startswith("+++")]
        ok = removed == ["-        return s / 2"] and added == ["+        return abs(s) / 2"]
        return Verdict("passed" if ok else "failed", "ok" if ok else patch, [], "")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OODA_HOME", str(tmp_path / "home"))


def test_a_whole_file_answer_to_a_partial_view_keeps_the_unseen_code(tmp_path: Path) -> None:
    repo = tmp_path / "repo" / "geom"
    repo.mkdir(parents=True)
    helpers = "\n\n".join(f"def helper_{k}(v):\n    return v * {k}\n" for k in range(200))
    (repo / "shapes.py").write_text(
        "class Polygon:\n    def area(self):\n        s = sum(self.cross())\n"
        "        return s / 2\n\n\n" + helpers)
    for k in range(5):
        (repo / f"other{k}.py").write_text(helpers.replace("helper_", f"other{k}_"))
    task = Task(id="t", statement="Polygon.area is negative for clockwise points",
                repo=tmp_path / "repo", fail_to_pass=["tests/test_shapes.py"])
    log = RunLog(tmp_path / "runs", "run1")
    loop = Loop(task, WholeFileModel(), OneLineVerifier(), log,  # type: ignore[arg-type]
                LoopOptions(samples=1, rounds=1, context_tokens=2500))
    result = loop.run()
    assert not loop.context.files[0].whole
    attempt = json.loads((log.dir / "attempts.jsonl").read_text().splitlines()[0])
    assert result.status == "passed", attempt["reason"]
    assert attempt["edit_format"] == "whole_file"


class SmallWindowModel(WholeFileModel):
    def context_window(self) -> int | None:
        return 3000


def test_the_context_fits_the_window_the_model_knows(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for k in range(20):
        (repo / f"m{k}.py").write_text("\n\n".join(
            f"def f{k}_{j}(x):\n    return x + {j}\n" for j in range(60)))
    task = Task(id="t", statement="f3_7 is wrong", repo=repo, fail_to_pass=["t.py"])
    log = RunLog(tmp_path / "runs", "run1")
    loop = Loop(task, SmallWindowModel(), OneLineVerifier(), log,  # type: ignore[arg-type]
                LoopOptions(samples=1, rounds=1, context_tokens=32_000))
    assert loop.context_tokens() < 3000 * 0.85
    assert loop.context.tokens <= loop.context_tokens()
    assert loop.context.files[0].path == "m3.py"


class FramesVerifier:
    """Fails with a traceback through helper `k` (chosen among those not shown)."""

    backend_name = "fake"
    k = 0

    def verify(self, patch: str, *, log_dir: Path | None = None, deadline: float | None = None,
               verdict_only: bool = False, stop: object = None) -> Verdict:
        line = 8 + self.k * 4  # the class and two blank lines, then 4 lines a helper
        trace = ('Traceback (most recent call last):\n  File "/work/geom/shapes.py", line '
                 f'{line}, in helper_{self.k}\nValueError: bad')
        return Verdict("failed", "tests failed", [], trace)


def test_the_next_round_shows_code_a_failure_names(tmp_path: Path) -> None:
    repo = tmp_path / "repo" / "geom"
    repo.mkdir(parents=True)
    helpers = "\n\n".join(f"def helper_{k}(v):\n    return v * {k}\n" for k in range(200))
    (repo / "shapes.py").write_text(
        "class Polygon:\n    def area(self):\n        s = sum(self.cross())\n"
        "        return s / 2\n\n\n" + helpers)
    for k in range(5):
        (repo / f"other{k}.py").write_text(helpers.replace("helper_", f"other{k}_"))
    task = Task(id="t", statement="Polygon.area is negative for clockwise points",
                repo=tmp_path / "repo", fail_to_pass=["tests/test_shapes.py"])
    log = RunLog(tmp_path / "runs", "run1")
    verifier = FramesVerifier()
    loop = Loop(task, WholeFileModel(), verifier, log,  # type: ignore[arg-type]
                LoopOptions(samples=1, rounds=2, context_tokens=2500))
    shown = loop.context.files[0].text
    verifier.k = next(k for k in range(199, 0, -1) if f"return v * {k}\n" not in shown + "\n")
    loop.run()
    first, second = loop.attempts
    body = f"def helper_{verifier.k}(v):\n    return v * {verifier.k}"
    assert body not in first.messages[1]["content"]
    assert body in second.messages[-1]["content"]
    assert 8 + verifier.k * 4 in second.revealed["geom/shapes.py"]
