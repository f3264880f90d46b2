"""Human reports: a self-contained HTML page (inline SVG charts, no script, no external file)
and a Markdown summary, for an evaluation directory or a single run directory.

Pure: dictionaries in, text out. The charts are drawn by hand in SVG (a step line, bars, one
stacked bar, a timeline) so that no plotting library is needed and the page opens offline.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ooda.agent.support.textsafe import printable

COLORS = {
    "resolved": "#2e7d32", "passed": "#2e7d32", "unresolved": "#c62828", "failed": "#c62828",
    "error": "#ef6c00", "invalid_edit": "#8e24aa", "timeout": "#6d4c41", "cancelled": "#9e9e9e",
    "generation": "#1565c0", "verification": "#f9a825", "queueing": "#9e9e9e",
    "line": "#1565c0", "grid": "#e0e0e0", "axis": "#616161",
}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#212121;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em}th,td{padding:.25em .6em;text-align:left;
border-bottom:1px solid #e0e0e0}th{background:#fafafa}td.num{text-align:right;
font-variant-numeric:tabular-nums}
.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{border:1px solid #e0e0e0;border-radius:6px;
padding:.6em 1em;min-width:9em}.card b{display:block;font-size:1.4em}
.charts{display:flex;flex-wrap:wrap;gap:1.5em}.charts figure{margin:0}
figcaption{font-size:.85em;color:#616161;max-width:460px}
.resolved,.passed{color:#2e7d32}.unresolved,.failed{color:#c62828}.error{color:#ef6c00}
.flag{background:#fff3e0;border:1px solid #ef6c00;padding:.6em 1em;border-radius:6px}
pre{background:#f5f5f5;padding:.8em;overflow-x:auto;font-size:.85em}
"""


# --------------------------------------------------------------------------- formatting


def fmt_num(value: object, digits: int = 1) -> str:
    """A number for a table cell ("–" for None)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def fmt_pct(value: object) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, int | float) else "–"


def _e(value: object) -> str:
    """HTML-escaped, control characters made visible (agent/support/textsafe.py)."""
    return html.escape(printable(str(value)), quote=True)


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `top` (about `count` of them)."""
    if not top > 0 or math.isinf(top):
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-12:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _tick_label(value: float, percent: bool = False) -> str:
    if percent:
        return f"{100 * value:.0f}%"
    return f"{value:g}" if abs(value) < 1e4 else f"{value:.2g}"


# --------------------------------------------------------------------------- charts

W, H = 460, 260
ML, MR, MT, MB = 52, 16, 14, 42


def _axes(x_ticks: Sequence[float], y_ticks: Sequence[float], x_label: str, y_label: str,
          y_percent: bool, x_of: Any, y_of: Any) -> list[str]:
    parts = []
    for y in y_ticks:
        py = y_of(y)
        parts.append(f'<line x1="{ML}" y1="{py:.1f}" x2="{W - MR}" y2="{py:.1f}" '
                     f'stroke="{COLORS["grid"]}"/>')
        parts.append(f'<text x="{ML - 6}" y="{py + 4:.1f}" text-anchor="end" font-size="11">'
                     f"{_tick_label(y, y_percent)}</text>")
    for x in x_ticks:
        px = x_of(x)
        parts.append(f'<line x1="{px:.1f}" y1="{H - MB}" x2="{px:.1f}" y2="{H - MB + 4}" '
                     f'stroke="{COLORS["axis"]}"/>')
        parts.append(f'<text x="{px:.1f}" y="{H - MB + 16}" text-anchor="middle" '
                     f'font-size="11">{_tick_label(x)}</text>')
    parts.append(f'<line x1="{ML}" y1="{H - MB}" x2="{W - MR}" y2="{H - MB}" '
                 f'stroke="{COLORS["axis"]}"/>')
    parts.append(f'<line x1="{ML}" y1="{MT}" x2="{ML}" y2="{H - MB}" stroke="{COLORS["axis"]}"/>')
    parts.append(f'<text x="{(ML + W - MR) / 2:.1f}" y="{H - 6}" text-anchor="middle" '
                 f'font-size="12">{_e(x_label)}</text>')
    parts.append(f'<text transform="translate(13,{(MT + H - MB) / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle" font-size="12">{_e(y_label)}</text>')
    return parts


