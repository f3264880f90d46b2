"""The reproduction-test stage (verifiers/repro_check.py): scripts run from the repository root
and judged by how they end, through LocalSandbox (the real Python, no isolation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.contracts.protocols import CheckSpec, ReproTest
from ooda.agent.sandbox.local import LocalSandbox
from ooda.verifiers.cascade import default_verifiers
from ooda.verifiers.repro_check import REPRO_DIR, ReproVerifier, run_script

REPRODUCES = """\
from calc import mean

assert mean([1, 2]) == 1.5, "mean([1, 2]) should be 1.5"
"""


@pytest.fixture
def box(tmp_path: Path) -> LocalSandbox:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def mean(xs):\n    return sum(xs) // len(xs)\n")
    return LocalSandbox(repo)


def fix(box: LocalSandbox) -> None:
    (box.workspace / "calc.py").write_text("def mean(xs):\n    return sum(xs) / len(xs)\n")


def test_a_script_fails_with_its_assertion_then_passes_with_the_fix(box: LocalSandbox) -> None:
    test = ReproTest("repro_1", REPRODUCES)
    before = run_script(box, test, 20)
    assert before.status == "failed" and before.exception == "AssertionError"
    assert "mean([1, 2]) should be 1.5" in before.output
    fix(box)
    after = run_script(box, test, 20)
    assert after.status == "passed", after
    assert not (box.workspace / REPRO_DIR).exists()  # nothing left in the workspace


@pytest.mark.parametrize(
    ("source", "exception"),
    [
        ("from calc import median\n", "ImportError"),
        ("raise KeyError('x')\n", "KeyError"),
        ("import sys\nsys.exit(3)\n", "SystemExit"),
        ("import os\nos._exit(0)\n", "the script ended without a result (exit code 0)"),
        ("def broken(:\n", "SyntaxError"),
    ],
)
def test_other_endings_are_errors_not_failures(
    box: LocalSandbox, source: str, exception: str
) -> None:
    run = run_script(box, ReproTest("repro_1", source), 20)
    assert (run.status, run.exception) == ("error", exception)


def test_a_normal_exit_passes_and_a_hang_times_out(box: LocalSandbox) -> None:
    assert run_script(box, ReproTest("r", "print('fine')\nraise SystemExit(0)\n"), 20).status \
        == "passed"
    assert run_script(box, ReproTest("r", "import time\ntime.sleep(30)\n"), 1).status == "timeout"


def test_the_stage_requires_the_required_tests_and_feeds_their_script_back(
    box: LocalSandbox,
) -> None:
    check = CheckSpec(changed_files=["calc.py"], reproduction=[
        ReproTest("repro_1", REPRODUCES),
        ReproTest("repro_2", "from calc import median\n", required=False),
    ])
    stage = ReproVerifier()
    result = stage.verify(box, check)
    assert result.status == "failed"
    assert "1 of 1 reproduction tests" in result.summary and "repro_1" in result.summary
    assert "mean([1, 2]) should be 1.5" in result.summary  # the script and its output
    assert "repro_2" not in result.summary  # optional: counted, not fed back
    assert result.details["outcomes"] == {"repro_1": "failed", "repro_2": "error"}
    fix(box)
    result = stage.verify(box, check)
    assert result.status == "passed"
    assert result.details["outcomes"] == {"repro_1": "passed", "repro_2": "error"}


def test_no_reproduction_test_skips_the_stage_and_it_runs_last(box: LocalSandbox) -> None:
    assert ReproVerifier().verify(box, CheckSpec(changed_files=[])).status == "skipped"
    names = [v.name for v in default_verifiers(True, True, True, reproduction=True)]
    assert names == ["syntax", "tampering", "ruff", "pytest", "security", "mypy", "repro"]
    assert "repro" not in [v.name for v in default_verifiers()]


def test_a_probe_is_never_passed_or_failed_and_its_behaviour_is_recorded(
    box: LocalSandbox,
) -> None:
    from ooda.agent.verify.repro_suite import probe_on_base
    from ooda.verifiers.issue_probes import probe_from_issue

    source = probe_from_issue("It is wrong:\n```\n>>> from calc import mean\n>>> mean([1, 2])\n"
                              "1\n```\n")
    assert source is not None
    probe = ReproTest("probe_issue", source, required=False, probe=True)
    base = probe_on_base(probe, [run_script(box, probe, 20), run_script(box, probe, 20)])
    assert base.kept and not base.required and len(base.behaviour) == 1 and base.behaviour[0]
    kept = ReproTest("probe_issue", source, False, probe=True, base_behaviour=base.behaviour)
    check = CheckSpec(changed_files=["calc.py"], reproduction=[kept])
    unchanged = ReproVerifier().verify(box, check)
    assert unchanged.status == "passed" and unchanged.details["outcomes"] == {}
    probes = unchanged.details["probes"]
    assert probes == {"probe_issue": {"behaviour": list(base.behaviour),
                                      "base": list(base.behaviour)}}
    fix(box)
    changed = ReproVerifier().verify(box, check).details["probes"]["probe_issue"]
    assert changed["behaviour"] != changed["base"]


# (the wrapper loads pytest now, as the tests' interpreter has it: a module that looks for a
# plugin the test run would have loaded instead)
EXITS_WHEN_PYTEST_IS_ABSENT = "import sys\nif 'xdist' not in sys.modules:\n    sys.exit(0)\n"
EXITS_AT_ITS_FIRST_CALL = "import sys\n_real_sum = sum\ndef sum(xs):\n    sys.exit()\n"


@pytest.mark.parametrize("trick", [EXITS_WHEN_PYTEST_IS_ABSENT, EXITS_AT_ITS_FIRST_CALL])
def test_a_script_the_code_under_test_ended_did_not_pass(box: LocalSandbox, trick: str) -> None:
    """Issue 33, class 5: SystemExit(0) from the code under test (at import, or through a builtin
    a function under test calls) is not the script reaching its end; the script's own `sys.exit(0)` is."""
    (box.workspace / "calc.py").write_text(
        trick + "def mean(xs):\n    return sum(xs) // len(xs)\n"
    )
    run = run_script(box, ReproTest("repro_1", REPRODUCES), 20)
    assert run.status == "error" and "SystemExit" in run.exception, run
    assert "did not reach its end" in run.output or "not by a statement" in run.output
    fix(box)
    ends = REPRODUCES + "import sys\nif __name__ == '__main__':\n    sys.exit(0)\n"
    assert run_script(box, ReproTest("repro_1", ends), 20).status == "passed"


def test_the_result_mark_is_on_no_command_line(box: LocalSandbox) -> None:
    """The code under test cannot print the wrapper's result line: its mark is not in argv."""
    (box.workspace / "calc.py").write_text(
        "import os, sys\n"
        "words = open('/proc/self/cmdline', 'rb').read().split(b'\\0')\n"
        "for word in words:\n"
        "    if word.startswith(b'ooda-repro-'):\n"
        "        print(word.decode() + ' ok'); sys.stdout.flush(); os._exit(0)\n"
        "def mean(xs):\n    return sum(xs) // len(xs)\n"
    )
    run = run_script(box, ReproTest("repro_1", REPRODUCES), 20)
    assert run.status == "failed", run
