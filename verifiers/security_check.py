"""Security stage: what a candidate adds that nobody should merge unread, even when its tests
pass — a shell built from input, unsafe deserialisation, TLS checks turned off, SQL built by
formatting, a hard-coded credential.

Two sources, both baseline-relative (only findings the unpatched code did not have count):
- ruff's `S` rules (its port of bandit), run in the sandbox like the ruff stage (`--isolated`,
  `--ignore-noqa`, `python3 -P`), restricted to a curated set that flags dangerous calls, not
  style (no `assert`, `random`, `subprocess` without a shell, or `/tmp` paths): RULES;
- a secret scan of every changed file's text on the host (Python or not: a key in a `.pem`
  or `.env` file is as public as one in code) (read through agent.support.fstree,
  never executed): a small set of fixed token formats (security_rules.SECRET_PATTERNS) such as
  AWS access key ids, private key blocks and provider tokens, plus a keyword rule for a literal
  assigned to a name like `secret_key`. detect-secrets was evaluated and not chosen
  (docs/ESCALATION.md).

The stream watchdog (watchdog/) anticipates a subset of these findings while an answer
streams, from the same rules (security_rules.py); this stage stays the complete check.

A finding fails the candidate: it runs after the tests (`after_tests`), so a candidate that
fails only here passed them and makes the best parent for the next round, whose feedback names
the finding. A task turns the stage off or sets its rules in task.toml
(`[verifiers] security = false`, `security_rules = ["S602", ...]`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult
from ooda.agent.support import fstree
from ooda.verifiers import (
    PYTHON_SUFFIXES,
    Baseline,
    Diagnostic,
    changed_files,
    tool_baseline,
    tool_verdict,
)
from ooda.verifiers.ruff_check import run_ruff
from ooda.verifiers.security_rules import find_secret
from ooda.verifiers.settings import StageSettings

RULES: tuple[str, ...] = (
    "S102",  # exec
    "S301",  # pickle / dill / shelve loads of data
    "S302",  # marshal.loads
    "S306",  # tempfile.mktemp
    "S307",  # eval
    "S312",  # telnetlib
    "S321",  # ftplib
    "S323",  # ssl._create_unverified_context
    "S501",  # requests/httpx with verify=False
    "S502",  # ssl with an insecure protocol version
    "S503",  # an insecure protocol version as a default argument
    "S504",  # ssl.wrap_socket without a protocol version
    "S506",  # yaml.load without a safe loader
    "S507",  # paramiko AutoAddPolicy / WarningPolicy
    "S508",  # SNMP v1/v2
    "S602",  # subprocess with shell=True
    "S604",  # any call with shell=True
    "S605",  # os.system / os.popen (a shell)
    "S608",  # SQL built with formatting
    "S609",  # a shell wildcard in a command
    "S610",  # Django .extra()
    "S611",  # Django RawSQL
    "S701",  # jinja2 autoescape=False
    "S702",  # mako templates
)
"""The ruff `S` rules checked by default: calls that are dangerous wherever they appear."""

MAX_SCAN_BYTES = 2_000_000
"""Larger files are not secret-scanned (ruff still checks them)."""


def scan_secrets(path: str, text: str) -> list[Diagnostic]:
    """The secret-like literals in `text` (file `path`), the secret itself never repeated."""
    found: list[Diagnostic] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        hit = find_secret(line)  # one finding per line
        if hit is not None:
            kind, start, _ = hit
            message = f"possible hard-coded secret ({kind}); read it from the environment"
            found.append(Diagnostic(path, lineno, start + 1, "SECRET", message))
    return found


def run_security(
    sandbox: Sandbox, files: list[str], timeout_s: float, rules: Sequence[str] = RULES
) -> tuple[list[Diagnostic], str]:
    """Ruff's `S` findings (for `rules`) in the Python files of `files` and the secret scan's
    in all of them, with ruff's raw output; ToolFailure when ruff broke."""
    diags: list[Diagnostic] = []
    output = ""
    python = [p for p in files if p.endswith(PYTHON_SUFFIXES)]
    if rules and python:
        diags, output = run_ruff(sandbox, python, timeout_s, ",".join(rules))
    for path in files:
        try:  # never through a link, never from a FIFO or device
            data = fstree.read_regular(sandbox.workspace, path)
        except OSError:
            continue
        if len(data) <= MAX_SCAN_BYTES:
            diags += scan_secrets(path, data.decode("utf-8", "replace"))
    return diags, output


class SecurityVerifier:
    """Fails when the candidate adds a security finding the base code did not have."""

    name = "security"

    def __init__(self, rules: Sequence[str] | None = None) -> None:
        self.rules: tuple[str, ...] = RULES if rules is None else tuple(rules)

    def _run(
        self, sandbox: Sandbox, files: list[str], timeout_s: float
    ) -> tuple[list[Diagnostic], str]:
        return run_security(sandbox, files, timeout_s, self.rules)

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline:
        """The findings on the unpatched workspace for check.changed_files."""
        return tool_baseline(self._run, sandbox, check, changed_files)

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        def note(files: list[str]) -> str:
            return (
                "the tests pass, but this code adds the security problem(s) above: keep the "
                "fix and remove them (no shell built from input, no hard-coded credentials)"
            )

        return tool_verdict(self.name, self._run, sandbox, check, note, changed_files)


def stage(settings: StageSettings) -> SecurityVerifier:
    """This module's stage of the cascade (agent/contracts/stages.py)."""
    return SecurityVerifier(settings.security_rules)
