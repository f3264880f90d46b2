"""What `ooda ci` says on the pull request: comment.md (what failed, what was tried, the fix)
and GitHub review suggestions for the hunks that fit in one."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from ooda.agent.app.ci.github import (
    COMMENT_MARKER,
    MAX_COMMENT_CHARS,
)
from ooda.agent.app.ci.outcome import (
    COMMENT_ATTEMPTS,
    COMMENT_DIFF_CHARS,
    COMMENT_TESTS,
    FailedTest,
    FailureReport,
)
from ooda.agent.contracts.stages import CASCADE_ORDER
from ooda.agent.sandbox.image import PYTHON_VERSION
from ooda.agent.support.textsafe import md_code, md_fence, printable

if TYPE_CHECKING:
    from ooda.agent.core.loop import Attempt, RunResult
    from ooda.agent.core.records import RunSummary


def suggestions_from_patch(patch: str) -> list[dict[str, Any]]:
    """GitHub review suggestions for the hunks that fit in one.

    A hunk fits when the lines it changes map onto one contiguous range of existing lines:
    from its first to its last changed line, context in between included. A pure insertion
    is anchored on the line just above it (or below, at the top of a file). New, deleted,
    renamed and binary files have no existing lines to suggest on."""
    try:
        patch_set = PatchSet(patch)
    except UnidiffParseError:
        return []
    suggestions = []
    for patched in patch_set:
        if (patched.is_added_file or patched.is_removed_file or patched.is_binary_file
                or patched.is_rename):
            continue
        for hunk in patched:
            lines = [ln for ln in hunk if ln.is_added or ln.is_removed or ln.is_context]
            changed = [i for i, ln in enumerate(lines) if ln.is_added or ln.is_removed]
            if not changed:
                continue
            first, last = changed[0], changed[-1]
            span = lines[first : last + 1]
            added = [ln.value for ln in span if not ln.is_removed]
            existing = [ln for ln in span if not ln.is_added]
            if existing:
                start, end = existing[0].source_line_no, existing[-1].source_line_no
                replacement = "".join(added)
            elif first > 0:
                anchor = lines[first - 1]
                start = end = anchor.source_line_no
                replacement = anchor.value + "".join(added)
            elif last + 1 < len(lines):
                anchor = lines[last + 1]
                start = end = anchor.source_line_no
                replacement = "".join(added) + anchor.value
            else:
                continue
            suggestions.append({
                "path": patched.path,
                "start_line": start,
                "line": end,
                "replacement": replacement,
            })
    return suggestions


def review_comments(suggestions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The review API's inline comments for `suggestions`."""
    comments = []
    for s in suggestions:
        text = s["replacement"]
        if text and not text.endswith("\n"):
            text += "\n"
        fence = _fence(text)
        comment: dict[str, Any] = {
            "path": s["path"],
            "line": s["line"],
            "side": "RIGHT",
            "body": f"ooda suggests:\n{fence}suggestion\n{text}{fence}",
        }
        if s["start_line"] < s["line"]:
            comment["start_line"] = s["start_line"]
            comment["start_side"] = "RIGHT"
        comments.append(comment)
    return comments


