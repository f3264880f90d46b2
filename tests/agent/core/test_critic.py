"""A blind run's critic (agent/core/critic.py) and its place in the selection: asked only for
finalists the checks left level, in both orders, its tokens counted. Fake model."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ooda.agent.contracts.protocols import CRITIC_REQUEST_LINE, Completion, Verdict, VerifierResult
from ooda.agent.core import blind_select
from ooda.agent.core.budget import Budget
from ooda.agent.core.critic import Critic, orders, parse_scores
from ooda.agent.core.records import Attempt
from ooda.tasks.loader import Task


class Scorer:
    """Scores a patch 9 when it holds `good`, else 1, whatever its label; or fails."""

    name = "judge"

    def __init__(self, good: str, fail: bool = False, only_good: bool = False) -> None:
        self.good = good
        self.fail = fail
        self.only_good = only_good
        """Name only the candidate holding `good` (a partial answer, as a small model gives)."""
        self.prompts: list[str] = []

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        text = messages[-1]["content"]
        self.prompts.append(text)
        if self.fail:
            raise TimeoutError("the endpoint did not answer")
        lines = []
        for block in text.split("## Candidate ")[1:]:
            if self.good in block or not self.only_good:
                lines.append(f"Candidate {block[0]}: {9 if self.good in block else 1}")
        return Completion("thinking...\n" + "\n".join(lines), 100, 10)


def attempt(name: str, patch: str, status: str = "passed") -> Attempt:
    a = Attempt(name, 1, None, [])
    a.patch, a.code_key, a.status = patch, name, status
    a.verdict = Verdict(status=status, reason="", results=[
        VerifierResult("pytest", "passed", 0.1, "", "", {"required": {"t::a": "passed"}})])
    return a


def task() -> Task:
    return Task(id="t", statement="add() subtracts", repo=Path("."))


def test_scores_parse_and_orders_cover_each_position() -> None:
    assert parse_scores("Candidate A: 3\nCandidate b = 7.5\nCandidate C: 12\nCandidate Z: 1", 3) \
        == {"A": 3.0, "B": 7.5}  # 12 is off the 0-10 scale: no score
    assert orders(3, 2) == [[0, 1, 2], [2, 1, 0]]
    assert orders(2, 5) == [[0, 1], [1, 0]]


def test_the_critic_decides_only_between_level_finalists_and_counts_its_tokens() -> None:
    right = attempt("r1c2", "+    return a + b\n")
    wrong = attempt("r1c1", "+    return abs(a - b)\n+    # more\n")  # the larger diff
    model = Scorer("a + b")
    budget = Budget(60)
    critic = Critic(task(), model, budget, requests=2)
    chosen, record = blind_select.choose([wrong, right], [wrong, right], critic,
                                         time.monotonic() + 30)
    assert chosen is right
    assert len(model.prompts) == 2 and all(p.startswith(CRITIC_REQUEST_LINE) for p in model.prompts)
    assert record["critic"]["scores"] == {"r1c1": 1.0, "r1c2": 9.0}
    assert (budget.prompt_tokens, budget.completion_tokens) == (200, 20)
    # without the critic the larger diff wins the tie-break
    assert blind_select.choose([wrong, right], [wrong, right])[0] is wrong


def test_a_candidate_the_checks_already_rank_first_needs_no_critic() -> None:
    broken = attempt("r1c1", "+x\n", status="failed")
    broken.verdict = Verdict(status="failed", reason="", results=[
        VerifierResult("pytest", "failed", 0.1, "", "", {"required": {"t::a": "failed"}})])
    kept = attempt("r1c2", "+y\n")
    model = Scorer("+x")
    chosen, record = blind_select.choose([broken, kept], [broken, kept],
                                         Critic(task(), model, Budget(60)))
    assert chosen is kept and model.prompts == []
    assert record["critic"]["requests"] == 0


def test_a_failing_critic_leaves_the_other_signals_to_decide() -> None:
    a, b = attempt("r1c1", "+a\n+b\n"), attempt("r1c2", "+c\n")
    critic = Critic(task(), Scorer("+c", fail=True), Budget(60))
    chosen, record = blind_select.choose([a, b], [a, b], critic, time.monotonic() + 30)
    assert chosen is a  # the larger diff
    assert record["critic"]["requests"] == 0 and len(record["critic"]["failures"]) == 2


def test_an_answer_that_scores_only_some_finalists_is_left_out_whole() -> None:
    a, b = attempt("r1c1", "+a\n+b\n"), attempt("r1c2", "+c\n")
    critic = Critic(task(), Scorer("+c", only_good=True), Budget(60))
    chosen, record = blind_select.choose([a, b], [a, b], critic, time.monotonic() + 30)
    assert chosen is a  # the larger diff: naming one candidate alone does not make it win
    assert record["critic"]["requests"] == 2 and record["critic"]["scores"] == {}
    assert record["critic"]["failures"] == \
        ["answer scored 1 of 2 candidates on the scale: left out"] * 2
