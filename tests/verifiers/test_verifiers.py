"""Tests for verifiers/: each stage on small repositories with the real ruff, mypy and pytest,
run through LocalSandbox (no isolation)."""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import CheckSpec, ExecResult, Sandbox, VerifierResult
from ooda.agent.sandbox.local import LocalSandbox
from ooda.verifiers import Baseline, Diagnostic, new_diagnostics
from ooda.verifiers.cascade import default_verifiers, run_cascade
from ooda.verifiers.mypy_check import MypyVerifier
from ooda.verifiers.pytest_check import (
    TestRun,
    TestRunError,
    match_id,
    pytest_command,
    split_outcomes,
)
from ooda.verifiers.pytest_check.run import Watched, run_pytest_ids
from ooda.verifiers.ruff_check import RuffVerifier
from ooda.verifiers.runners.pytest_runner import run_tests
from ooda.verifiers.syntax import SyntaxVerifier
from ooda.verifiers.tests_stage import TestsVerifier


def write(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


TESTS = """\
    import pytest
    from calc import add

    def test_add():
        assert add(2, 3) == 5, "add is wrong"

    @pytest.mark.parametrize("a, b", [(1, 1), (2, 3)])
    def test_param(a, b):
        assert add(a, b) == a + b

    class TestGroup:
        class TestInner:
            def test_inner(self):
                assert add(0, 0) == 0

        def test_method(self):
            assert add(1, 0) == 1

    def test_skipped():
        pytest.skip("not today")

    @pytest.mark.xfail(reason="known")
    def test_xfail():
        assert add(1, 1) == 3
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write(
        tmp_path / "repo",
        {
            "calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n",
            "tests/test_calc.py": TESTS,
        },
    )


def ids(*names: str) -> list[str]:
    return [f"tests/test_calc.py::{n}" for n in names]


def pytest_check(
    repo: Path, f2p: Sequence[str], p2p: Sequence[str] = (), timeout: float = 30.0,
    verdict_only: bool = False,
) -> VerifierResult:
    check = CheckSpec(
        changed_files=[], fail_to_pass=list(f2p), pass_to_pass=list(p2p), timeout_s=timeout,
        verdict_only=verdict_only,
    )
    return TestsVerifier().verify(LocalSandbox(repo), check)


# --------------------------------------------------------------------------- syntax


def test_syntax_reports_file_and_line(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"good.py": "x = 1\n", "pkg/bad.py": "x = 1\ndef f(:\n    pass\n", "notes.txt": "def (\n"},
    )
    check = CheckSpec(changed_files=["good.py", "pkg/bad.py", "notes.txt", "gone.py"])
    result = SyntaxVerifier().verify(LocalSandbox(tmp_path), check)
    assert result.status == "failed"
    assert "pkg/bad.py:2:" in result.summary and "SyntaxError" in result.summary
    assert "good.py" not in result.summary.replace("pkg/bad.py", "")
    ok = SyntaxVerifier().verify(LocalSandbox(tmp_path), CheckSpec(changed_files=["good.py"]))
    assert ok.status == "passed" and ok.summary == ""


# --------------------------------------------------------------------------- ruff and mypy


def base_and_candidate(
    tmp_path: Path, base: str, candidate: str
) -> tuple[LocalSandbox, LocalSandbox]:
    return (
        LocalSandbox(write(tmp_path / "base", {"pkg/m.py": base})),
        LocalSandbox(write(tmp_path / "cand", {"pkg/m.py": candidate})),
    )


def test_ruff_counts_only_new_diagnostics(tmp_path: Path) -> None:
    base, cand = base_and_candidate(
        tmp_path,
        "import os\n\n\ndef f() -> int:\n    return 1\n",
        "import sys\n\nimport os\n\n\ndef f() -> int:\n    return 2\n",
    )
    ruff = RuffVerifier()
    check = CheckSpec(changed_files=["pkg/m.py"])
    check.baseline["ruff"] = ruff.baseline(base, check)
    result = ruff.verify(cand, check)
    assert result.status == "failed"
    assert "pkg/m.py:1:8: F401" in result.summary and "`sys`" in result.summary
    assert "`os`" not in result.summary  # pre-existing, moved two lines down: not counted
    assert "1 already present" in result.summary


def test_ruff_passes_when_only_old_diagnostics_remain(tmp_path: Path) -> None:
    base, cand = base_and_candidate(tmp_path, "import os\nx = 1\n", "\nimport os\nx = 2\n")
    ruff = RuffVerifier()
    check = CheckSpec(changed_files=["pkg/m.py", "README.md"])
    check.baseline["ruff"] = ruff.baseline(base, check)
    assert ruff.verify(cand, check).status == "passed"
    unbased = ruff.verify(cand, CheckSpec(changed_files=["pkg/m.py"]))
    assert unbased.status == "failed"  # without a baseline everything counts


def test_mypy_counts_only_new_errors(tmp_path: Path) -> None:
    base, cand = base_and_candidate(
        tmp_path,
        'def f() -> int:\n    return "x"\n',
        'def f() -> int:\n    return "x"\n\n\ndef g() -> str:\n    return 1\n',
    )
    mypy = MypyVerifier()
    check = CheckSpec(changed_files=["pkg/m.py"])
    check.baseline["mypy"] = mypy.baseline(base, check)
    assert check.baseline["mypy"].files["pkg/m.py"]  # type: ignore[attr-defined]
    result = mypy.verify(cand, check)
    assert result.status == "failed", result.log
    assert "pkg/m.py:6:" in result.summary and "return-value" in result.summary
    assert "pkg/m.py:2:" not in result.summary
    fixed = write(tmp_path / "fixed", {"pkg/m.py": 'def f() -> int:\n    return "x"\n\n\nY = 1\n'})
    assert mypy.verify(LocalSandbox(fixed), check).status == "passed"


def test_mypy_and_ruff_skip_non_python_changes(tmp_path: Path) -> None:
    write(tmp_path, {"data.json": "{}"})
    check = CheckSpec(changed_files=["data.json", "deleted.py"])
    assert MypyVerifier().verify(LocalSandbox(tmp_path), check).status == "passed"
    assert RuffVerifier().verify(LocalSandbox(tmp_path), check).status == "passed"


def test_new_diagnostics_is_a_multiset_difference() -> None:
    def d(line: int, msg: str = "Name `x` is not defined") -> Diagnostic:
        return Diagnostic("m.py", line, 1, "F821", msg)

    base = Baseline(files={"m.py": [d(1).key]})
    assert new_diagnostics([d(5), d(9)], base) == [d(9)]
    assert new_diagnostics([d(5)], Baseline(failed={"m.py": "crashed"})) == []


# --------------------------------------------------------------------------- pytest


def test_pytest_passes_required_ids_including_params_and_classes(repo: Path) -> None:
    result = pytest_check(repo, ids("test_add", "test_param"), ["tests/test_calc.py::TestGroup"])
    assert result.status == "passed", result.summary
    outcomes = result.details["outcomes"]
    assert isinstance(outcomes, dict)
    assert outcomes["tests/test_calc.py::test_param[2-3]"] == "passed"
    assert outcomes["tests/test_calc.py::TestGroup::TestInner::test_inner"] == "passed"
    assert outcomes["tests/test_calc.py::TestGroup::test_method"] == "passed"


def test_pytest_failure_summary_names_the_test_and_the_assertion(repo: Path) -> None:
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a - b\n")
    result = pytest_check(repo, ids("test_add", "test_param[1-1]"), ids("TestGroup::test_method"))
    assert result.status == "failed"
    assert "FAILED tests/test_calc.py::test_add" in result.summary
    assert "add is wrong" in result.summary
    assert "test_param[1-1]" in result.summary
    assert "test_method" not in result.summary  # 1 - 0 == 1 still passes
    assert len(result.summary) <= 2000


def test_a_verdict_only_run_ends_at_its_first_failure(repo: Path) -> None:
    """With only the verdict needed (-x), the guard ends the run right after the first failure
    (guard/early.py): unsigned, graded from the JUnit report written then, and failed."""
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a - b\n")
    result = pytest_check(repo, ids("test_add", "test_param[1-1]"), ids("TestGroup::test_method"),
                          verdict_only=True)
    assert result.status == "failed"
    assert "FAILED tests/test_calc.py::test_add" in result.summary
    assert "add is wrong" in result.summary
    assert "stopped at the first failure (tests/test_calc.py::test_add)" in result.log
    assert "record of the run is missing" not in result.summary
    outcomes = result.details["outcomes"]
    assert isinstance(outcomes, dict)
    assert outcomes == {"tests/test_calc.py::test_add": "failed"}  # nothing ran after it
    # the hidden test files the candidate's code read by then are said, as in a signed record
    (repo / "calc.py").write_text(
        "def add(a: int, b: int) -> int:\n"
        "    open('tests/test_calc.py').read()\n"
        "    return a - b\n"
    )
    run = run_pytest_ids(LocalSandbox(repo), ids("test_add", "test_param"), 30.0, ["-x"],
                         watched=Watched(changed_files=["calc.py"],
                                         hidden_files=["tests/test_calc.py"]))
    assert run.stopped_at == "tests/test_calc.py::test_add"
    assert run.hidden_reads == ["tests/test_calc.py"]
    assert not run.tampered
    # the code under test ending the process itself is still a run without a record
    (repo / "calc.py").write_text(
        "import os\n\ndef add(a: int, b: int) -> int:\n    os._exit(1)\n"
    )
    result = pytest_check(repo, ids("test_add"), verdict_only=True)
    assert result.status == "failed"
    assert "stopped at the first failure" not in result.log


def test_a_run_stopped_early_is_never_judged_passed() -> None:
    """Whoever wrote the early stop's marker (the code under test can), such a run only fails,
    even where exit code 1 is otherwise accepted (whole test files, as SWE-bench runs them)."""
    run = TestRun(outcomes={"t.py::test_a": "passed", "t.py::test_other": "failed"},
                  exit_code=1, report_found=True, stopped_at="t.py::test_other")

    class Forged:
        kind = "pytest"
        id_format = "path::name"
        exit_status_checked = True
        stops_at_first_failure = True

        def run(self, sandbox: Sandbox, request: object) -> TestRun:
            return dataclasses.replace(run)

    check = CheckSpec(changed_files=[], fail_to_pass=["t.py::test_a"], verdict_only=True,
                      whole_files=True)
    verifier = TestsVerifier(Forged())  # type: ignore[arg-type]
    result = verifier.verify(LocalSandbox(Path(".")), check)
    assert result.status == "failed"
    assert "without the guard's record" in result.summary
    run.stopped_at = None  # the same run, signed: the control
    assert verifier.verify(LocalSandbox(Path(".")), check).status == "passed"


@pytest.mark.parametrize(
    ("test_id", "word"),
    [
        ("tests/test_calc.py::test_skipped", "SKIPPED"),
        ("tests/test_calc.py::test_xfail", "XFAILED"),
        ("tests/test_calc.py::test_nonexistent", "MISSING"),
        ("tests/test_nothing.py", "MISSING"),
    ],
)
def test_skipped_xfail_and_missing_tests_fail(repo: Path, test_id: str, word: str) -> None:
    result = pytest_check(repo, ids("test_add"), [test_id])
    assert result.status == "failed"
    assert f"{word} {test_id}" in result.summary
    assert "test_add" not in result.summary  # the existing test still ran and passed


def test_a_file_id_means_all_its_tests(repo: Path) -> None:
    result = pytest_check(repo, ["tests/test_calc.py"])
    assert result.status == "failed"  # it holds a skipped and an xfail test
    (repo / "tests" / "test_ok.py").write_text("def test_one():\n    pass\n")
    assert pytest_check(repo, ["tests/test_ok.py"]).status == "passed"
    (repo / "tests" / "test_empty.py").write_text("X = 1\n")
    assert pytest_check(repo, ["tests/test_empty.py"]).status == "failed"


def test_collection_errors_are_reported(repo: Path) -> None:
    (repo / "tests" / "test_broken.py").write_text(
        "import no_such_module\n\ndef test_a():\n    pass\n"
    )
    result = pytest_check(repo, ["tests/test_broken.py::test_a"], ids("test_add"))
    assert result.status == "failed"
    assert "no_such_module" in result.summary
    assert "test_add" not in result.summary


def test_fake_output_without_a_report_fails(repo: Path) -> None:
    (repo / "calc.py").write_text(
        "import os\nprint('===== 5 passed in 0.01s =====')\nos._exit(0)\n"
    )
    result = pytest_check(repo, ids("test_add"))
    assert result.status == "failed"
    assert "no test report" in result.summary


def test_exit_code_must_agree_with_the_report(repo: Path) -> None:
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    (repo / "conftest.py").write_text(
        "def pytest_sessionfinish(session):\n    session.exitstatus = 3\n"
    )
    result = pytest_check(repo, ids("test_add"))
    assert result.status == "failed"
    assert "runner exit code disagrees" in result.summary
    # ending the process once the report is written leaves no record of the run
    (repo / "conftest.py").write_text(
        "import os\n\ndef pytest_unconfigure(config):\n    os._exit(0)\n"
    )
    result = pytest_check(repo, ids("test_add"))
    assert result.status == "failed"
    assert "record of the run is missing" in result.summary


def test_atexit_handlers_of_the_code_under_test_never_run(repo: Path) -> None:
    (repo / "calc.py").write_text(
        "import atexit, os\natexit.register(lambda: os._exit(3))\n\n\n"
        "def add(a: int, b: int) -> int:\n    return a + b\n"
    )
    assert pytest_check(repo, ids("test_add")).status == "passed"


def test_a_hanging_test_times_out(repo: Path) -> None:
    (repo / "tests" / "test_hang.py").write_text(
        "import time\n\ndef test_h():\n    time.sleep(60)\n"
    )
    start = time.monotonic()
    result = pytest_check(repo, ["tests/test_hang.py::test_h"], timeout=2.0)
    assert result.status == "timeout"
    assert time.monotonic() - start < 10


def test_a_planted_report_location_is_cleared(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    (repo / ".ooda").symlink_to(elsewhere)
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return 0\n")
    result = pytest_check(repo, ids("test_add"))
    assert result.status == "failed" and "FAILED" in result.summary
    assert (elsewhere / "keep.txt").read_text() == "keep"
    assert not (repo / ".ooda").exists()


def test_plain_test_command_modes(repo: Path) -> None:
    sandbox = LocalSandbox(repo)
    cmd = CheckSpec(
        changed_files=[], test_cmd="python -m pytest tests/test_calc.py -k 'add or param'"
    )
    assert TestsVerifier().verify(sandbox, cmd).status == "passed"
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return 0\n")
    failed = TestsVerifier().verify(sandbox, cmd)
    assert failed.status == "failed" and "test_add" in failed.summary
    for shell in ("test -f calc.py && echo fine", "python -m pytest -q && true"):
        result = TestsVerifier().verify(sandbox, CheckSpec(changed_files=[], test_cmd=shell))
        assert result.status == "error" and "exit status alone" in result.summary


def test_pytest_command_parsing() -> None:
    assert pytest_command("pytest -x tests") == (["-x", "tests"], {})
    assert pytest_command("PYTHONPATH=src python3 -m pytest --junitxml=o.xml t.py") == (
        ["t.py"],
        {"PYTHONPATH": "src"},
    )
    assert pytest_command("make test") is None
    assert pytest_command("pytest tests && echo ok") is None


def test_run_tests_derives_lists_on_the_base(repo: Path) -> None:
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a * b\n")
    outcomes = run_tests(LocalSandbox(repo), ["tests/test_calc.py", "tests/test_calc.py::nope"], 30)
    assert outcomes["tests/test_calc.py::test_param[2-3]"] == "failed"
    assert outcomes["tests/test_calc.py::test_add"] == "failed"
    assert outcomes["tests/test_calc.py::TestGroup::TestInner::test_inner"] == "passed"
    assert outcomes["tests/test_calc.py::test_skipped"] == "skipped"
    assert outcomes["tests/test_calc.py::test_xfail"] == "xfailed"
    assert outcomes["tests/test_calc.py::nope"] == "missing"
    failing, passing = split_outcomes(outcomes)
    assert passing == ["tests/test_calc.py::TestGroup::TestInner::test_inner"]
    assert "tests/test_calc.py::test_add" in failing and "tests/test_calc.py::nope" in failing
    with pytest.raises(ValueError):
        run_tests(LocalSandbox(repo), "make test", 30)


def test_run_tests_raises_when_no_report(repo: Path) -> None:
    (repo / "calc.py").write_text("import os\nos._exit(0)\n")
    with pytest.raises(TestRunError):
        run_tests(LocalSandbox(repo), ids("test_add"), 30)


def test_match_id() -> None:
    nodes = ["a/t.py::f[1]", "a/t.py::f[2]", "a/t.py::fx", "a/t.py::C::m", "a/u.py", "b/t.py::g"]
    assert match_id("a/t.py::f", nodes) == ["a/t.py::f[1]", "a/t.py::f[2]"]
    assert match_id("a/t.py::f[2]", nodes) == ["a/t.py::f[2]"]
    assert match_id("a/t.py::C", nodes) == ["a/t.py::C::m"]
    assert match_id("./a/t.py", nodes) == nodes[:4]
    assert match_id("a", nodes) == nodes[:5]
    assert match_id("a/u.py::h", nodes) == ["a/u.py"]  # its file failed to collect
    assert match_id("c/t.py::g", nodes) == []


# --------------------------------------------------------------------------- cascade


class Stage:
    after_tests = False

    def __init__(self, name: str, status: str = "passed", error: Exception | None = None) -> None:
        self.name = name
        self.status = status
        self.error = error
        self.seen_timeout: float | None = None

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        self.seen_timeout = check.timeout_s
        if self.error:
            raise self.error
        return VerifierResult(
            self.name, self.status, 0.01, "" if self.status == "passed" else "bad"
        )  # type: ignore[arg-type]


class NoSandbox:
    backend = "none"
    workspace = Path("/nonexistent")
    workdir = "/nonexistent"

    def run(
        self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None
    ) -> ExecResult:
        raise AssertionError("not used")

    def close(self) -> None:
        pass


def test_cascade_stops_at_the_first_failure() -> None:
    stages = [Stage("a"), Stage("b", "skipped"), Stage("c", "failed"), Stage("d")]
    results = run_cascade(NoSandbox(), CheckSpec(changed_files=[]), stages)
    assert [(r.name, r.status) for r in results] == [
        ("a", "passed"),
        ("b", "skipped"),
        ("c", "failed"),
    ]
    assert stages[3].seen_timeout is None


def test_cascade_deadline_crash_and_infra_errors() -> None:
    check = CheckSpec(changed_files=[], timeout_s=60)
    late = run_cascade(NoSandbox(), check, [Stage("a")], deadline=time.monotonic() - 1)
    assert [(r.name, r.status) for r in late] == [("a", "timeout")]
    stage = Stage("a")
    run_cascade(NoSandbox(), check, [stage], deadline=time.monotonic() + 5)
    assert stage.seen_timeout is not None and stage.seen_timeout <= 5
    crashed = run_cascade(NoSandbox(), check, [Stage("a", error=KeyError("k")), Stage("b")])
    assert [(r.name, r.status) for r in crashed] == [("a", "error")]
    assert "KeyError" in crashed[0].summary and "Traceback" in crashed[0].log
    with pytest.raises(InfraError):
        run_cascade(NoSandbox(), check, [Stage("a", error=InfraError("engine gone"))])


def test_default_verifiers_order() -> None:
    names = [v.name for v in default_verifiers(True, True)]
    assert names == ["syntax", "tampering", "ruff", "pytest", "security", "mypy"]
    assert [v.name for v in default_verifiers(False, False, False)] == [
        "syntax",
        "tampering",
        "pytest",
    ]


def test_full_cascade_on_a_real_repo(repo: Path, tmp_path: Path) -> None:
    base = LocalSandbox(Path(shutil.copytree(repo, tmp_path / "base")))
    (repo / "calc.py").write_text(
        "import os\n\ndef add(a: int, b: int) -> int:\n    return a + b\n"
    )
    check = CheckSpec(changed_files=["calc.py"], fail_to_pass=ids("test_add"), timeout_s=30)
    check.baseline["ruff"] = RuffVerifier().baseline(base, check)
    results = run_cascade(LocalSandbox(repo), check, default_verifiers(True, False))
    assert [(r.name, r.status) for r in results] == [
        ("syntax", "passed"),
        ("tampering", "passed"),
        ("ruff", "failed"),
    ]
    assert "F401" in results[-1].summary


def test_mypy_that_cannot_run_on_the_base_either_is_skipped(tmp_path: Path) -> None:
    config = {"mypy.ini": "[mypy]\nplugins = no_such_plugin_module\n"}
    base = LocalSandbox(write(tmp_path / "base", {**config, "m.py": "x = 1\n"}))
    cand = LocalSandbox(write(tmp_path / "cand", {**config, "m.py": "x = 2\n"}))
    mypy = MypyVerifier()
    check = CheckSpec(changed_files=["m.py"])
    check.baseline["mypy"] = mypy.baseline(base, check)
    assert check.baseline["mypy"].failed  # type: ignore[attr-defined]
    assert mypy.verify(cand, check).status == "skipped"
    check.baseline["mypy"] = Baseline(files={"m.py": []})
    assert mypy.verify(cand, check).status == "failed"
    assert mypy.verify(cand, CheckSpec(changed_files=["m.py"])).status == "error"


def test_tool_paths_are_made_repo_relative() -> None:
    from ooda.verifiers import relative_to_workdir

    assert relative_to_workdir("/ws/pkg/m.py", "/ws") == "pkg/m.py"
    assert relative_to_workdir("./pkg/m.py", "/ws") == "pkg/m.py"
    assert relative_to_workdir("/private/ws/pkg/m.py", "/ws", ["m.py", "pkg/m.py"]) == "pkg/m.py"


def test_the_workspace_cannot_shadow_the_toolchain(repo: Path) -> None:
    """pytest imports `packaging` only when the config sets minversion, after the workspace is
    on sys.path: the guard imported it (and every other dependency of pytest) from the image
    first, so a `packaging.py` the candidate added, which ends the process with status 0,
    never runs. (One of the repository's own would be imported: the repository is that
    package.)"""
    write(
        repo,
        {
            "pytest.ini": "[pytest]\nminversion = 7.0\n",
            "packaging.py": "import os\nos._exit(0)\n",
            "pluggy.py": "import os\nos._exit(0)\n",
            "calc.py": "def add(a: int, b: int) -> int:\n    return a - b\n",
        },
    )
    check = CheckSpec(
        changed_files=["packaging.py", "pluggy.py", "calc.py"], fail_to_pass=ids("test_add")
    )
    result = TestsVerifier().verify(LocalSandbox(repo), check)
    assert result.status == "failed" and "FAILED tests/test_calc.py::test_add" in result.summary


def test_shell_test_commands_are_refused_by_the_loader_too() -> None:
    from ooda.tasks.loader import check_test_cmd

    check_test_cmd("PYTHONPATH=src python3 -m pytest -q tests", "task.toml")
    for cmd in ("pytest -q tests && true", "make test", "pytest | tee log"):
        with pytest.raises(UsageError, match="exit status alone"):
            check_test_cmd(cmd, "task.toml")
