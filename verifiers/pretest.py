"""A task's pre-test commands (task.toml `[environment.runner] pre_test`, SWE-bench's
eval_commands): shell commands run before every test run of the task, in the same shell that
then becomes the test command, so what they export reaches the tests and a service they start
in the background serves them.

`wrap` turns the test argv into `bash -c SCRIPT ooda-pre-test ARGV...`: the script `eval`s each
command in turn (exports and background jobs stay in this shell; no quoting of a command is
re-parsed by ooda) and then `exec`s ARGV, so the test process is the same one as before (the
guard still starts first, under the same environment). A command that fails, or that ends the
shell, makes the script print one marker line (with a per-run nonce) and stop before the tests:
`failure` reads that line back as a one-line reason. The sandbox kills every process when a
command ends, so a service started here never outlives its test run; the next run starts it
again.
"""

from __future__ import annotations

import re
import shlex
import uuid
from collections.abc import Mapping, Sequence

SHELL = "bash"
"""The harness runs eval_commands in bash; every Debian image has it."""
_MARKER = "ooda-pre-test-failed"


def wrap(
    argv: Sequence[str], commands: Sequence[str], fixed: Mapping[str, str] | None = None,
) -> tuple[list[str], str]:
    """(the argv that runs `commands` then `argv`, the nonce its failure line carries);
    `argv` unchanged (and no nonce) when there are no commands. The `fixed` variables are
    exported again after the commands, so none of them can undo what the runner sets (pytest's
    plugin autoload stays off)."""
    if not commands:
        return list(argv), ""
    nonce = uuid.uuid4().hex[:12]
    lines = [
        "ooda_step=0",
        f"trap 'printf \"\\n{_MARKER}-{nonce} %s %s\\n\" \"$ooda_step\" \"$?\" >&2' EXIT",
    ]
    for number, command in enumerate(commands, 1):
        lines.append(f"ooda_step={number}; eval {shlex.quote(command)} || exit $?")
    lines += [f"export {name}={shlex.quote(value)}" for name, value in (fixed or {}).items()]
    lines += ["trap - EXIT", 'exec "$@"']
    return [SHELL, "-c", "\n".join(lines), "ooda-pre-test", *argv], nonce


def failure(output: str, commands: Sequence[str], nonce: str) -> str | None:
    """One line saying which pre-test command failed and how (None: they all succeeded)."""
    if not nonce:
        return None
    found = re.findall(rf"^{_MARKER}-{nonce} (\d+) (\d+)$", output, re.MULTILINE)
    if not found:
        return None
    step, status = (int(value) for value in found[-1])
    if not 1 <= step <= len(commands):
        return f"the task's pre-test commands ended the shell (exit status {status})"
    command = " ".join(commands[step - 1].split())
    command = command if len(command) <= 160 else command[:157] + "..."
    how = f"failed with exit status {status}" if status else "ended the shell"
    return f"the task's pre-test command {step} of {len(commands)} ({command}) {how}"
