"""ooda.agent.app.metrics: pass@k against known values and math.comb, summaries of result records."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from ooda.agent.app import metrics
from ooda.agent.core.records import AttemptRecord


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    if c == 0:  # (Chen et al.'s code would say 1.0 when n < k even here)
        return 0.0
    if n - c < k:
        return 1.0
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 0, 1, 0.0),
        (10, 10, 1, 1.0),
        (10, 1, 1, 0.1),
        (10, 1, 5, 0.5),  # 1 - C(9,5)/C(10,5) = 1 - 126/252
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (4, 3, 2, 1.0),  # only one wrong candidate: every pair holds a right one
        (1, 1, 1, 1.0),
        (2, 0, 4, 0.0),  # n < k, nothing correct
        (2, 1, 4, 1.0),  # n < k, something correct
    ],
)
def test_pass_at_k_known_values(n: int, c: int, k: int, expected: float) -> None:
    assert metrics.pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_matches_binomials() -> None:
    for n in range(1, 25):
        for c in range(n + 1):
            for k in (1, 2, 3, 4, 8, 16):
                assert metrics.pass_at_k(n, c, k) == pytest.approx(exact_pass_at_k(n, c, k))


def test_pass_at_k_large_n_is_stable() -> None:
    # C(2000, 1000) overflows a float: the product form must not
    value = metrics.pass_at_k(2000, 3, 1000)
    assert value == pytest.approx(exact_pass_at_k(2000, 3, 1000))
    assert 0.0 < value < 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(-1, 0, 1), (3, 4, 1), (3, 1, 0), (3, -1, 1)])
def test_pass_at_k_rejects_nonsense(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        metrics.pass_at_k(n, c, k)


def test_ks_up_to() -> None:
    assert metrics.ks_up_to(1) == [1]
    assert metrics.ks_up_to(6) == [1, 2, 4]
    assert metrics.ks_up_to(8) == [1, 2, 4, 8]


def test_mean_pass_at_k_counts_empty_tasks_as_zero() -> None:
    got = metrics.mean_pass_at_k([(4, 4), (4, 0), (0, 0), (4, 1)], [1, 2, 4])
    assert got["1"] == pytest.approx((1 + 0 + 0 + 0.25) / 4)
    assert got["4"] == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert metrics.mean_pass_at_k([], [1]) == {"1": 0.0}


def test_distribution_and_percentiles() -> None:
    assert metrics.percentile([], 50) is None
    assert metrics.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert metrics.percentile([0.0, 10.0], 90) == pytest.approx(9.0)
    d = metrics.distribution([1.0, 2.0, 3.0, 4.0])
    assert d["count"] == 4 and d["mean"] == 2.5 and d["min"] == 1.0 and d["max"] == 4.0
    assert metrics.distribution([])["p50"] is None


def test_resolved_by_budget_is_a_rising_step() -> None:
    points = metrics.resolved_by_budget([5.0, 1.0], total=4)
    assert points == [(0.0, 0.0), (1.0, 0.25), (5.0, 0.5)]
    assert metrics.resolved_by_budget([], 0) == []


def attempt(status: str, t0: float, tg: float | None, tv: float | None,
            verifiers: list[tuple[str, str, float]] | None = None,
            duplicate_of: str | None = None) -> AttemptRecord:
    return AttemptRecord.from_json({
        "attempt_id": f"a{t0}", "status": status, "t_start_s": t0, "t_generated_s": tg,
        "t_verified_s": tv, "duplicate_of": duplicate_of,
        "verifiers": [{"name": n, "status": s, "duration_s": d} for n, s, d in verifiers or []],
    })


def test_attempt_stats() -> None:
    attempts = [
        attempt("failed", 0.0, 1.0, 4.0, [("syntax", "passed", 0.1), ("ruff", "passed", 0.5),
                                          ("pytest", "failed", 2.0)]),
        attempt("failed", 0.0, 2.0, 6.0, [("syntax", "passed", 0.1), ("mypy", "failed", 1.0)]),
        attempt("failed", 0.0, 2.0, 6.5, [("syntax", "passed", 0.1), ("mypy", "failed", 1.0)],
                duplicate_of="a0.0"),
        attempt("invalid_edit", 0.0, 1.0, 1.0),
        attempt("passed", 5.0, 6.0, 8.0, [("pytest", "passed", 1.5)]),
        attempt("cancelled", 0.0, None, 8.0),
        attempt("error", 0.0, None, 0.5),
    ]
    stats = metrics.attempt_stats(attempts)
    assert stats["n"] == 5 and stats["c"] == 1
    assert stats["generation_s"] == pytest.approx(1 + 2 + 2 + 1 + 1)
    assert stats["first_token_s"] == pytest.approx(0.5)  # the error never got a token
    assert stats["verification_s"] == pytest.approx(3 + 4 + 4.5 + 0 + 2)
    assert stats["verifier_run_s"] == pytest.approx(2.6 + 1.1 + 1.5)  # the duplicate ran none
    assert stats["last_failed_verifier"] == "mypy"  # the failure verified last (t=6.5)
    assert metrics.last_failed_stage([attempt("invalid_edit", 0, 1, 1)]) == "edit"
    assert metrics.last_failed_stage([attempt("passed", 0, 1, 2)]) is None


def record(task_id: str, status: str, n: int, c: int, ttfp: float | None = None,
           tokens: tuple[int, int] = (100, 10), last: str | None = None) -> dict[str, object]:
    return {
        "task_id": task_id, "status": status, "n": n, "c": c, "time_to_first_pass_s": ttfp,
        "tokens": {"prompt": tokens[0], "completion": tokens[1]}, "wall_s": 3.0,
        "generation_s": 1.0, "verification_s": 2.0, "verifier_run_s": 1.5,
        "last_failed_verifier": last,
    }


def test_summarize_counts_errors_apart() -> None:
    results = [
        record("a", "resolved", 4, 2, ttfp=2.0),
        record("b", "resolved", 4, 4, ttfp=6.0),
        record("c", "unresolved", 4, 0, last="pytest"),
        record("d", "error", 0, 0, tokens=(0, 0)),
    ]
    s = metrics.summarize(results, total=5, samples=4, price_prompt=1.0, price_completion=2.0)
    assert (s["total"], s["finished"], s["resolved"], s["unresolved"], s["errors"]) == (
        5, 4, 2, 1, 1)
    assert s["resolved_rate"] == pytest.approx(0.4)
    assert set(s["pass_at_k"]) == {"1", "2", "4"}
    assert s["pass_at_k"]["1"] == pytest.approx((0.5 + 1 + 0 + 0) / 4)
    assert s["tokens"] == {"prompt": 300, "completion": 30, "estimated": False}
    assert s["tokens_per_solve"] == pytest.approx(165.0)
    assert s["cost"] == pytest.approx((300 * 1.0 + 30 * 2.0) / 1e6)
    assert s["candidates"] == 12 and s["candidates_per_solve"] == 6.0
    assert s["time_to_first_pass_s"]["p50"] == pytest.approx(4.0)
    assert s["resolved_by_budget"] == [(0.0, 0.0), (2.0, 0.2), (6.0, 0.4)]
    assert s["time_breakdown_s"] == {"first_token": 0.0, "generation": 4.0,
                                     "verification": 6.0, "queueing": 2.0}
    assert s["last_failed_verifier"] == {"pytest": 1}
    assert s["error_tasks"] == [{"task_id": "d", "reason": ""}]


def test_summarize_without_prices_or_solves() -> None:
    s = metrics.summarize([record("a", "unresolved", 2, 0)], total=1, samples=2)
    assert s["cost"] is None and s["cost_per_solve"] is None
    assert s["candidates_per_solve"] is None and s["resolved_rate"] == 0.0
