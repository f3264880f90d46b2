"""`ooda eval --compare`: fast-only, strong-only and the cascade (fast escalating to strong) on
one task set, as three evaluations side by side and one report, compare.md / compare.json.

Each variant is an ordinary evaluation (its own directory, resumable); this module only
derives the variants' options from the cascade's and puts their summaries in one table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ooda.agent.app import modelstats
from ooda.agent.app.evaluate.options import EvalOptions, default_eval_id
from ooda.agent.app.evaluate.run import EvalOutcome
from ooda.agent.contracts.errors import UsageError
from ooda.agent.core.runlog import write_atomic, write_json_atomic

VARIANTS = ("fast-only", "strong-only", "cascade")


def variants(options: EvalOptions) -> dict[str, EvalOptions]:
    """The three evaluations compared, from the cascade's options (which must escalate)."""
    options = options.checked()  # splits --model FAST,STRONG
    run = options.run
    strong = run.escalation_model()
    if strong is None:
        raise UsageError("--compare needs a model to escalate to (--escalate-to or --model A,B)")
    base_id = options.eval_id or default_eval_id(options)
    alone = replace(run.escalation, escalate_to=None)
    return {
        "fast-only": replace(options, run=replace(run, escalation=alone),
                             eval_id=f"{base_id}-fast-only"),
        "strong-only": replace(options, run=replace(run, model=strong, escalation=alone),
                               eval_id=f"{base_id}-strong-only"),
        "cascade": replace(options, eval_id=f"{base_id}-cascade"),
    }


def compare(
    options: EvalOptions, evaluate: Callable[[EvalOptions], EvalOutcome]
) -> tuple[dict[str, Any], Path]:
    """Run the three variants with `evaluate` and write compare.md and compare.json beside
    their directories; returns (the comparison, the path of compare.md)."""
    outcomes = {label: evaluate(opts) for label, opts in variants(options).items()}
    table = {label: figures(o.summary, o.eval_dir) for label, o in outcomes.items()}
    where = options.run.runs_dir / f"{outcomes['cascade'].eval_dir.name}-compare.md"
    write_json_atomic(where.with_suffix(".json"), table)
    write_atomic(where, markdown(table))
    return table, where


def figures(summary: Mapping[str, Any], eval_dir: Path) -> dict[str, Any]:
    """One variant's row: solved, rate, cost, time, per-model solved and cost."""
    models = summary.get("models") or {}
    cost = (
        sum(float(m.get("cost_usd") or 0) for m in models.values())
        if models else summary.get("cost")
    )
    return {
        "dir": str(eval_dir),
        "resolved": summary.get("resolved"),
        "total": summary.get("total"),
        "resolved_rate": summary.get("resolved_rate"),
        "cost_usd": cost,
        "wall_s": summary.get("wall_s"),
        "tokens": summary.get("tokens"),
        "models": models,
    }


def markdown(table: Mapping[str, Mapping[str, Any]]) -> str:
    """The comparison as Markdown: one row per variant, then the cascade's per-model line."""
    lines = [
        "# Fast-only vs strong-only vs cascade", "",
        "| variant | solved | rate | cost ($) | wall (s) |", "|---|---|---|---|---|",
    ]  # fmt: skip
    for label, row in table.items():
        cost = row.get("cost_usd")
        lines.append(
            f"| {label} | {row.get('resolved')}/{row.get('total')} | "
            f"{100 * float(row.get('resolved_rate') or 0):.1f}% | "
            f"{'–' if cost is None else f'{float(cost):.4f}'} | {row.get('wall_s')} |"
        )
    cascade = table.get("cascade", {}).get("models") or {}
    strong = table.get("strong-only", {}).get("cost_usd")
    if cascade:
        line = modelstats.headline(cascade)
        if strong is not None:
            line += f" vs {float(strong):.4f} $ for strong alone"
        lines += ["", f"Cascade: {line}."]
    return "\n".join([*lines, ""])
