"""verifiers/pretest.py's wrapper, run by the host's own bash (no candidate code): the exports of
the pre-test commands reach the command it then becomes, the runner's own variables win over
them, and a command that fails or ends the shell is named in one line."""

from __future__ import annotations

import subprocess

from ooda.verifiers import pretest


def _run(commands: list[str], fixed: dict[str, str] | None = None) -> tuple[str, str]:
    argv, nonce = pretest.wrap(["bash", "-c", 'echo "$GREETING/$SETTING/$AUTOLOAD"'],
                               commands, fixed)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    output = done.stdout + done.stderr
    return output, pretest.failure(output, commands, nonce) or ""


def test_exports_reach_the_command_and_the_runner_keeps_its_own_variables() -> None:
    output, failed = _run(["export GREETING='hi there'", "SETTING=x; export SETTING",
                           "export AUTOLOAD=on"], {"AUTOLOAD": "off"})
    assert output.strip() == "hi there/x/off" and failed == ""


def test_a_failing_or_exiting_command_is_named_and_the_command_does_not_run() -> None:
    output, failed = _run(["export GREETING=hi", "ls /nonexistent/dir >/dev/null 2>&1", "true"])
    assert failed == ("the task's pre-test command 2 of 3 (ls /nonexistent/dir >/dev/null 2>&1) "
                      "failed with exit status 2")
    assert "hi/" not in output
    _, failed = _run(["exit 0"])
    assert failed == "the task's pre-test command 1 of 1 (exit 0) ended the shell"
    _, failed = _run(["if then"])  # a syntax error is the command's own failure
    assert "pre-test command 1 of 1 (if then) failed" in failed


def test_no_commands_leave_the_argv_alone() -> None:
    assert pretest.wrap(["python3", "-V"], []) == (["python3", "-V"], "")
