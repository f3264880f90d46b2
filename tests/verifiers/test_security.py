"""The security stage: ruff `S` findings and the secret scan, counted against the base; the
task.toml options that set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import CheckSpec
from ooda.agent.sandbox.local import LocalSandbox
from ooda.tasks.loader import load_task
from ooda.verifiers.security_check import SecurityVerifier, scan_secrets

BASE = "import subprocess\n\n\ndef run(cmd: str) -> str:\n    return cmd\n"
SHELL = (
    "import subprocess\n\n\ndef run(cmd: str) -> str:\n"
    "    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout\n"
)
KEY = 'AWS_KEY = "AKIAIOSFODNN7QWERTYZ"\n'


def judge(tmp_path: Path, base: str, candidate: str, **kw: object) -> tuple[str, str]:
    base_dir, cand_dir = tmp_path / "base", tmp_path / "cand"
    for where, text in ((base_dir, base), (cand_dir, candidate)):
        where.mkdir()
        (where / "tool.py").write_text(text)
    stage = SecurityVerifier(**kw)  # type: ignore[arg-type]
    check = CheckSpec(changed_files=["tool.py"], timeout_s=30)
    check.baseline["security"] = stage.baseline(LocalSandbox(base_dir), check)
    result = stage.verify(LocalSandbox(cand_dir), check)
    return result.status, result.summary


def test_shell_true_on_an_argument_fails(tmp_path: Path) -> None:
    status, summary = judge(tmp_path, BASE, SHELL)
    assert status == "failed"
    assert "S602" in summary and "tool.py:5" in summary


def test_aws_key_literal_fails_without_repeating_it(tmp_path: Path) -> None:
    status, summary = judge(tmp_path, BASE, BASE + KEY)
    assert status == "failed"
    assert "aws-access-key-id" in summary and "AKIA" not in summary


def test_only_what_the_candidate_adds_counts(tmp_path: Path) -> None:
    assert judge(tmp_path, SHELL + KEY, SHELL + KEY + "\nX = 1\n")[0] == "passed"


def test_rules_can_be_narrowed(tmp_path: Path) -> None:
    assert judge(tmp_path, BASE, SHELL, rules=["S506"])[0] == "passed"


@pytest.mark.parametrize(
    "line",
    [
        'password = "changeme-please"',
        'api_key = os.environ["API_KEY"]',
        'token = "short"',
        'SECRET_KEY = "your-secret-key-here"',
        "digest = '5d41402abc4b2a76b9719d911017c592'",
    ],
)
def test_no_secret_in_ordinary_code(line: str) -> None:
    assert scan_secrets("a.py", line) == []


@pytest.mark.parametrize(
    "line",
    [
        'db_password = "hunter2-and-more"',
        "-----BEGIN RSA PRIVATE KEY-----",
        'GH = "ghp_' + "a" * 36 + '"',
    ],
)
def test_secrets_found(line: str) -> None:
    assert [d.code for d in scan_secrets("a.py", line)] == ["SECRET"]


def _task(tmp_path: Path, table: str) -> Path:
    (tmp_path / "repo").mkdir()
    (tmp_path / "task.toml").write_text(
        f'id = "t"\nstatement = "s"\nrepo = "repo"\ntest_cmd = "pytest -q"\n{table}'
    )
    return tmp_path


def test_task_toml_sets_the_stage(tmp_path: Path) -> None:
    task = load_task(_task(tmp_path, '[verifiers]\nsecurity = false\nsecurity_rules = ["S6"]\n'))
    assert task.verifiers.security is False and task.verifiers.security_rules == ["S6"]


def test_task_toml_rejects_other_rule_codes(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a ruff S rule"):
        load_task(_task(tmp_path, '[verifiers]\nsecurity_rules = ["E501"]\n'))


def test_a_secret_in_a_file_that_is_not_python_fails(tmp_path: Path) -> None:
    """The secret scan reads every changed file (the watchdog halts on these too)."""
    base_dir, cand_dir = tmp_path / "base", tmp_path / "cand"
    for where in (base_dir, cand_dir):
        where.mkdir()
        (where / "tool.py").write_text(BASE)
    (cand_dir / "deploy.pem").write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n")
    stage = SecurityVerifier()
    check = CheckSpec(changed_files=["deploy.pem"], timeout_s=30)
    check.baseline["security"] = stage.baseline(LocalSandbox(base_dir), check)
    result = stage.verify(LocalSandbox(cand_dir), check)
    assert result.status == "failed" and "private-key" in result.summary
