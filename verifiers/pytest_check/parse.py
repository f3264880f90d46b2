"""Reading a pytest run's JUnit XML report (with the `junitparser` library) into per-test
outcomes, and matching the task's test ids against the node ids a run reported.

Outcomes come only from the structured report, never from the console output, which the
candidate's code can print anything into. The report is read on the host without following
symbolic links (`read_report`), out of the workspace's `.ooda/` directory that no patch may
touch. Split from the running (run.py) and the grading (grade.py) so that each can be read and
tested alone; agent/app/ci reads CI reports with the same `parse_report`.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import stat
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from junitparser import Attr, Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from ooda.verifiers import clip, relative_to_workdir

REPORT_DIR = ".ooda"
MAX_REPORT_BYTES = 64 * 1024 * 1024
PER_TEST_LIMIT = 600
OUTCOME_RANK = {"passed": 0, "xfailed": 1, "skipped": 2, "failed": 3, "error": 4}
"""When one test has several report entries (call + teardown error), the worst wins."""

_NOT_FOUND = re.compile(
    r"^ERROR: (?:not found: |file or directory not found: |found no collectors for )(.+?)\s*$",
    re.M,
)

class _PytestCase(TestCase):
    file = Attr()


class _PytestSuite(TestSuite):
    testcase = _PytestCase


class _PytestReport(JUnitXml):
    testsuite = _PytestSuite


@dataclass
class TestRun:
    """What one pytest run did, read from its JUnit report."""

    __test__ = False

    outcomes: dict[str, str] = field(default_factory=dict)
    """pytest node id -> passed | failed | error | skipped | xfailed."""
    messages: dict[str, str] = field(default_factory=dict)
    """node id -> assertion message and traceback tail, for tests that did not pass."""
    not_found: list[str] = field(default_factory=list)
    """Requested ids pytest said it could not find."""
    exit_code: int | None = None
    timed_out: bool = False
    report_found: bool = False
    output: str = ""
    duration_s: float = 0.0
    commands: list[str] = field(default_factory=list)
    cases: dict[tuple[str, str], str] = field(default_factory=dict)
    """(classname, name) as the JUnit report has them -> outcome (the worst one)."""
    tampered: list[str] = field(default_factory=list)
    """Why the run cannot be trusted (verifiers/pytest_check/integrity.py); empty for an honest run."""
    pytest_exit_code: int | None = None
    """What pytest.main itself returned, per the guard's record (None: no record)."""
    hidden_reads: list[str] = field(default_factory=list)
    """The task's hidden test files the candidate's code read while the tests ran (the guard's
    record): the feedback then says which tests failed, not how."""
    limit: str | None = None
    """The sandbox killed the run for a resource limit: its one-line note (ExecResult.limit)."""
    stopped_at: str | None = None
    """A verdict-only run the guard ended at its first failure, this test's (guard/early.py):
    no signed record, so it is always judged failed."""


def _outcome(case: TestCase) -> tuple[str, str]:
    outcome, message = "passed", ""
    for result in case.result:
        if isinstance(result, Error):
            kind = "error"
        elif isinstance(result, Failure):
            kind = "failed"
        elif isinstance(result, Skipped):
            kind = "xfailed" if (result.type or "") == "pytest.xfail" else "skipped"
        else:
            continue
        if OUTCOME_RANK[kind] >= OUTCOME_RANK[outcome]:
            outcome = kind
            message = _describe(result.message or "", result.text or "")
    return outcome, message


