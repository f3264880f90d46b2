"""Human reports: a self-contained HTML page (inline SVG charts, no script, no external file)
and a Markdown summary, for an evaluation directory or a single run directory.

Pure: dictionaries in, text out. The charts are agent/app/charts.py's (hand-drawn SVG, no
plotting library, the page opens offline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from textwrap import shorten
from typing import Any

from ooda.agent.app import modelstats
from ooda.agent.app.charts import (
    CSS,
    bar_chart,
    escape,
    fmt_num,
    fmt_pct,
    money,
    stacked_bar,
    step_chart,
    timeline,
)
from ooda.agent.core.records import AttemptRecord, RunSummary
from ooda.agent.support.reasons import failure_reason
from ooda.agent.support.textsafe import md_code, md_fence, printable

PROTOCOL_NOTES = {
    "blind": "protocol **blind**: the model never saw the hidden tests; they judged the one "
             "patch ooda submitted per task, after its loop. The resolved rate is comparable "
             "with SWE-bench leaderboards; oracle coverage and pass@k are not (they ask whether "
             "any sample would have passed).",
    "oracle": "protocol **oracle**: the loop verified candidates with the hidden tests and fed "
              "their failures back. The resolved rate is an oracle's coverage, not comparable "
              "with SWE-bench leaderboards (docs/SWEBENCH.md).",
}
"""What each protocol's numbers mean, said at the top of every evaluation report."""


NO_HIDDEN_NOTE = ("**no hidden tests**: every task of this set is judged by its own tests, the "
                  "same the loop verified with (as QuixBugs and HumanEvalFix define them). The "
                  "resolved rate is this task set's own measure, not a SWE-bench number.")


def protocol_note(summary: Mapping[str, Any]) -> str:
    """The report's sentence on its protocol (Markdown emphasis): what its numbers may be
    compared with. A set without hidden tests has no protocol to speak of."""
    if summary.get("hidden_test_tasks") == 0 and summary.get("finished"):
        return NO_HIDDEN_NOTE
    return PROTOCOL_NOTES.get(str(summary.get("protocol") or "oracle"), "")


def run_protocol(run: Mapping[str, Any]) -> str:
    """What a run's protocol meant for it, one sentence ("" for a task without hidden tests)."""
    if not run.get("hidden_tests"):
        return ""
    if run.get("protocol") != "blind":
        return ("Protocol oracle: the loop verified with the hidden tests and fed their "
                "failures back.")
    oracle = run.get("oracle") or {}
    why = (run.get("selection") or {}).get("why") or "nothing was submitted"
    verdict = "pass" if run.get("resolved") else "do not pass"
    return (f"Protocol blind: the loop never saw the hidden tests. Submitted {why}. The hidden "
            f"tests {verdict} it; {oracle.get('c', 0)} of the {oracle.get('n', 0)} candidates "
            "they judged after the loop would have passed (oracle coverage).")


