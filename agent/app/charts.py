"""Hand-drawn SVG charts for the reports (a step line, bars, one stacked bar, a timeline), the
page's colours and CSS and number formatting: no plotting library, the page opens offline."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ooda.agent.core.records import AttemptRecord
from ooda.agent.support.textsafe import printable

COLORS = {
    "resolved": "#2e7d32", "passed": "#2e7d32", "unresolved": "#c62828", "failed": "#c62828",
    "error": "#ef6c00", "invalid_edit": "#8e24aa", "timeout": "#6d4c41", "cancelled": "#9e9e9e",
    "first_token": "#90caf9", "generation": "#1565c0", "verification": "#f9a825", "queueing": "#9e9e9e",
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


def human_tokens(n: int) -> str:
    """611, 6.7k, 1.2M (as Aider prints token counts)."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def money(dollars: float) -> str:
    """Dollars with enough digits that a small cost is not shown as $0.00 (costs are never
    rounded before they are shown)."""
    if dollars == 0 or dollars >= 1:
        return f"${dollars:.2f}"
    return f"${dollars:.4f}" if dollars >= 0.0001 else f"${dollars:.6f}"


def fmt_pct(value: object) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, int | float) else "–"


def escape(value: object) -> str:
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
                 f'font-size="12">{escape(x_label)}</text>')
    parts.append(f'<text transform="translate(13,{(MT + H - MB) / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle" font-size="12">{escape(y_label)}</text>')
    return parts


def _svg(parts: Sequence[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title>{''.join(parts)}</svg>")


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
                     f'font-size="11">{escape(label)}</text>')
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
                         f'fill="{COLORS.get(name, "#757575")}"><title>{escape(name)}: '
                         f"{value:.1f} {unit}</title></rect>")
        x += w
    for i, (name, value) in enumerate(parts_in.items()):
        ly = y + height + 30 + 22 * i
        share = max(0.0, value) / total if total > 0 else 0.0
        parts.append(f'<rect x="{ML}" y="{ly - 11}" width="12" height="12" '
                     f'fill="{COLORS.get(name, "#757575")}"/>')
        parts.append(f'<text x="{ML + 18}" y="{ly}" font-size="12">'
                     f"{escape(labels.get(name, name))}: {value:,.1f} {unit} "
                     f"({100 * share:.0f}%)</text>")
    height = y + height + 30 + 22 * len(parts_in)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
            f'viewBox="0 0 {W} {height}" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title>{''.join(parts)}</svg>")


def timeline(attempts: Sequence[AttemptRecord], *, title: str) -> str:
    """One row per attempt: generating (blue) then verifying, colored by its status."""
    rows = [a for a in attempts if a.t_start_s is not None]
    top = max([float(a.t_verified_s or a.t_generated_s or a.t_start_s or 0.0)
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
        start = float(a.t_start_s or 0.0)
        gen_end = float(a.t_generated_s) if a.t_generated_s is not None else start
        end = float(a.t_verified_s) if a.t_verified_s is not None else gen_end
        color = COLORS.get(a.status, "#757575")
        label = f"{a.attempt_id} {a.status}"
        parts.append(f'<rect x="{x_of(start):.1f}" y="{y:.1f}" '
                     f'width="{max(1.0, x_of(gen_end) - x_of(start)):.1f}" height="{h:.1f}" '
                     f'fill="{COLORS["generation"]}"><title>{escape(label)} generating</title></rect>')
        parts.append(f'<rect x="{x_of(gen_end):.1f}" y="{y:.1f}" '
                     f'width="{max(1.0, x_of(end) - x_of(gen_end)):.1f}" height="{h:.1f}" '
                     f'fill="{color}"><title>{escape(label)} verifying</title></rect>')
        parts.append(f'<text x="{ML - 4}" y="{y + h * 0.8:.1f}" text-anchor="end" '
                     f'font-size="10">{escape(a.attempt_id)}</text>')
    parts.append(f'<text x="{(ML + W - MR) / 2:.1f}" y="{height - 6}" text-anchor="middle" '
                 'font-size="12">seconds since the run began</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height:.0f}" '
            f'viewBox="0 0 {W} {height:.0f}" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title>{''.join(parts)}</svg>")