def _svg(parts: Sequence[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" role="img" aria-label="{_e(title)}">'
            f"<title>{_e(title)}</title>{''.join(parts)}</svg>")


def step_chart(points: Sequence[Sequence[float]], *, title: str, x_label: str, y_label: str,
               y_max: float = 1.0, x_max: float | None = None, y_percent: bool = True) -> str:
    """A rising step line through (x, y) points, e.g. resolved rate against the budget."""
    xs = [float(p[0]) for p in points]
    top_x = max(x_max or 0.0, max(xs, default=0.0), 1e-9)
    x_ticks = nice_ticks(top_x)
    y_ticks = nice_ticks(y_max)
    x_hi, y_hi = x_ticks[-1], y_ticks[-1]

    def x_of(x: float) -> float:
        return ML + (W - ML - MR) * x / x_hi

    def y_of(y: float) -> float:
        return H - MB - (H - MT - MB) * y / y_hi

    parts = _axes(x_ticks, y_ticks, x_label, y_label, y_percent, x_of, y_of)
    if points:
        path = [f"M{x_of(0):.1f},{y_of(0):.1f}"]
        last_y = 0.0
        for x, y in points:
            path.append(f"L{x_of(float(x)):.1f},{y_of(last_y):.1f}")
            path.append(f"L{x_of(float(x)):.1f},{y_of(float(y)):.1f}")
            last_y = float(y)
        path.append(f"L{x_of(x_hi):.1f},{y_of(last_y):.1f}")
        parts.append(f'<path d="{" ".join(path)}" fill="none" stroke="{COLORS["line"]}" '
                     'stroke-width="2"/>')
    else:
        parts.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" font-size="12" '
                     'fill="#9e9e9e">no solved task yet</text>')
    return _svg(parts, title)


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, x_label: str, y_label: str,
              y_max: float = 1.0, y_percent: bool = True) -> str:
    """Vertical bars with their values on top, e.g. pass@k for each k."""
    y_ticks = nice_ticks(max([y_max, *[v for _, v in items]]))
    y_hi = y_ticks[-1]
    slot = (W - ML - MR) / max(1, len(items))

    def y_of(y: float) -> float:
        return H - MB - (H - MT - MB) * y / y_hi

    parts = _axes([], y_ticks, x_label, y_label, y_percent, lambda x: 0.0, y_of)
    bar = min(slot * 0.6, 56.0)
    for i, (label, value) in enumerate(items):
        mid = ML + slot * (i + 0.5)
        top = y_of(value)
        parts.append(f'<rect x="{mid - bar / 2:.1f}" y="{top:.1f}" width="{bar:.1f}" '
                     f'height="{H - MB - top:.1f}" fill="{COLORS["line"]}"/>')
        shown = fmt_pct(value) if y_percent else fmt_num(value)
        parts.append(f'<text x="{mid:.1f}" y="{top - 4:.1f}" text-anchor="middle" '
                     f'font-size="11">{shown}</text>')
        parts.append(f'<text x="{mid:.1f}" y="{H - MB + 16}" text-anchor="middle" '
                     f'font-size="11">{_e(label)}</text>')
    return _svg(parts, title)


