"""The failed job's JUnit XML files as a FailureReport (worst outcome per test wins)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ooda.agent.app.ci.outcome import MESSAGE_CHARS, FailedTest, FailureReport
from ooda.agent.app.ci.statement import RepoFiles, bound
from ooda.agent.contracts.errors import UsageError
from ooda.verifiers.pytest_check import parse_report


def parse_junit(paths: Sequence[Path], repo: Path) -> FailureReport:
    """Failing and passing tests from JUnit XML files, named as pytest node ids.

    The reading is the pytest verifier's own (`ooda.verifiers.pytest_check.run.parse_report`): a
    testcase's `file` attribute gives its path when present, else its dotted `classname` is
    matched against the repository's files. Skipped and xfailed tests are neither failing
    nor passing."""
    files = RepoFiles(repo)
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"--junit {path}: cannot read: {exc.strerror or exc}") from exc
        run = parse_report(data, files.all(), repo)
        if run is None:
            raise UsageError(f"--junit {path}: not a JUnit XML report")
        for node, outcome in run.outcomes.items():
            node = files.node_id(node)
            if RANK.get(outcome, 0) >= RANK.get(outcomes.get(node, ""), -1):
                outcomes[node] = outcome
                messages[node] = run.messages.get(node, messages.get(node, ""))
    if not outcomes:
        raise UsageError(f"--junit {', '.join(map(str, paths))}: no testcases found")
    failing = [n for n, o in outcomes.items() if o in ("failed", "error")]
    return FailureReport(
        fail_to_pass=failing,
        pass_to_pass=[n for n, o in outcomes.items() if o == "passed"],
        failures=[FailedTest(n, bound(messages.get(n, ""), MESSAGE_CHARS)) for n in failing],
        source="JUnit " + ", ".join(p.name for p in paths),
    )


RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "failed": 2, "error": 3}

