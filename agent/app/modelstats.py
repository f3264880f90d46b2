"""Per-model figures of a run or an evaluation with escalation (agent/core/schedule.py): who
solved what, at what cost, and the lines and tables the reports show.

A run's run.json holds `models` (name -> attempts, tokens, cost_usd, generation_s, role,
solved) and `winner_model`; an evaluation sums them over its tasks. Pure: dictionaries in,
dictionaries and text out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

FIELDS = ("attempts", "prompt_tokens", "completion_tokens", "cost_usd", "generation_s")


def totals(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The `models` of many runs (results.jsonl records or run.json files) summed per model,
    with `solved`: how many tasks that model's candidate won."""
    out: dict[str, dict[str, Any]] = {}
    for record in results:
        for name, entry in (record.get("models") or {}).items():
            into = out.setdefault(
                name, {"role": entry.get("role", "fast"), "solved": 0, **{f: 0 for f in FIELDS}}
            )
            for field in FIELDS:
                into[field] += entry.get(field) or 0
        winner = record.get("winner_model")
        if winner in out:
            out[winner]["solved"] += 1
    for entry in out.values():
        entry["cost_usd"] = round(entry["cost_usd"], 6)
        entry["generation_s"] = round(entry["generation_s"], 3)
    return out


def headline(models: Mapping[str, Mapping[str, Any]]) -> str:
    """"solved by fast: 41, by strong: 9; cost 0.31 $ (fast 0.05 $, strong 0.26 $)", or ""
    for a run of one model."""
    if len(models) < 2:
        return ""
    solved = ", by ".join(f"{name}: {int(_solved(m))}" for name, m in models.items())
    total = sum(float(m.get("cost_usd") or 0) for m in models.values())
    each = ", ".join(f"{name} {float(m.get('cost_usd') or 0):.4f} $" for name, m in models.items())
    return f"solved by {solved}; cost {total:.4f} $ ({each})"


def _solved(entry: Mapping[str, Any]) -> int:
    """Tasks solved (an evaluation's count; a run's true/false counts as 1/0)."""
    return int(entry.get("solved") or 0)


COLUMNS = ("model", "role", "solved", "attempts", "tokens", "cost ($)", "generation (s)")


def rows(models: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """The per-model table of the reports."""
    return [
        [
            name,
            str(m.get("role", "")),
            str(_solved(m)),
            str(m.get("attempts", 0)),
            f"{int(m.get('prompt_tokens') or 0)} + {int(m.get('completion_tokens') or 0)}",
            f"{float(m.get('cost_usd') or 0):.4f}",
            f"{float(m.get('generation_s') or 0):.1f}",
        ]
        for name, m in models.items()
    ]


def escalation_line(run: Mapping[str, Any]) -> str:
    """"escalated to strong at round 3 (2 round(s) of fast without a pass)", or ""."""
    at = run.get("escalated_at_round")
    if at is None:
        return ""
    return f"escalated to {run.get('escalate_to')} at round {at} ({run.get('escalation_reason')})"


def markdown(run_or_summary: Mapping[str, Any]) -> list[str]:
    """The "## Models" section of a Markdown report ([] for a run of one model)."""
    models = run_or_summary.get("models") or {}
    if len(models) < 2:
        return []
    lines = ["## Models", "", headline(models) + ".", ""]
    escalated = escalation_line(run_or_summary)
    if escalated:
        lines += [escalated[0].upper() + escalated[1:] + ".", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    lines += ["| " + " | ".join(row) + " |" for row in rows(models)]
    return [*lines, ""]


def html(run_or_summary: Mapping[str, Any], escape: Any) -> list[str]:
    """The same section as HTML (`escape`: the report's escaping function)."""
    models = run_or_summary.get("models") or {}
    if len(models) < 2:
        return []
    out = ["<h2>Models</h2>", f"<p>{escape(headline(models))}</p>"]
    escalated = escalation_line(run_or_summary)
    if escalated:
        out.append(f"<p>{escape(escalated)}</p>")
    out.append("<table><tr>" + "".join(f"<th>{escape(c)}</th>" for c in COLUMNS) + "</tr>")
    for row in rows(models):
        out.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
    return [*out, "</table>"]