def stacked_bar(parts_in: Mapping[str, float], *, title: str, unit: str = "s",
                labels: Mapping[str, str] | None = None) -> str:
    """One horizontal bar split into named parts, with a legend (e.g. where time went)."""
    labels = labels or {}
    total = sum(max(0.0, v) for v in parts_in.values())
    parts: list[str] = []
    x, y, width, height = float(ML), 40, W - ML - MR, 36
    if total <= 0:
        parts.append(f'<text x="{W / 2}" y="{y + 24}" text-anchor="middle" font-size="12" '
                     'fill="#9e9e9e">no time recorded</text>')
    for name, value in parts_in.items():
        share = max(0.0, value) / total if total > 0 else 0.0
        w = width * share
        if w > 0:
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{height}" '
                         f'fill="{COLORS.get(name, "#757575")}"><title>{_e(name)}: '
                         f"{value:.1f} {unit}</title></rect>")
        x += w
    for i, (name, value) in enumerate(parts_in.items()):
        ly = y + height + 30 + 22 * i
        share = max(0.0, value) / total if total > 0 else 0.0
        parts.append(f'<rect x="{ML}" y="{ly - 11}" width="12" height="12" '
                     f'fill="{COLORS.get(name, "#757575")}"/>')
        parts.append(f'<text x="{ML + 18}" y="{ly}" font-size="12">'
                     f"{_e(labels.get(name, name))}: {value:,.1f} {unit} "
                     f"({100 * share:.0f}%)</text>")
    height = y + height + 30 + 22 * len(parts_in)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
            f'viewBox="0 0 {W} {height}" role="img" aria-label="{_e(title)}">'
            f"<title>{_e(title)}</title>{''.join(parts)}</svg>")


def timeline(attempts: Sequence[Mapping[str, Any]], *, title: str) -> str:
    """One row per attempt: generating (blue) then verifying, colored by its status."""
    rows = [a for a in attempts if isinstance(a.get("t_start_s"), int | float)]
    top = max([float(a.get("t_verified_s") or a.get("t_generated_s") or a["t_start_s"])
               for a in rows] + [1e-9])
    x_ticks = nice_ticks(top)
    x_hi = x_ticks[-1]
    row_h = 20.0
    height = MT + MB + row_h * max(1, len(rows))

    def x_of(x: float) -> float:
        return ML + (W - ML - MR) * x / x_hi

    parts: list[str] = []
    for x in x_ticks:
        parts.append(f'<line x1="{x_of(x):.1f}" y1="{MT}" x2="{x_of(x):.1f}" '
                     f'y2="{height - MB}" stroke="{COLORS["grid"]}"/>')
        parts.append(f'<text x="{x_of(x):.1f}" y="{height - MB + 16}" text-anchor="middle" '
                     f'font-size="11">{_tick_label(x)}</text>')
    for i, a in enumerate(rows):
        y = MT + row_h * i + row_h * 0.15
        h = row_h * 0.7
        start = float(a["t_start_s"])
        generated = a.get("t_generated_s")
        verified = a.get("t_verified_s")
        gen_end = float(generated) if isinstance(generated, int | float) else start
        end = float(verified) if isinstance(verified, int | float) else gen_end
        color = COLORS.get(str(a.get("status")), "#757575")
        label = f"{a.get('attempt_id')} {a.get('status')}"
        parts.append(f'<rect x="{x_of(start):.1f}" y="{y:.1f}" '
                     f'width="{max(1.0, x_of(gen_end) - x_of(start)):.1f}" height="{h:.1f}" '
                     f'fill="{COLORS["generation"]}"><title>{_e(label)} generating</title></rect>')
        parts.append(f'<rect x="{x_of(gen_end):.1f}" y="{y:.1f}" '
                     f'width="{max(1.0, x_of(end) - x_of(gen_end)):.1f}" height="{h:.1f}" '
                     f'fill="{color}"><title>{_e(label)} verifying</title></rect>')
        parts.append(f'<text x="{ML - 4}" y="{y + h * 0.8:.1f}" text-anchor="end" '
                     f'font-size="10">{_e(a.get("attempt_id"))}</text>')
    parts.append(f'<text x="{(ML + W - MR) / 2:.1f}" y="{height - 6}" text-anchor="middle" '
                 'font-size="12">seconds since the run began</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height:.0f}" '
            f'viewBox="0 0 {W} {height:.0f}" role="img" aria-label="{_e(title)}">'
            f"<title>{_e(title)}</title>{''.join(parts)}</svg>")


# --------------------------------------------------------------------------- evaluation


