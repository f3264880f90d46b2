"""Ranking with the fast model, over real HTTP against the bundled replay endpoint: scripted
votes lift a candidate; answers that name nothing on the map leave the ranking as it was."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ooda.agent.context import choose_context, votes
from ooda.agent.context.clues import read_clues
from ooda.agent.context.index import load_index
from ooda.agent.context.rank import rank
from ooda.agent.models.endpoint import ModelConfig
from ooda.agent.models.openai_model import OpenAIModel
from ooda.agent.models.server import ReplayServer
from ooda.tasks.loader import Task

STATEMENT = "the helpers give wrong totals for some values"


def scripted(tmp_path: Path, answers: list[str]) -> Path:
    path = tmp_path / "scripts" / "replay.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"task": "t/context", "answer": a}) + "\n"
                            for a in answers))
    return path


@pytest.fixture
def asked(big_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "ooda-local")
    index = load_index(big_repo, cache=False)
    ranking = rank(index, read_clues(STATEMENT))

    def ask(answers: list[str]) -> tuple[votes.Votes, object]:
        with ReplayServer([scripted(tmp_path, answers)] if answers else [tmp_path]) as server:
            model = OpenAIModel(ModelConfig(name="replay", base_url=server.start()))
            found = votes.ask(model, "t", STATEMENT, index, ranking, 3,
                              time.monotonic() + 30)
        return found, votes.merged(ranking, found)

    return index, ranking, ask


def test_votes_lift_the_file_and_unit_they_name(asked) -> None:
    index, ranking, ask = asked
    target = ranking.files[5][0]
    unit = votes.compact_map(index, ranking)[1][target][0]
    name = index.units[unit].qualname
    found, merged = ask([f"{target}::{name}\nsomething else", f"`{target}`", "no idea"])
    assert found.samples == 3 and found.answered == 2
    assert found.prompt_tokens > 0 and found.completion_tokens > 0
    assert [p for p, _ in merged.files].index(target) < 5  # lifted from sixth
    assert merged.units[unit] > ranking.units[unit]
    assert found.record()["files"][0] == target


def test_nonsense_leaves_the_model_free_ranking(asked) -> None:
    _, ranking, ask = asked
    for answers in ([], ["I think the bug is in the database layer.", "```diff\n+x\n```"]):
        found, merged = ask(answers)
        assert found.answered == 0
        assert merged is ranking


def test_choose_context_takes_a_second_opinion(big_repo: Path) -> None:
    task = Task(id="t", statement=STATEMENT, repo=big_repo, fail_to_pass=["x.py"])
    seen: list[int] = []

    def refine(index, ranking):
        seen.append(len(ranking.files))
        return ranking

    choose_context(task, 2000, refine=refine)
    assert seen and seen[0] > 0