def _cards(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    ttfp = summary.get("time_to_first_pass_s") or {}
    protocol = str(summary.get("protocol") or "oracle")
    cards = [
        (f"resolved ({protocol})", f"{summary.get('resolved', 0)}/{summary.get('total', 0)} "
                                   f"({fmt_pct(summary.get('resolved_rate'))})"),
        ("oracle coverage", f"{summary.get('oracle_coverage', summary.get('resolved', 0))}/"
                            f"{summary.get('total', 0)}"),
        ("unresolved", fmt_num(summary.get("unresolved", 0))),
        ("errors (infrastructure)", fmt_num(summary.get("errors", 0))),
        *([("submitted again (node lost)", fmt_num(summary["resubmitted"]))]
          if summary.get("resubmitted") else []),
        ("pass@1 (oracle coverage)", fmt_pct((summary.get("pass_at_k") or {}).get("1"))),
        ("median time to first pass", f"{fmt_num(ttfp.get('p50'))} s"),
        ("wall clock", f"{fmt_num(summary.get('wall_s'))} s"),
        ("tasks / min", fmt_num(summary.get("tasks_per_min"))),
        ("candidates per solve", fmt_num(summary.get("candidates_per_solve"))),
        ("tokens per solve", fmt_num(summary.get("tokens_per_solve"), 0)),
    ]
    if summary.get("cost") is not None:
        cards += [("cost", money(float(summary["cost"]))),
                  ("cost per solve", "–" if summary.get("cost_per_solve") is None
                   else money(float(summary["cost_per_solve"])))]
    return cards


BREAKDOWN = {"first_token": "waiting for the first token", "generation": "generation",
             "verification": "verifiers running", "queueing": "queueing & setup"}
"""Legend labels of the time breakdown."""
PHASE_LABELS = {"startup": "start-up", "task": "task and plan", "environment": "environment",
                "base_check": "base check", "generation": "generation",
                "verification": "verification", "selection": "the loop's own work",
                "writing": "writing and closing", "other": "not accounted for"}
"""Legend labels of the phases (agent/support/phases.py), in the order shown."""


def _phases(record: Mapping[str, Any]) -> dict[str, float]:
    """A summary's or run's phases in display order, the empty ones left out."""
    phases = record.get("phases") or {}
    return {k: float(phases[k]) for k in PHASE_LABELS if float(phases.get(k) or 0.0) > 0}


def _phases_md(record: Mapping[str, Any], end: Sequence[str] = ()) -> list[str]:
    """One bullet: where the wall time went (then `end`); nothing when no phases were kept."""
    phases = _phases(record)
    if not phases:
        return []
    return ["- **wall time**: " + ", ".join(f"{PHASE_LABELS[k]} {fmt_num(v)} s"
                                            for k, v in phases.items()), *end]


def _phases_html(record: Mapping[str, Any]) -> list[str]:
    phases = _phases(record)
    if not phases:
        return []
    return [_figure("Where the wall time went",
                    stacked_bar(phases, title="Where the wall time went", labels=PHASE_LABELS))
            + "<figcaption>The wall clock split by phase, adding up to the whole: each "
              "instant goes to one phase running then, what the rest waits for first (the "
              "base check, then the environment, verification, generation...).</figcaption>"
              "</figure>"]


def _figure(title: str, chart: str) -> str:
    """A figure's opening with its title shown above the chart (the chart's own <title> is
    only a tooltip); the caller adds the caption and closes it."""
    return f"<figure><h3>{escape(title)}</h3>{chart}"


TASK_COLUMNS = ("task", "status", "attempts", "rounds", "candidates verified / passing",
                "first pass (s)", "tokens", "last failed", "wall (s)")


def _task_row(r: Mapping[str, Any]) -> list[str]:
    tokens = r.get("tokens") or {}
    return [
        str(r.get("task_id")), str(r.get("status")), fmt_num(r.get("attempts")),
        fmt_num(r.get("rounds")), f"{r.get('n', 0)}/{r.get('c', 0)}",
        fmt_num(r.get("time_to_first_pass_s")),
        fmt_num(int(tokens.get("prompt", 0)) + int(tokens.get("completion", 0))),
        # a resolved task's earlier failures are no longer what went wrong
        "–" if r.get("status") == "resolved" else str(r.get("last_failed_verifier") or "–"),
        fmt_num(r.get("wall_s")),
    ]


def eval_html(summary: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> str:
    """The evaluation report as one self-contained HTML page."""
    title = f"ooda eval {summary.get('eval_id') or ''}".strip()
    total = int(summary.get("total") or 0)
    budget = summary.get("time_budget_s")
    curve = summary.get("resolved_by_budget") or []
    pass_k = sorted(((k, float(v)) for k, v in (summary.get("pass_at_k") or {}).items()),
                    key=lambda kv: int(kv[0]))
    status = "complete" if summary.get("complete") else (
        f"incomplete: {summary.get('finished', 0)} of {total} tasks finished")
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>Task set <code>{escape(summary.get('taskset'))}</code> · model "
        f"<code>{escape(summary.get('model'))}</code> · {summary.get('samples')} samples × "
        f"{summary.get('rounds')} rounds · budget {fmt_num(budget)} s per task · "
        f"concurrency {summary.get('concurrency')} · {escape(status)}</p>",
        f'<p class="flag">{escape(protocol_note(summary)).replace("**", "")}</p>',
        '<div class="cards">',
        *[f'<div class="card"><b>{escape(v)}</b>{escape(k)}</div>' for k, v in _cards(summary)],
        "</div>",
        *modelstats.html(summary, escape),
    ]
    gold = summary.get("gold_failures")
    if gold:
        out.append('<div class="flag"><b>Gold patch failures</b> (the harness or these tasks '
                   "are broken; they were not retried):<ul>")
        out += [f"<li><code>{escape(g['task_id'])}</code> {escape(g['status'])}: {escape(g['reason'])}</li>"
                for g in gold]
        out.append("</ul></div>")
    out += [
        "<h2>Charts</h2>", '<div class="charts">',
        _figure("Resolved rate against wall-clock budget",
                step_chart(curve, title="Resolved rate against wall-clock budget",
                           x_label="budget per task (s)", y_label="tasks resolved"))
        + f"<figcaption>Fraction of all {total} tasks whose first passing candidate came "
          "within t seconds: the resolved rate a budget of t would have given (the run's "
          f"budget was {fmt_num(budget)} s); the same curve is the time to solve, as a share "
          "of all tasks.</figcaption></figure>",
        _figure("pass@k (oracle coverage)",
                bar_chart([(f"k={k}", v) for k, v in pass_k], title="pass@k (oracle coverage)",
                          x_label="k candidates", y_label="pass@k"))
        + "<figcaption>Unbiased pass@k (Chen et al. 2021) from the candidates the hidden tests "
          "judged per task, averaged over tasks: the chance that k samples hold a passing "
          "patch (coverage), not what ooda submits; k goes up to the samples and to the most "
          "candidates judged for one task.</figcaption></figure>",
        *_phases_html(summary),
        _figure("Where the candidates' time went",
                stacked_bar(summary.get("time_breakdown_s") or {},
                            title="Where the candidates' time went", labels=BREAKDOWN))
        + "<figcaption>Candidate-seconds: generating (t_generated - t_start), then verifying "
          "(t_verified - t_generated), split into the verifiers running and the rest: "
          "queueing for a verification slot or a duplicate's verdict, sandbox and workspace "
          "setup, baselines. Candidates overlap, so the sum exceeds the wall clock."
          "</figcaption></figure>",
        "</div>",
    ]
    out += ["<h2>pass@k (oracle coverage)</h2><table><tr><th>k</th><th>pass@k</th></tr>",
            *[f'<tr><td>{escape(k)}</td><td class="num">{fmt_pct(v)}</td></tr>' for k, v in pass_k],
            "</table>"]
    failed = summary.get("last_failed_verifier") or {}
    if failed:
        out += ["<h2>Unresolved tasks: where the last candidate failed</h2><table>",
                "<tr><th>stage</th><th>tasks</th></tr>",
                *[f'<tr><td>{escape(k)}</td><td class="num">{v}</td></tr>' for k, v in failed.items()],
                "</table>"]
    out += _failures_table(results)
    for title, column, rows in _answer_tables(summary):
        out += [f"<h2>{escape(title)}</h2><table>",
                f"<tr><th>{escape(column)}</th><th>answers</th></tr>",
                *[f'<tr><td>{escape(k)}</td><td class="num">{v}</td></tr>' for k, v in rows],
                "</table>"]
    out += ["<h2>Tasks</h2><table><tr>", *[f"<th>{escape(c)}</th>" for c in TASK_COLUMNS], "</tr>"]
    for r in results:
        cells = _task_row(r)
        run_dir = r.get("run_dir")
        name = (f'<a href="{escape(run_dir)}/">{escape(cells[0])}</a>' if run_dir
                else escape(cells[0]))  # the run directory: run.json, attempts/, final.diff
        out.append(
            f"<tr><td>{name}</td><td class=\"{escape(cells[1])}\" title=\"{escape(r.get('reason', ''))}\">"
            f"{escape(cells[1])}</td>"
            + "".join(f'<td class="num">{escape(c)}</td>' for c in cells[2:7])
            + f"<td>{escape(cells[7])}</td><td class=\"num\">{escape(cells[8])}</td></tr>"
        )
    out += ["</table>", "</body></html>", ""]
    return "\n".join(out)


def _failures_table(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """One row per unresolved task and error: the stage and the reason (which names the
    failing test and its assertion)."""
    rows = [r for r in results if r.get("status") in ("unresolved", "error")]
    if not rows:
        return []
    return ["<h2>Why tasks were not resolved</h2><table>",
            "<tr><th>task</th><th>status</th><th>stage</th><th>reason</th></tr>",
            *[f"<tr><td>{escape(r.get('task_id'))}</td><td class=\"{escape(r.get('status'))}\">"
              f"{escape(r.get('status'))}</td><td>{escape(r.get('last_failed_verifier') or '–')}"
              f"</td><td>{escape(failure_reason(r))}</td></tr>" for r in rows],
            "</table>"]


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    return ["| " + " | ".join(cell(h) for h in header) + " |",
            "|" + "|".join("---" for _ in header) + "|",
            *["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]]


def eval_markdown(summary: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> str:
    """The evaluation report in Markdown: headline figures, pass@k and a table of tasks."""
    lines = [f"# ooda eval {summary.get('eval_id') or ''}".rstrip(), ""]
    lines.append(f"Task set `{summary.get('taskset')}`, model `{summary.get('model')}`, "
                 f"{summary.get('samples')} samples x {summary.get('rounds')} rounds, budget "
                 f"{fmt_num(summary.get('time_budget_s'))} s per task"
                 + ("" if summary.get("complete") else
                    f" — incomplete: {summary.get('finished', 0)} of "
                    f"{summary.get('total', 0)} tasks finished") + ".")
    lines += ["", protocol_note(summary), ""]
    lines += [f"- **{k}**: {v}" for k, v in _cards(summary)]
    lines += ["", *modelstats.markdown(summary)] if summary.get("models") else []
    breakdown = summary.get("time_breakdown_s") or {}
    if breakdown:
        lines.append("- **candidate time**: " + ", ".join(
            f"{BREAKDOWN.get(k, k)} {fmt_num(v)} s" for k, v in breakdown.items()))
    lines += _phases_md(summary)
    lines.append("")
    gold = summary.get("gold_failures")
    if gold:
        lines += ["## Gold patch failures", ""]
        lines += [f"- {md_code(str(g['task_id']))} {g['status']}: {md_code(str(g['reason']), 300)}"
                  for g in gold]
        lines.append("")
    pass_k = sorted((summary.get("pass_at_k") or {}).items(), key=lambda kv: int(kv[0]))
    lines += ["## pass@k (oracle coverage)", "",
              *_md_table(["k", "pass@k"], [[k, fmt_pct(v)] for k, v in pass_k]),
              ""]
    for title, column, rows in _answer_tables(summary):
        lines += [f"## {title}", "",
                  *_md_table([column, "answers"], [[k, str(v)] for k, v in rows]), ""]
    lines += ["## Tasks", "", *_md_table(TASK_COLUMNS, [_task_row(r) for r in results]), ""]
    return printable("\n".join(lines))


def _answer_tables(summary: Mapping[str, Any]) -> list[tuple[str, str, list[tuple[str, int]]]]:
    """How the model wrote its answers, as (title, first column, rows): the answers by the
    edit format they were read in ("invalid" for those that did not apply), then the invalid
    ones by reason; two tables, so that a format and a reason are never rows of one."""
    formats = [(str(k), int(v)) for k, v in (summary.get("edit_formats") or {}).items()]
    reasons = [(str(k), int(v)) for k, v in (summary.get("invalid_reasons") or {}).items()]
    tables = [("Answers by edit format", "edit format", formats),
              ("Invalid answers by reason", "reason", reasons)]
    return [table for table in tables if table[2]]


def run_html(run: RunSummary, attempts: Sequence[AttemptRecord], patch: str) -> str:
    """A short report of one run: its verdict, a timeline of the attempts, the attempts."""
    title = f"ooda run {run.run_id}".strip()
    status = run.status
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p>Task <code>{escape(run.task_id)}</code> · <b class="{escape(status)}">'
        f"{escape(status.upper())}</b> ({escape(run.reason)}) · model "
        f"<code>{escape(run.model)}</code> · {fmt_num(run.attempts)} attempts, "
        f"{fmt_num(run.rounds_used)} round(s) · {_wall(run)} · tokens "
        f"{fmt_num(run.tokens.prompt)} + "
        f"{fmt_num(run.tokens.completion)}</p>",
        *([f"<p>{escape(run_protocol(run.to_json()))}</p>"]
          if run_protocol(run.to_json()) else []),
        *modelstats.html(run.to_json(), escape),
        *_phases_html(run.to_json()),
        "<h2>Timeline</h2>", timeline(attempts, title="Attempts over time"),
        "<h2>Attempts</h2><table><tr>",
        *[f"<th>{escape(c)}</th>" for c in RUN_COLUMNS], "</tr>",
    ]
    for a in attempts:
        cells = _attempt_row(a)
        out.append(f"<tr><td>{escape(cells[0])}</td><td class=\"{escape(cells[1])}\">{escape(cells[1])}</td>"
                   + "".join(f'<td class="num">{escape(c)}</td>' for c in cells[2:6])
                   + f"<td>{escape(cells[6])}</td></tr>")
    out.append("</table>")
    if patch:
        out += ["<h2>Winning patch</h2>", f"<pre>{escape(patch)}</pre>"]
    out += ["</body></html>", ""]
    return "\n".join(out)


RUN_COLUMNS = ("attempt", "status", "round", "generated (s)", "verified (s)", "tokens", "reason")


def _wall(run: RunSummary) -> str:
    """The run's time: its loop against the budget, and the whole command's when start-up,
    the environment and the base check made it longer (its phases add up to it)."""
    loop = f"{fmt_num(run.wall_s)} s of the {fmt_num(run.budget_s)} s budget"
    whole = sum(float(v) for v in (run.to_json().get("phases") or {}).values())
    return f"{loop} ({fmt_num(whole)} s in all)" if whole > run.wall_s + 0.5 else loop


def _attempt_row(a: AttemptRecord) -> list[str]:
    reason = a.reason.splitlines()
    return [a.attempt_id, a.status, fmt_num(a.round),
            fmt_num(a.t_generated_s, 2), fmt_num(a.t_verified_s, 2),
            fmt_num(a.prompt_tokens + a.completion_tokens),
            shorten(reason[0] if reason else "", 160, placeholder=" ...")]


def run_markdown(run: RunSummary, attempts: Sequence[AttemptRecord], patch: str) -> str:
    """A short Markdown report of one run."""
    lines = [
        f"# ooda run {run.run_id}".rstrip(), "",
        f"Task `{run.task_id}`: **{run.status.upper()}** "
        f"({run.reason}), model `{run.model}`, "
        f"{fmt_num(run.attempts)} attempts, {fmt_num(run.rounds_used)} round(s), "
        f"{_wall(run)}, tokens "
        f"{fmt_num(run.tokens.prompt)} + {fmt_num(run.tokens.completion)}.", "",
        *_phases_md(run.to_json(), end=[""]),
        *([run_protocol(run.to_json()), ""] if run_protocol(run.to_json()) else []),
        *modelstats.markdown(run.to_json()),
        "## Attempts", "",
        # the reason is candidate text: an inert code span in Markdown
        *_md_table(RUN_COLUMNS, [[*row[:-1], md_code(row[-1])]
                                 for row in map(_attempt_row, attempts)]), "",
    ]
    if patch:
        fence = md_fence(patch)  # no line of the patch can close the block
        lines += ["## Winning patch", "", f"{fence}diff", patch.rstrip(), fence, ""]
    return printable("\n".join(lines))