def _cards(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    ttfp = summary.get("time_to_first_pass_s") or {}
    cards = [
        ("resolved", f"{summary.get('resolved', 0)}/{summary.get('total', 0)} "
                     f"({fmt_pct(summary.get('resolved_rate'))})"),
        ("unresolved", fmt_num(summary.get("unresolved", 0))),
        ("errors (infrastructure)", fmt_num(summary.get("errors", 0))),
        ("pass@1", fmt_pct((summary.get("pass_at_k") or {}).get("1"))),
        ("median time to first pass", f"{fmt_num(ttfp.get('p50'))} s"),
        ("wall clock", f"{fmt_num(summary.get('wall_s'))} s"),
        ("tasks / min", fmt_num(summary.get("tasks_per_min"))),
        ("candidates per solve", fmt_num(summary.get("candidates_per_solve"))),
        ("tokens per solve", fmt_num(summary.get("tokens_per_solve"), 0)),
    ]
    if summary.get("cost") is not None:
        cards += [("cost", f"${summary['cost']:.4f}"),
                  ("cost per solve", "–" if summary.get("cost_per_solve") is None
                   else f"${summary['cost_per_solve']:.4f}")]
    return cards


BREAKDOWN = {"generation": "generation", "verification": "verifiers running",
             "queueing": "queueing & setup"}
"""Legend labels of the time breakdown."""

TASK_COLUMNS = ("task", "status", "attempts", "rounds", "n/c", "first pass (s)", "tokens",
                "last failed", "wall (s)")


def _task_row(r: Mapping[str, Any]) -> list[str]:
    tokens = r.get("tokens") or {}
    return [
        str(r.get("task_id")), str(r.get("status")), fmt_num(r.get("attempts")),
        fmt_num(r.get("rounds")), f"{r.get('n', 0)}/{r.get('c', 0)}",
        fmt_num(r.get("time_to_first_pass_s")),
        fmt_num(int(tokens.get("prompt", 0)) + int(tokens.get("completion", 0))),
        str(r.get("last_failed_verifier") or "–"), fmt_num(r.get("wall_s")),
    ]


def eval_html(summary: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> str:
    """The evaluation report as one self-contained HTML page."""
    title = f"ooda eval {summary.get('eval_id') or ''}".strip()
    total = int(summary.get("total") or 0)
    budget = summary.get("time_budget_s")
    curve = summary.get("resolved_by_budget") or []
    solved_times = [float(p[0]) for p in curve[1:]]
    cdf = [(t, (i + 1) / len(solved_times)) for i, t in enumerate(solved_times)]
    pass_k = sorted(((k, float(v)) for k, v in (summary.get("pass_at_k") or {}).items()),
                    key=lambda kv: int(kv[0]))
    status = "complete" if summary.get("complete") else (
        f"incomplete: {summary.get('finished', 0)} of {total} tasks finished")
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>Task set <code>{_e(summary.get('taskset'))}</code> · model "
        f"<code>{_e(summary.get('model'))}</code> · {summary.get('samples')} samples × "
        f"{summary.get('rounds')} rounds · budget {fmt_num(budget)} s per task · "
        f"concurrency {summary.get('concurrency')} · {_e(status)}</p>",
        '<div class="cards">',
        *[f'<div class="card"><b>{_e(v)}</b>{_e(k)}</div>' for k, v in _cards(summary)],
        "</div>",
    ]
    gold = summary.get("gold_failures")
    if gold:
        out.append('<div class="flag"><b>Gold patch failures</b> (the harness or these tasks '
                   "are broken; they were not retried):<ul>")
        out += [f"<li><code>{_e(g['task_id'])}</code> {_e(g['status'])}: {_e(g['reason'])}</li>"
                for g in gold]
        out.append("</ul></div>")
    out += [
        "<h2>Charts</h2>", '<div class="charts">',
        "<figure>" + step_chart(curve, title="Resolved rate against wall-clock budget",
                                x_label="budget per task (s)", y_label="tasks resolved")
        + f"<figcaption>Fraction of all {total} tasks whose first passing candidate came "
          "within t seconds: the resolved rate a budget of t would have given (the run's "
          f"budget was {fmt_num(budget)} s).</figcaption></figure>",
        "<figure>" + bar_chart([(f"k={k}", v) for k, v in pass_k], title="pass@k",
                               x_label="k candidates", y_label="pass@k")
        + "<figcaption>Unbiased pass@k (Chen et al. 2021) from the candidates verified per "
          "task, averaged over tasks.</figcaption></figure>",
        "<figure>" + step_chart(cdf, title="Time to solve (CDF of solved tasks)",
                                x_label="seconds to first pass", y_label="solved tasks")
        + "<figcaption>Among solved tasks, the share solved within t seconds.</figcaption>"
          "</figure>",
        "<figure>" + stacked_bar(summary.get("time_breakdown_s") or {},
                                 title="Where the candidates' time went", labels=BREAKDOWN)
        + "<figcaption>Candidate-seconds: generating (t_generated - t_start), then verifying "
          "(t_verified - t_generated), split into the verifiers running and the rest: "
          "queueing for a verification slot or a duplicate's verdict, sandbox and workspace "
          "setup, baselines. Candidates overlap, so the sum exceeds the wall clock."
          "</figcaption></figure>",
        "</div>",
    ]
    out += ["<h2>pass@k</h2><table><tr><th>k</th><th>pass@k</th></tr>",
            *[f'<tr><td>{_e(k)}</td><td class="num">{fmt_pct(v)}</td></tr>' for k, v in pass_k],
            "</table>"]
    failed = summary.get("last_failed_verifier") or {}
    if failed:
        out += ["<h2>Unresolved tasks: where the last candidate failed</h2><table>",
                "<tr><th>stage</th><th>tasks</th></tr>",
                *[f'<tr><td>{_e(k)}</td><td class="num">{v}</td></tr>' for k, v in failed.items()],
                "</table>"]
    formats = _format_rows(summary)
    if formats:
        out += ["<h2>Answers by edit format</h2><table>",
                "<tr><th>edit format / invalid reason</th><th>answers</th></tr>",
                *[f'<tr><td>{_e(k)}</td><td class="num">{v}</td></tr>' for k, v in formats],
                "</table>"]
    out += ["<h2>Tasks</h2><table><tr>", *[f"<th>{_e(c)}</th>" for c in TASK_COLUMNS], "</tr>"]
    for r in results:
        cells = _task_row(r)
        run_dir = r.get("run_dir")
        name = (f'<a href="{_e(run_dir)}/run.json">{_e(cells[0])}</a>' if run_dir
                else _e(cells[0]))
        out.append(
            f"<tr><td>{name}</td><td class=\"{_e(cells[1])}\" title=\"{_e(r.get('reason', ''))}\">"
            f"{_e(cells[1])}</td>"
            + "".join(f'<td class="num">{_e(c)}</td>' for c in cells[2:7])
            + f"<td>{_e(cells[7])}</td><td class=\"num\">{_e(cells[8])}</td></tr>"
        )
    out += ["</table>", "</body></html>", ""]
    return "\n".join(out)


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
    lines.append("")
    lines += [f"- **{k}**: {v}" for k, v in _cards(summary)]
    breakdown = summary.get("time_breakdown_s") or {}
    if breakdown:
        lines.append("- **candidate time**: " + ", ".join(
            f"{BREAKDOWN.get(k, k)} {fmt_num(v)} s" for k, v in breakdown.items()))
    lines.append("")
    gold = summary.get("gold_failures")
    if gold:
        lines += ["## Gold patch failures", ""]
        lines += [f"- `{g['task_id']}` {g['status']}: {g['reason']}" for g in gold]
        lines.append("")
    pass_k = sorted((summary.get("pass_at_k") or {}).items(), key=lambda kv: int(kv[0]))
    lines += ["## pass@k", "", *_md_table(["k", "pass@k"], [[k, fmt_pct(v)] for k, v in pass_k]),
              ""]
    formats = _format_rows(summary)
    if formats:
        lines += ["## Answers by edit format", "",
                  *_md_table(["edit format / invalid reason", "answers"],
                             [[k, str(v)] for k, v in formats]), ""]
    lines += ["## Tasks", "", *_md_table(TASK_COLUMNS, [_task_row(r) for r in results]), ""]
    return printable("\n".join(lines))


def _format_rows(summary: Mapping[str, Any]) -> list[tuple[str, int]]:
    """How the model wrote its answers: counts per edit format, then the invalid ones per
    reason."""
    rows = [(str(k), int(v)) for k, v in (summary.get("edit_formats") or {}).items()]
    rows += [(f"invalid: {k}", int(v))
             for k, v in (summary.get("invalid_reasons") or {}).items()]
    return rows


# --------------------------------------------------------------------------- single run


def run_html(run: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]], patch: str) -> str:
    """A short report of one run: its verdict, a timeline of the attempts, the attempts."""
    title = f"ooda run {run.get('run_id') or ''}".strip()
    status = str(run.get("status"))
    tokens = run.get("tokens") or {}
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p>Task <code>{_e(run.get("task_id"))}</code> · <b class="{_e(status)}">'
        f"{_e(status.upper())}</b> ({_e(run.get('reason', ''))}) · model "
        f"<code>{_e(run.get('model'))}</code> · {fmt_num(run.get('attempts'))} attempts, "
        f"{fmt_num(run.get('rounds_used'))} round(s) · {fmt_num(run.get('wall_s'))} s of "
        f"{fmt_num(run.get('budget_s'))} s · tokens {fmt_num(tokens.get('prompt'))} + "
        f"{fmt_num(tokens.get('completion'))}</p>",
        "<h2>Timeline</h2>", timeline(attempts, title="Attempts over time"),
        "<h2>Attempts</h2><table><tr>",
        *[f"<th>{_e(c)}</th>" for c in RUN_COLUMNS], "</tr>",
    ]
    for a in attempts:
        cells = _attempt_row(a)
        out.append(f"<tr><td>{_e(cells[0])}</td><td class=\"{_e(cells[1])}\">{_e(cells[1])}</td>"
                   + "".join(f'<td class="num">{_e(c)}</td>' for c in cells[2:6])
                   + f"<td>{_e(cells[6])}</td></tr>")
    out.append("</table>")
    if patch:
        out += ["<h2>Winning patch</h2>", f"<pre>{_e(patch)}</pre>"]
    out += ["</body></html>", ""]
    return "\n".join(out)


