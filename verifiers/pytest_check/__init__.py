"""The pytest stage: run (in the sandbox, under the guard), parse (the JUnit report), grade (per
the SPEC) and the verifier that joins them; guard/ is the program (a package) that runs inside
the sandbox and integrity.py checks its record on the host. Callers import from here."""

from ooda.verifiers.pytest_check.grade import Graded, grade
from ooda.verifiers.pytest_check.parse import (
    REPORT_DIR,
    TestRun,
    match_id,
    normalize_id,
    parse_report,
    split_outcomes,
)
from ooda.verifiers.pytest_check.run import (
    TestRunError,
    base_run,
    not_gradable,
    pytest_command,
    run_pytest,
    run_pytest_ids,
    run_tests,
)
from ooda.verifiers.pytest_check.verifier import PytestVerifier

__all__ = [
    "REPORT_DIR",
    "Graded",
    "PytestVerifier",
    "TestRun",
    "TestRunError",
    "base_run",
    "grade",
    "match_id",
    "normalize_id",
    "not_gradable",
    "parse_report",
    "pytest_command",
    "run_pytest",
    "run_pytest_ids",
    "run_tests",
    "split_outcomes",
]
