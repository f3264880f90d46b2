"""pytest, as ooda runs it: run (in the sandbox, under the guard), parse (the JUnit report) and
grade (per the SPEC); guard/ is the program (a package) that runs inside the sandbox and
integrity.py checks its record on the host. The tests stage (verifiers/tests_stage.py) runs it
through its runner, verifiers/runners/pytest_runner.py. Callers import from here."""

from ooda.verifiers.pytest_check.grade import Graded, grade
from ooda.verifiers.pytest_check.parse import (
    REPORT_DIR,
    NodeIndex,
    TestRun,
    match_id,
    normalize_id,
    parse_report,
    split_outcomes,
)
from ooda.verifiers.pytest_check.run import (
    GUARD_PACKAGE,
    TestRunError,
    guard_sources,
    not_gradable,
    pytest_command,
    run_pytest,
    run_pytest_ids,
)

__all__ = [
    "GUARD_PACKAGE",
    "REPORT_DIR",
    "Graded",
    "NodeIndex",
    "TestRun",
    "TestRunError",
    "grade",
    "guard_sources",
    "match_id",
    "normalize_id",
    "not_gradable",
    "parse_report",
    "pytest_command",
    "run_pytest",
    "run_pytest_ids",
    "split_outcomes",
]
