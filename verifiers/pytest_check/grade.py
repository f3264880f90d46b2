"""Grading a pytest run per the SPEC: every fail_to_pass and pass_to_pass id must have run and
passed (a file id means all its tests, a function id all its parametrizations; missing,
skipped, xfailed or never-run tests fail), and the bounded feedback that says why not.

Pure functions of a parsed run (parse.py), as the SWE-bench harness keeps grading apart from
running; the verifier (verifier.py) turns them into a VerifierResult.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ooda.verifiers import SUMMARY_LIMIT, clip
from ooda.verifiers.pytest_check.parse import (
    OUTCOME_RANK,
    NodeIndex,
    TestRun,
    match_id,
    normalize_id,
)

MAX_LISTED = 8
"""Most failing tests described in a summary."""
FAILING = frozenset({"failed", "error"})

@dataclass
class Graded:
    """One required id's verdict."""

    test_id: str
    kind: str
    """'fail_to_pass' or 'pass_to_pass'."""
    outcome: str
    """passed | failed | error | skipped | xfailed | missing."""
    node: str
    """The node that decided it (the worst one), or the id itself."""


def grade(fail_to_pass: Sequence[str], pass_to_pass: Sequence[str], run: TestRun) -> list[Graded]:
    """Each required id with its outcome: the worst of the nodes it stands for."""
    graded: list[Graded] = []
    seen: set[str] = set()
    listed = [*fail_to_pass, *pass_to_pass]
    nodes_run = NodeIndex(run.outcomes)
    for kind, ids in (("fail_to_pass", fail_to_pass), ("pass_to_pass", pass_to_pass)):
        for raw in ids:
            test_id = normalize_id(raw)
            if test_id in seen:
                continue
            seen.add(test_id)
            nodes = match_id(test_id, nodes_run, listed)
            if not nodes:
                graded.append(Graded(test_id, kind, "missing", test_id))
                continue
            worst = max(nodes, key=lambda n: OUTCOME_RANK[run.outcomes[n]])
            graded.append(Graded(test_id, kind, run.outcomes[worst], worst))
    return graded


def _explain(item: Graded, run: TestRun, passed_before: Collection[str] | None = None) -> str:
    label = {"failed": "FAILED", "error": "ERROR", "missing": "MISSING"}.get(
        item.outcome, item.outcome.upper()
    )
    head = f"{label} {item.node}"
    if item.kind == "pass_to_pass" and passed_before is not None:
        # said only when the base run showed it: a broken environment fails it on the base too
        head += (" (passed before the change)" if item.test_id in passed_before
                 else " (did not pass before the change either)")
    if item.outcome == "missing":
        why = "pytest could not find it" if item.test_id in run.not_found else "it never ran"
        return f"{head}: {why}; the test must exist and run"
    if item.outcome in ("skipped", "xfailed"):
        detail = run.messages.get(item.node, "")
        what = "skipped" if item.outcome == "skipped" else "expected-to-fail (xfail)"
        return f"{head}: a {what} test counts as failed" + (f"\n{detail}" if detail else "")
    if item.node != item.test_id and "::" not in item.node:
        head += f" (collecting {item.node} failed, so {item.test_id} never ran)"
    detail = run.messages.get(item.node, "")
    return head + ("\n" + _indent(detail) if detail else "")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def summarize(
    head: str, bad: Sequence[Graded], run: TestRun, passed_before: Collection[str] | None = None
) -> str:
    """The feedback: `head`, then each test that did not pass; `passed_before`: the
    pass_to_pass ids measured passing on the base (None: not measured, nothing said)."""
    parts = [head]
    for item in bad[:MAX_LISTED]:
        parts.append(_explain(item, run, passed_before))
    if len(bad) > MAX_LISTED:
        parts.append(f"... and {len(bad) - MAX_LISTED} more")
    return clip("\n".join(parts), SUMMARY_LIMIT)


def run_log(run: TestRun, lines: Sequence[str]) -> str:
    out = ["$ " + c for c in run.commands]
    out.append(f"exit code: {run.exit_code}; timed out: {run.timed_out}")
    out.append(f"report found: {run.report_found}")
    out += lines
    out += ["", "---- pytest output ----", run.output]
    return "\n".join(out)