def _describe(message: str, text: str) -> str:
    """The failing source line, the error lines ('E ...') and where it was raised; the last
    lines of the traceback (or the report's message) when pytest gave no error lines."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    if errors:
        source = [line for line in lines if line.startswith(">")][-1:]
        body = source + errors[:12] + lines[-1:]
    else:
        body = ([message.strip()] if message.strip() else []) + lines[-8:]
    return clip("\n".join(body), PER_TEST_LIMIT)


def _node_id(
    classname: str, name: str, file: str | None, known_files: Sequence[str], workspace: Path
) -> str:
    """Map a JUnit xunit1 testcase back to the pytest node id it was made from.

    pytest writes classname = the node id's path with '/' -> '.' and '.py' dropped, then the
    classes; name = the test name with its parameters; file = where the test is defined."""
    if not classname:
        return file or name
    candidates = list(dict.fromkeys(([file] if file else []) + list(known_files)))
    candidates.sort(key=len, reverse=True)
    for path in candidates:
        module = (path[:-3] if path.endswith(".py") else path).replace("/", ".")
        if classname == module:
            return f"{path}::{name}"
        if classname.startswith(module + "."):
            classes = classname[len(module) + 1 :].split(".")
            return "::".join([path, *classes, name])
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (workspace / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return f"{file}::{name}" if file else f"{classname}::{name}"


def read_report(workspace: Path, name: str) -> bytes | None:
    """The report's bytes, or None when it is missing, odd (a link, not a file) or too big."""
    try:
        dir_fd = os.open(workspace / REPORT_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_REPORT_BYTES:
            return None
        return handle.read(MAX_REPORT_BYTES + 1)


def parse_report(data: bytes, known_files: Sequence[str], workspace: Path) -> TestRun | None:
    """Per-test outcomes from JUnit XML bytes (None when they are not a JUnit report)."""
    try:
        report = _PytestReport.fromstring(data)
    except Exception:  # junitparser raises several types (ParseError, JUnitXmlError, ...)
        return None
    run = TestRun(report_found=True)
    for suite in report:
        for case in suite:
            classname, name = case.classname or "", case.name or ""
            file = case.file if isinstance(case, _PytestCase) else None
            node = _node_id(classname, name, file, known_files, workspace)
            outcome, message = _outcome(case)
            earlier = run.cases.get((classname, name))
            if earlier is None or OUTCOME_RANK[outcome] > OUTCOME_RANK[earlier]:
                run.cases[(classname, name)] = outcome
            previous = run.outcomes.get(node)
            if previous is None or OUTCOME_RANK[outcome] > OUTCOME_RANK[previous]:
                run.outcomes[node] = outcome
                if message:
                    run.messages[node] = message
    return run



def ids_not_found(output: str, workdir: str, wanted: Sequence[str]) -> list[str]:
    """The wanted ids that pytest said (in `output`) it could not find."""
    missing = []
    for match in _NOT_FOUND.finditer(output):
        path = normalize_id(relative_to_workdir(match.group(1), workdir.rstrip("/"), wanted))
        if path in wanted:
            missing.append(path)
    return missing


def normalize_id(test_id: str) -> str:
    """A node id as pytest prints it: no leading './', no trailing '/'."""
    test_id = test_id.strip()
    if "[" in test_id:  # pytest escapes control characters in parameter ids; SWE-bench kept them
        head, _, params = test_id.partition("[")
        test_id = head + "[" + params.replace("\n", "\\n").replace("\t", "\\t")
    while test_id.startswith("./"):
        test_id = test_id[2:]
    return test_id.rstrip("/") if "::" not in test_id else test_id


def split_outcomes(outcomes: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(ids that did not pass, ids that passed) of a run_tests result."""
    failing = [node for node, outcome in outcomes.items() if outcome != "passed"]
    passing = [node for node, outcome in outcomes.items() if outcome == "passed"]
    return failing, passing


# --------------------------------------------------------------------------- grading


class NodeIndex:
    """The node ids of one run, sorted once, so that the nodes a test id names are found by
    their common prefix (a binary search) instead of by reading every node: grading N ids
    against a run of N tests read N x N nodes (888 ids: 0.7 s per grading, and a verification
    grades the same run more than once). Hits come back in the run's own order."""

    def __init__(self, nodes: Iterable[str]) -> None:
        self.position = {node: i for i, node in enumerate(dict.fromkeys(nodes))}
        self._sorted = sorted(self.position)

    def __contains__(self, node: object) -> bool:
        return node in self.position

    def __len__(self) -> int:
        return len(self.position)

    def with_prefix(self, prefix: str) -> list[str]:
        """The nodes starting with `prefix`, in the run's order."""
        start = bisect.bisect_left(self._sorted, prefix)
        hits = []
        for node in itertools.islice(self._sorted, start, None):
            if not node.startswith(prefix):
                break
            hits.append(node)
        return sorted(hits, key=self.position.__getitem__)


def match_id(test_id: str, outcomes: Iterable[str] | NodeIndex,
             listed: Collection[str] = ()) -> list[str]:
    """The node ids of a run that `test_id` stands for (`outcomes`: the run's node ids; a
    NodeIndex of them when many ids are matched against one run).

    A file (or directory) id stands for every test in it; a function id also for each of its
    parametrizations; a class id for its methods. A parametrized id that matches none of its
    function's parametrizations (SWE-bench's lists hold ids whose parameters were rewritten:
    `test_stdin[/mymodule.py]` for a parameter holding the harness's checkout path) stands
    for the parametrizations no other id of `listed` (the task's lists) claims, when there
    are exactly as many of those as listed ids of that function that match none. When the
    id's file failed to be collected, that collection error stands for it."""
    test_id = normalize_id(test_id)
    nodes = outcomes if isinstance(outcomes, NodeIndex) else NodeIndex(outcomes)
    if "::" not in test_id:
        return [n for n in nodes.with_prefix(test_id) if _within(n.split("::", 1)[0], test_id)]
    hits = _direct(test_id, nodes)
    if not hits and listed and "[" in _last_part(test_id):
        hits = _unclaimed(test_id, nodes, listed)
    if not hits:
        file = test_id.split("::", 1)[0]
        hits = [file] if file in nodes else []
    return hits


def _direct(test_id: str, nodes: NodeIndex) -> list[str]:
    """The nodes `test_id` names itself (exactly, as a prefix, cut or truncated)."""
    last = _last_part(test_id)
    named = nodes.with_prefix(test_id)  # every way below names a node beginning so
    if truncated(test_id):
        # SWE-bench cuts long parametrized ids (`test_x[cliapp.factory-`): every
        # parametrization that begins so stands for it
        file = test_id.split("::", 1)[0]
        return named or ([file] if file in nodes else [])
    hits = [
        n
        for n in named
        if n == test_id
        or n.startswith(test_id + "::")
        or ("[" not in last and n.startswith(test_id + "["))
    ]
    if not hits and test_id.endswith("]"):
        hits = _cut_and_closed(test_id, nodes)
    return hits


def _unclaimed(test_id: str, nodes: NodeIndex, listed: Collection[str]) -> list[str]:
    function = test_id.partition("[")[0]
    params = NodeIndex(nodes.with_prefix(function + "["))
    siblings = {normalize_id(i) for i in listed if normalize_id(i).startswith(function + "[")}
    siblings.add(test_id)
    claimed: set[str] = set()
    unmatched = 0
    for sibling in siblings:
        found = _direct(sibling, params)
        claimed.update(found)
        unmatched += not found
    left = [n for n in params.position if n not in claimed]
    return left if left and len(left) == unmatched else []


def _cut_and_closed(test_id: str, nodes: NodeIndex) -> list[str]:
    """SWE-bench also cuts a parametrized id at a space and closes it with `]`
    (`test_x[select id from tbl;;]` for `test_x[select id from tbl;;-Could not parse: ;]`):
    the parametrizations whose first parameters are exactly the kept ones stand for it. The
    cut must fall where pytest joins parameters (`-`), so `[a]` never stands for `[ab-c]`."""
    stem = test_id[:-1]
    return [n for n in nodes.with_prefix(stem + "-") if n.endswith("]")]


def truncated(test_id: str) -> bool:
    """A parametrized id cut short: its last part opens a `[` and does not end with `]`.
    Brackets inside the parameters need not balance (`test_x[[=b-expected3]`, a parameter
    holding "[="): pytest ends every parametrized id with the `]` it opened."""
    last = _last_part(test_id) if "::" in test_id else ""
    return "[" in last and not last.rstrip().endswith("]")


def _last_part(test_id: str) -> str:
    """The last `::` part of a node id, parameters included (a parameter may hold `::` itself,
    as in sqlfluff's `[SelectClauseElementSegment-NULL::INT]`)."""
    head, bracket, params = test_id.partition("[")
    return head.rsplit("::", 1)[-1] + bracket + params


def run_target(test_id: str) -> str:
    """What to hand pytest for `test_id`: a truncated parametrized id selects its whole
    function (pytest would fail collection on the cut id, and every test with it)."""
    test_id = normalize_id(test_id)
    if truncated(test_id):
        head, _, _ = test_id.partition("[")
        return head
    return test_id


def _within(path: str, test_id: str) -> bool:
    return path == test_id or path.startswith(test_id + "/")


