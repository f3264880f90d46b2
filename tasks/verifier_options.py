"""The `[verifiers]` table of task.toml: which stages run (an on/off key per optional stage of
agent/contracts/stages.py: ruff, mypy, security; the security stage's rules) and their timeout,
checked into a `VerifierOptions`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.stages import task_keys
from ooda.tasks.fields import check_keys, type_error


@dataclass
class VerifierOptions:
    """The `[verifiers]` table of task.toml."""

    ruff: bool = True
    """Run ruff (baseline-relative: only new diagnostics count)."""
    mypy: bool = True
    """Run mypy (baseline-relative)."""
    security: bool = True
    """Run the security stage (ruff `S` rules and a secret scan; baseline-relative)."""
    security_rules: list[str] | None = None
    """The ruff `S` rules it checks (None: verifiers/security_check.RULES; [] keeps only the
    secret scan)."""
    timeout_s: float | None = None
    """Wall-clock limit for each verifier run; None: ooda sets it from the unpatched run's
    duration (agent/verify/plan.py)."""
    off: frozenset[str] = field(default_factory=frozenset)
    """The keys of the other optional stages (agent/contracts/stages.py) turned off."""

    def on(self, key: str) -> bool:
        """Whether the optional stage with task key `key` is on."""
        value = getattr(self, key, None)
        return value if isinstance(value, bool) else key not in self.off

    def switch(self, key: str, value: bool) -> None:
        """Turn the optional stage with task key `key` on or off."""
        if isinstance(getattr(self, key, None), bool):
            setattr(self, key, value)
        else:
            self.off = self.off - {key} if value else self.off | {key}


def verifier_keys() -> tuple[str, ...]:
    """Keys allowed in the `[verifiers]` table."""
    return (*task_keys(), "security_rules", "timeout_s")


def verifier_options(table: object, where: str) -> VerifierOptions:
    options = VerifierOptions()
    if table is None:
        return options
    if not isinstance(table, dict):
        raise type_error("verifiers", "a table", table, where)
    check_keys(table, verifier_keys(), f"{where} [verifiers]")
    for key in task_keys():
        if key in table:
            value = table[key]
            if not isinstance(value, bool):
                raise type_error(f"verifiers.{key}", "true or false", value, where)
            options.switch(key, value)
    if "timeout_s" in table:
        value = table["timeout_s"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise type_error("verifiers.timeout_s", "a number of seconds", value, where)
        options.timeout_s = float(value)
    if "security_rules" in table:
        options.security_rules = _security_rules(table["security_rules"], where)
    check_verifier_values(options, where)
    return options


_RULE_CODE = re.compile(r"S\d{0,3}")
"""A ruff `S` rule code or prefix (S, S6, S602)."""


def _security_rules(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise type_error("verifiers.security_rules", "a list of rule codes", value, where)
    bad = [v for v in value if not _RULE_CODE.fullmatch(v)]
    if bad:
        raise UsageError(
            f"{where}: verifiers.security_rules: {bad[0]!r} is not a ruff S rule code "
            "(like S602 or S6)"
        )
    return list(value)


def check_verifier_values(options: VerifierOptions, where: str) -> None:
    t = options.timeout_s
    if t is not None and (not t > 0 or t == float("inf")):
        raise UsageError(f"{where}: verifiers.timeout_s must be a positive number, not {t}")
