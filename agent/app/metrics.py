"""Evaluation metrics, pure functions over `results.jsonl` records.

- pass@k: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
  Trained on Code"), 1 - C(n-c, k) / C(n, k), computed as a product so that large n does not
  overflow, averaged over tasks;
- resolved rate against a wall-clock budget (fraction of tasks whose first pass came at or
  before t), time-to-first-pass percentiles, tokens and cost per solved task, candidates per
  solve and where the time went.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ooda.agent.core.records import AttemptRecord

VERIFIED_STATUSES = frozenset({"passed", "failed", "invalid_edit", "timeout"})
"""Attempt statuses that count as a candidate judged for pass@k (n); "passed" ones are c."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k candidates drawn from n (c of them correct) passes.

    With fewer than k wrong candidates every draw of k holds a correct one (1.0); with no
    correct candidate it is 0.0, also when n < k.
    """
    if n < 0 or c < 0 or c > n or k < 1:
        raise ValueError(f"pass@k needs 0 <= c <= n and k >= 1 (got n={n}, c={c}, k={k})")
    if c == 0:
        return 0.0
    if n - c < k:
        return 1.0
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def ks_up_to(samples: int) -> list[int]:
    """k = 1 and the powers of two up to `samples`."""
    ks = [1]
    while ks[-1] * 2 <= samples:
        ks.append(ks[-1] * 2)
    return ks


def mean_pass_at_k(counts: Iterable[tuple[int, int]], ks: Sequence[int]) -> dict[str, float]:
    """pass@k averaged over tasks, for each k; `counts` holds (n, c) per task.

    A task with no judged candidate (n = 0, e.g. an infrastructure error) counts as 0.
    """
    pairs = list(counts)
    if not pairs:
        return {str(k): 0.0 for k in ks}
    return {
        str(k): round(sum(pass_at_k(n, c, k) if n else 0.0 for n, c in pairs) / len(pairs), 6)
        for k in ks
    }


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def distribution(values: Sequence[float]) -> dict[str, float | int | None]:
    """count, mean, p10/p50/p90, min and max of `values` (None where there are none)."""

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 3)

    return {
        "count": len(values),
        "mean": r(sum(values) / len(values)) if values else None,
        "min": r(min(values)) if values else None,
        "p10": r(percentile(values, 10)),
        "p50": r(percentile(values, 50)),
        "p90": r(percentile(values, 90)),
        "max": r(max(values)) if values else None,
    }


def resolved_by_budget(times: Sequence[float], total: int) -> list[tuple[float, float]]:
    """Step points (t, fraction of all `total` tasks solved with time_to_first_pass <= t)."""
    if total <= 0:
        return []
    points = [(0.0, 0.0)]
    for i, t in enumerate(sorted(times), start=1):
        points.append((round(t, 3), round(i / total, 6)))
    return points


def cost(tokens: Mapping[str, int], price_prompt: float | None,
         price_completion: float | None) -> float | None:
    """Dollars for `tokens` at the given prices per million tokens; None when unpriced."""
    if price_prompt is None and price_completion is None:
        return None
    return round(
        (tokens.get("prompt", 0) * (price_prompt or 0.0)
         + tokens.get("completion", 0) * (price_completion or 0.0)) / 1e6,
        6,
    )


def attempt_stats(attempts: Sequence[AttemptRecord]) -> dict[str, Any]:
    """Per-task figures from its attempts.jsonl records.

    n / c for pass@k; the seconds spent waiting for the first token (t_start to
    t_first_token: a request slot in ooda, the endpoint's queue, its prompt processing; the
    whole wait of an attempt that got no token), generating (t_first_token, else t_start, to
    t_generated) and verifying (t_generated to t_verified), summed over attempts (they
    overlap in time); the seconds the verifiers themselves ran, and the stage where the last
    failed attempt failed.
    """
    n = sum(1 for a in attempts if a.status in VERIFIED_STATUSES)
    c = sum(1 for a in attempts if a.status == "passed")
    waiting = generation = verification = verifier_run = 0.0
    for a in attempts:
        start, first = a.t_start_s, a.t_first_token_s
        generated, verified = a.t_generated_s, a.t_verified_s
        if start is not None and first is not None:
            waiting += max(0.0, first - start)
        elif start is not None and generated is None and verified is not None \
                and a.status in ("error", "timeout"):
            waiting += max(0.0, verified - start)  # no token ever came
        if start is not None and generated is not None:
            generation += max(0.0, generated - (first if first is not None else start))
            if verified is not None:
                verification += max(0.0, verified - generated)
        if a.duplicate_of is None:
            verifier_run += sum(float(v.duration_s or 0.0) for v in a.verifiers)
    return {
        "n": n,
        "c": c,
        **answer_formats(attempts),
        "first_token_s": round(waiting, 3),
        "generation_s": round(generation, 3),
        "verification_s": round(verification, 3),
        "verifier_run_s": round(verifier_run, 3),
        "last_failed_verifier": last_failed_stage(attempts),
        "tokens_estimated": any(a.tokens_estimated for a in attempts),
    }


def answer_formats(attempts: Sequence[AttemptRecord]) -> dict[str, dict[str, int]]:
    """How the answers were written: `edit_formats` counts the parsed answers by the edit
    format they were read in ("invalid" for those that did not apply), `invalid_reasons`
    the invalid ones by the short name of the reason (agent/edits EditError.kind)."""
    parsed = [a for a in attempts if a.edit_format or a.status == "invalid_edit"]
    return {
        "edit_formats": _count(a.edit_format or "invalid" for a in parsed),
        "invalid_reasons": _count(a.invalid_reason or "other" for a in attempts
                                  if a.status == "invalid_edit"),
    }


def _add_counts(records: Iterable[Mapping[str, Any]], key: str) -> dict[str, int]:
    """The per-task count tables under `key`, summed."""
    total: dict[str, int] = {}
    for r in records:
        for name, n in (r.get(key) or {}).items():
            total[name] = total.get(name, 0) + int(n)
    return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))


def last_failed_stage(attempts: Sequence[AttemptRecord]) -> str | None:
    """Where the last failed attempt (by t_verified) stopped: a verifier's name, "edit" for an
    edit that did not apply, "timeout"; None when no attempt failed."""
    failed = [a for a in attempts if a.status in ("failed", "invalid_edit", "timeout")]
    if not failed:
        return None
    last = max(failed, key=lambda a: float(a.t_verified_s or 0.0))
    if last.status == "invalid_edit":
        return "edit"
    bad = [v.name for v in last.verifiers if v.status != "passed"]
    return bad[-1] if bad else last.status


def summarize(
    results: Sequence[Mapping[str, Any]],
    *,
    total: int,
    samples: int,
    price_prompt: float | None = None,
    price_completion: float | None = None,
) -> dict[str, Any]:
    """The figures of summary.json from the per-task result records of an evaluation.

    `total` is the number of tasks in the task set (finished or not); the k of pass@k go up
    to `samples` and to the most candidates judged for one task (one gold candidate per task
    gives pass@1 only: a pass@4 would claim four draws that never happened). Tasks that ended in an infrastructure error are counted apart, as the SWE-bench
    harness does: they are neither resolved nor unresolved, and resolved_rate is over `total`.
    """
    resolved = [r for r in results if r.get("status") == "resolved"]
    errors = [r for r in results if r.get("status") == "error"]
    tokens = {
        "prompt": sum(int((r.get("tokens") or {}).get("prompt", 0)) for r in results),
        "completion": sum(int((r.get("tokens") or {}).get("completion", 0)) for r in results),
        "estimated": any((r.get("tokens") or {}).get("estimated") for r in results),
    }
    ttfp = [float(r["time_to_first_pass_s"]) for r in resolved
            if isinstance(r.get("time_to_first_pass_s"), int | float)]
    candidates = sum(int(r.get("n", 0)) for r in results)
    total_cost = cost(tokens, price_prompt, price_completion)
    per_solve = len(resolved) or None

    def per(x: float | None) -> float | None:
        return None if x is None or per_solve is None else round(x / per_solve, 3)

    return {
        "total": total,
        "finished": len(results),
        "resolved": len(resolved),
        "unresolved": sum(1 for r in results if r.get("status") == "unresolved"),
        "errors": len(errors),
        "resolved_rate": round(len(resolved) / total, 6) if total else 0.0,
        "pass_at_k": mean_pass_at_k(
            ((int(r.get("n", 0)), int(r.get("c", 0))) for r in results),
            ks_up_to(min(samples, max((int(r.get("n", 0)) for r in results), default=1))),
        ),
        "tokens": tokens,
        "tokens_per_solve": per(tokens["prompt"] + tokens["completion"]),
        "cost": total_cost,
        "cost_per_solve": None if total_cost is None or per_solve is None else total_cost / per_solve,
        "candidates": candidates,
        "candidates_per_solve": per(candidates),
        "edit_formats": _add_counts(results, "edit_formats"),
        "invalid_reasons": _add_counts(results, "invalid_reasons"),
        "time_to_first_pass_s": distribution(ttfp),
        "resolved_by_budget": resolved_by_budget(ttfp, total),
        "time_breakdown_s": time_breakdown(results),
        "task_wall_s": distribution([float(r.get("wall_s", 0.0)) for r in results]),
        "last_failed_verifier": _count(r.get("last_failed_verifier") for r in results
                                       if r.get("status") == "unresolved"),
        "error_tasks": [{"task_id": r.get("task_id"), "reason": r.get("reason", "")}
                        for r in errors],
    }


def time_breakdown(results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Candidate-seconds summed over tasks: waiting for the first token, generating (from the
    first token), verifiers running, and queueing (the rest of t_verified - t_generated:
    waiting for a verification slot or for a duplicate's original, sandbox and workspace
    setup). Candidates overlap in time, so the sum exceeds the wall-clock time."""
    waiting = sum(float(r.get("first_token_s", 0.0)) for r in results)
    generation = sum(float(r.get("generation_s", 0.0)) for r in results)
    running = sum(float(r.get("verifier_run_s", 0.0)) for r in results)
    window = sum(float(r.get("verification_s", 0.0)) for r in results)
    return {
        "first_token": round(waiting, 3),
        "generation": round(generation, 3),
        "verification": round(running, 3),
        "queueing": round(max(0.0, window - running), 3),
    }


def _count(items: Iterable[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        key = str(item) if item is not None else "none"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