def render_comment(
    report: FailureReport,
    result: RunResult | None,
    *,
    branch: str | None = None,
    run_dir: Path | None = None,
    stages_off: Mapping[str, str] | None = None,
) -> str:
    """comment.md: what failed (the pull request's failures apart from those that fail on its
    base too), then the verified fix or what was tried (`result` None: nothing was run).
    `stages_off`: the verifier stages turned off, each with why (`stages_off_reasons`)."""
    lines = [COMMENT_MARKER]
    own = "the pull request's failing tests" if report.base_rev else "the failing tests"
    if result is None:
        lines.append("### ooda: every failing test fails before this pull request too")
    elif result.winner is not None:
        lines.append(f"### ooda: suggested fix for {own} (verified)")
    else:
        lines.append(f"### ooda: no verified fix for {own}")
    if report.fail_to_pass:
        what = "What this pull request broke" if report.base_rev else "What failed"
        lines += ["", f"**{what}** ({len(report.fail_to_pass)} test(s), "
                      f"from {report.source}):"]
    elif result is not None:
        lines += ["", f"**What failed**: {report.source} (no per-test report)."]
    lines += _failure_lines(report.failures)
    if report.failing_before:
        lines += ["", f"**Failing before this pull request too** "
                      f"({len(report.failing_before)} test(s): they fail on its base "
                      f"{md_code(report.base_rev or '')} as well, so they are likely unrelated; "
                      "not the fix's job, and left failing by it):"]
        lines += _failure_lines(report.failing_before)
    elif report.base_note and result is not None:
        note = " ".join(report.base_note.split())[:200]  # ooda's own words (outcome.py)
        lines += ["", f"(Every reported failure is the fix's job: {note}.)"]
    lines.append("")
    if result is None:
        text = printable("\n".join(lines) + "\n")
        return text if len(text) <= MAX_COMMENT_CHARS else text[: MAX_COMMENT_CHARS - 40] + "\n...\n"
    summary = result.summary
    stats = (
        f"{summary.attempts} attempt(s) in "
        f"{result.rounds_used} round(s), {summary.wall_s:.1f} s, "
        f"tokens {summary.tokens.prompt:,} + {summary.tokens.completion:,}, "
        f"model {md_code(summary.model or '?')}"
    )
    winner = result.winner
    if winner is not None:
        lines.append(f"**Suggested fix** ({_checks(winner, stages_off or {})}):")
        patch = winner.patch
        if len(patch) > COMMENT_DIFF_CHARS:
            patch = patch[:COMMENT_DIFF_CHARS] + "\n... (cut: the whole diff is suggestion.diff)\n"
        fence = _fence(patch)
        lines += ["", f"{fence}diff", patch.rstrip("\n"), fence, ""]
        lines.append(f"Found by attempt {md_code(winner.attempt_id)} (round {winner.round}): "
                     f"{stats}.")
        if report.failing_before:
            left = ", ".join(md_code(f.test_id) for f in report.failing_before[:COMMENT_TESTS])
            lines.append(f"It repairs this pull request's failures and breaks no passing test; "
                         f"it leaves failing {left}"
                         + (" and more" if len(report.failing_before) > COMMENT_TESTS else "")
                         + " (failing on the base too).")
        if branch:
            lines.append(f"The fix is pushed as branch {md_code(branch)}.")
        else:
            lines.append("Apply it with `git apply suggestion.diff` (from the job's artifacts).")
    else:
        lines.append(f"**What was tried**: {stats}; stopped: {_inline(result.reason, 300)}.")
        lines += ["", "| attempt | round | result | why |", "|---|---|---|---|"]
        for attempt in result.attempts[:COMMENT_ATTEMPTS]:
            lines.append(
                f"| {md_code(attempt.attempt_id, table=True)} | {attempt.round} | "
                f"{_attempt_result(attempt)} | {_cell(_why(attempt))} |"
            )
        if len(result.attempts) > COMMENT_ATTEMPTS:
            lines.append(f"| ... | | {len(result.attempts) - COMMENT_ATTEMPTS} more | |")
    lines += ["", f"Tests ran in {_environment(summary)}."]
    if run_dir is not None:
        lines += ["", f"<sub>ooda run {md_code(run_dir.name)}</sub>"]
    text = printable("\n".join(lines) + "\n")  # candidate text: no terminal escapes
    return text if len(text) <= MAX_COMMENT_CHARS else text[: MAX_COMMENT_CHARS - 40] + "\n...\n"


def _failure_lines(failures: list[FailedTest]) -> list[str]:
    lines = []
    for failure in failures[:COMMENT_TESTS]:
        first = _headline(failure.message)
        lines.append(f"- {md_code(failure.test_id)}" + (f": {_inline(first, 160)}" if first else ""))
    if len(failures) > COMMENT_TESTS:
        lines.append(f"- ... and {len(failures) - COMMENT_TESTS} more")
    return lines


def _headline(message: str) -> str:
    """The line of a failure that says most: pytest's first `E` line, else the first one that
    is not pytest's progress (`..F.  [ 50%]`) or a separator (`=== FAILURES ===`)."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    if errors:
        return errors[0]
    said = [ln for ln in lines if not _PYTEST_NOISE.match(ln)]
    return said[0] if said else ""


_PYTEST_NOISE = re.compile(r"^(?:[.FEsxXp]+(?:\s+\[\s*\d+%\])?|[=_-]{3,}.*|\[\s*\d+%\])$")
"""pytest's progress lines and its section separators: no news about a failure."""


