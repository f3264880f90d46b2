"""A blind run's critic from the outside: the real CLI, real HTTP to the bundled endpoint with
scripted critic answers, real Docker sandboxes.

Two candidates both keep the regression tests passing and nothing else the run may see tells
them apart; the larger one is wrong. Without the critic (`--critic 0`) the tie-break submits
it; with the critic, the model's scores (asked twice, the candidates in both orders) submit the
right one, and the critic's requests and tokens are recorded. No scripted model is a real one:
this shows the mechanism, not what a real model's judgement is worth.
"""

from __future__ import annotations

import json
from pathlib import Path

from sandbox_helpers import backend_or_skip
from test_blind_eval import HIDDEN_STATS, STATS, STATS_TESTS, TaskTests, edit, make_task, ooda

from ooda.agent.contracts.protocols import CRITIC_REQUEST_LINE
from ooda.agent.models.server import ReplayServer

OLD = "    return sum(xs) // len(xs)"
RIGHT = edit("stats.py", OLD, "    return sum(xs) / len(xs)")
WRONG = edit("stats.py", OLD, "    if not xs:\n        return 0\n    total = sum(xs)\n"
             "    return total // len(xs)")


def run(tmp_path: Path, *extra: str) -> tuple[dict[str, object], list[str]]:
    root = tmp_path / "set"
    make_task(
        root, "stats", {"stats.py": STATS, "tests/test_stats.py": STATS_TESTS,
                        "pytest.ini": "[pytest]\npythonpath = .\n"},
        TaskTests("tests/test_stats.py", "test_mean_of_equal_values",
                  "test_mean_of_two_values_is_fractional", HIDDEN_STATS),
        "The mean truncates: the mean of 3 and 4 is 3.5, not 3.",
        [
            {"round": 1, "answer": WRONG},
            {"round": 1, "answer": RIGHT},
            # asked twice, the candidates in both orders: the answer follows which one is A
            {"kind": "critic", "contains": "return total // len(xs)\n```\n\n## Candidate B",
             "answer": "A keeps truncating.\nCandidate A: 2\nCandidate B: 9"},
            {"kind": "critic", "contains": "return sum(xs) / len(xs)\n```\n\n## Candidate B",
             "answer": "B keeps truncating.\nCandidate A: 8\nCandidate B: 3"},
        ])
    log = tmp_path / "requests.jsonl"
    with ReplayServer([root], request_log=log) as server:
        proc = ooda("eval", str(root), "--model", "m", "--base-url", server.base_url, "-n", "2",
                    "--rounds", "1", "--repro-tests", "0", "--verify-concurrency", "1",
                    "--runs-dir", str(tmp_path / "runs"), "--eval-id", "e", "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    sent = ["\n".join(str(m.get("content")) for m in json.loads(line)["messages"])
            for line in log.read_text().splitlines()]
    return json.loads((tmp_path / "runs" / "e" / "tasks" / "stats" / "run.json").read_text()), \
        sent


def test_the_critic_decides_between_finalists_the_checks_cannot_tell_apart(
    tmp_path: Path,
) -> None:
    backend_or_skip("docker")
    without, sent = run(tmp_path / "without", "--critic", "0", "--judge-submitted")
    assert not any(CRITIC_REQUEST_LINE in text for text in sent)
    assert without["oracle"]["n"] == 1  # type: ignore[index]  # only the submitted patch
    assert without["resolved"] is False  # the larger (wrong) diff won the tie-break
    assert "critic" not in without["selection"]  # type: ignore[operator]

    with_critic, sent = run(tmp_path / "with")
    asked = [text for text in sent if CRITIC_REQUEST_LINE in text]
    assert len(asked) == 2 and all("Candidate A" in t and "Candidate B" in t for t in asked)
    assert all("test_mean_of_two_values_is_fractional" not in t for t in asked)  # blind
    assert with_critic["resolved"] is True
    selection = with_critic["selection"]
    assert isinstance(selection, dict)
    critic = selection["critic"]
    assert critic["requests"] == 2 and critic["prompt_tokens"] > 0
    assert sorted(critic["scores"].values()) == [2.5, 8.5]
    assert "the model's judgement gives it 8.5" in selection["why"]
    models = with_critic["models"]
    assert isinstance(models, dict)
    assert sum(m.get("other_requests", 0) for m in models.values()) == 2  # counted as the model's
