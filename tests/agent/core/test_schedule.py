"""The escalation rule, the digest the strong model reads, per-model accounting."""

from __future__ import annotations

from dataclasses import dataclass

from ooda.agent.contracts.protocols import Completion
from ooda.agent.core.records import Attempt
from ooda.agent.core.schedule import ModelSchedule, Price, Tier, digest, per_model
from ooda.agent.core.sources import LLMSource


@dataclass
class Named:
    name: str

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: object = None) -> Completion:
        raise NotImplementedError


def pair(**kw: object) -> ModelSchedule:
    return ModelSchedule(
        Tier(LLMSource(Named("fast")), Price(0.1, 0.4)),
        Tier(LLMSource(Named("strong")), Price(3, 15), "strong"),
        **kw,  # type: ignore[arg-type]
    )


def names(schedule: ModelSchedule, rounds: int, left: float = 1.0) -> list[str]:
    return [schedule.tier_for(r, rounds, left).source.name for r in range(1, rounds + 1)]


def test_the_last_round_escalates_by_default() -> None:
    schedule = pair()
    assert names(schedule, 3) == ["fast", "fast", "strong"]
    assert schedule.escalated_at == 3 and "2 round(s) of fast" in str(schedule.escalation_reason)


def test_after_rounds_and_budget_rules() -> None:
    assert names(pair(after_rounds=1), 4) == ["fast", "strong", "strong", "strong"]
    low = pair(budget_below=0.5)
    assert low.tier_for(1, 5, 0.1).source.name == "fast"  # never before the fast model tried
    assert low.tier_for(2, 5, 0.4).source.name == "strong"
    assert "budget" in str(low.escalation_reason)
    assert names(ModelSchedule.single(Named("only")), 3) == ["only"] * 3


def failed(attempt_id: str, model: str, patch: str, feedback: str) -> Attempt:
    a = Attempt(attempt_id, 1, None, [], status="failed", reason="pytest failed: x")
    a.model, a.patch, a.feedback = model, patch, feedback
    a.prompt_tokens, a.completion_tokens, a.t_start, a.t_generated = 1000, 100, 1.0, 2.5
    return a


def test_digest_shows_the_best_failures_bounded() -> None:
    attempts = [failed(f"r1c{i}", "fast", f"+line {i}\n", f"assert {i} == 2") for i in range(5)]
    attempts[1].duplicate_of = "r1c0"
    text = digest(attempts)
    assert "Candidate 3" in text and "Candidate 4" not in text
    assert "+line 0" in text and "+line 1" not in text and "assert 2 == 2" in text
    assert digest([]) == ""


def test_per_model_accounting() -> None:
    schedule = pair()
    win = failed("r3c1", "strong", "+x\n", "")
    win.status = "passed"
    models = per_model([failed("r1c1", "fast", "", ""), win], schedule, win)
    assert models["fast"]["attempts"] == 1 and not models["fast"]["solved"]
    assert models["strong"]["solved"] and models["strong"]["role"] == "strong"
    assert models["fast"]["cost_usd"] == round((1000 * 0.1 + 100 * 0.4) / 1e6, 6)
    assert models["strong"]["generation_s"] == 1.5