def _checks(attempt: Attempt, stages_off: Mapping[str, str]) -> str:
    """What the fix passed, and the stages that did not judge it: skipped (with the reason)
    or not run at all, with why (turned off: --no-ruff, --no-mypy, the task's [verifiers];
    not installed in the repository's own environment)."""
    results = attempt.verdict.results if attempt.verdict else []
    ran = {r.name for r in results}
    parts = [f"passed: {', '.join(r.name for r in results if r.status == 'passed') or 'none'}"]
    parts += [f"skipped: {r.name} ({_inline(_headline(r.log or r.summary), 240) or 'no reason'})"
              for r in results if r.status == "skipped"]
    # (the reproduction-test stage belongs to blind benchmark runs: never a CI job's)
    off = [stage for stage in CASCADE_ORDER if stage not in ran and stage != "repro"]
    by_reason: dict[str, list[str]] = {}
    for stage in off:
        by_reason.setdefault(stages_off.get(stage, "turned off for this run"), []).append(stage)
    parts += [f"not run: {', '.join(stages)} ({why})" for why, stages in by_reason.items()]
    return "; ".join(parts)


def stages_off_reasons(on: Mapping[str, bool], task_says: Mapping[str, bool],
                       flags: Mapping[str, bool]) -> dict[str, str]:
    """Why each verifier stage that is off is off: `on` the plan's stages, `task_says` the
    task's own [verifiers], `flags` the --no-<stage> options given."""
    reasons = {}
    for stage, running in on.items():
        if running:
            continue
        if flags.get(stage):
            reasons[stage] = f"--no-{stage}"
        elif not task_says.get(stage, True):
            reasons[stage] = "the task's [verifiers] turn it off"
        else:
            reasons[stage] = ("the tests ran in the repository's own environment, where ooda's "
                              "ruff and mypy are not installed")
    return reasons


def _environment(summary: RunSummary) -> str:
    """The Python the tests ran in: the repository's detected or given environment, else
    ooda's sandbox image."""
    said = (summary.environment or "").removeprefix("environment: ").strip()
    return _inline(said, 200) if said else f"ooda's sandbox image (Python {PYTHON_VERSION})"


def _attempt_result(attempt: Attempt) -> str:
    if attempt.duplicate_of:
        return f"{attempt.status} (same patch as `{attempt.duplicate_of}`)"
    results = attempt.verdict.results if attempt.verdict else []
    failed = [r.name for r in results if r.status not in ("passed", "skipped")]
    return f"{attempt.status} ({failed[-1]})" if failed else attempt.status


def _why(attempt: Attempt) -> str:
    results = attempt.verdict.results if attempt.verdict else []
    for r in reversed(results):
        if r.status not in ("passed", "skipped") and r.summary.strip():
            return r.summary
    return attempt.reason or attempt.status


def _inline(text: str, limit: int) -> str:
    """Text from a candidate, a test or a model, cut at a clause, as an inert code span
    (no HTML, link or mention inside one: agent/support/textsafe.py)."""
    return md_code(_shorten(" ".join(text.split()).replace("`", "'"), limit))


def _shorten(text: str, limit: int) -> str:
    """`text` within `limit`: cut after its last whole clause that fits (never inside a
    quoted command or a word), "..." marking the cut."""
    if len(text) <= limit:
        return text
    head = text[: limit - 4]
    quotes = [m.start() for m in re.finditer("'", head)]
    if len(quotes) % 2:  # an open quote (a command, a name): cut before it
        head = head[: quotes[-1]]
    clause = max(head.rfind("; "), head.rfind(". "), head.rfind(": "), head.rfind(", "))
    cut = clause if clause >= limit // 2 else head.rfind(" ")
    return (head[:cut] if cut > 0 else head).rstrip(" ;:,.") + " ..."


def _cell(text: str) -> str:
    return md_code(text, 140, table=True)


_fence = md_fence