RUN_COLUMNS = ("attempt", "status", "round", "generated (s)", "verified (s)", "tokens", "reason")


def _attempt_row(a: Mapping[str, Any]) -> list[str]:
    tokens = int(a.get("prompt_tokens") or 0) + int(a.get("completion_tokens") or 0)
    reason = str(a.get("reason") or "").splitlines()
    return [str(a.get("attempt_id")), str(a.get("status")), fmt_num(a.get("round")),
            fmt_num(a.get("t_generated_s"), 2), fmt_num(a.get("t_verified_s"), 2),
            fmt_num(tokens), (reason[0] if reason else "")[:120]]


def run_markdown(run: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]],
                 patch: str) -> str:
    """A short Markdown report of one run."""
    tokens = run.get("tokens") or {}
    lines = [
        f"# ooda run {run.get('run_id') or ''}".rstrip(), "",
        f"Task `{run.get('task_id')}`: **{str(run.get('status')).upper()}** "
        f"({run.get('reason', '')}), model `{run.get('model')}`, "
        f"{fmt_num(run.get('attempts'))} attempts, {fmt_num(run.get('rounds_used'))} round(s), "
        f"{fmt_num(run.get('wall_s'))} s of {fmt_num(run.get('budget_s'))} s, tokens "
        f"{fmt_num(tokens.get('prompt'))} + {fmt_num(tokens.get('completion'))}.", "",
        "## Attempts", "", *_md_table(RUN_COLUMNS, [_attempt_row(a) for a in attempts]), "",
    ]
    if patch:
        lines += ["## Winning patch", "", "```diff", patch.rstrip(), "```", ""]
    return printable("\n".join(lines))
