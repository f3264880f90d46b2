"""Stream check: the security watchdog. Halts an answer at the first security finding in a
line it adds (verifiers/watchdog/) and asks for the candidate to be corrected at once: the
stop carries the answer up to that line (`resume`) and the finding (rule, line, why, the safe
alternative) as the next user turn, so the same candidate answers again in the same round
(agent/core/sources/llm.py) instead of streaming to its end and failing the security stage
after the tests.

On when the task's security stage is (task.toml `[verifiers] security`), with the same ruff
rules (`security_rules`); off with `--no-watchdog`.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ooda.agent.core.checks.base import Stop, StreamContext
from ooda.agent.core.repo_view import list_repo
from ooda.agent.edits.base import ReadFile
from ooda.verifiers.security_check import RULES
from ooda.verifiers.watchdog import BaseCode, Watchdog, rules_for


class SecurityWatch:
    """One answer's watchdog, as a stream check."""

    def __init__(self, watchdog: Watchdog) -> None:
        self.watchdog = watchdog

    def observe(self, text: str) -> Stop | None:
        finding = self.watchdog.observe(text)
        if finding is None:
            return None
        where = f" in {finding.path}" if finding.path else ""
        return Stop(f"halted while streaming: {finding.rule}{where}: {finding.line}",
                    "security", feedback=finding.feedback(), resume=text[: finding.end],
                    by=finding.rule)


def start(context: StreamContext) -> SecurityWatch | None:
    options = context.task.verifiers
    if context.options.no_watchdog or not options.security:
        return None
    rules = rules_for(options.security_rules, RULES)
    return SecurityWatch(Watchdog(_base(context.read_base, context.task.repo), rules))


@functools.lru_cache(maxsize=4)
def _base(read_base: ReadFile, repo: Path) -> BaseCode:
    """The unpatched repository's lines, read once per run and shared by its answers (a run's
    `read_base` is one object's bound method: equal for all of its requests)."""

    def python_files() -> list[str]:
        return [p for p in list_repo(repo) if p.endswith(".py")]

    return BaseCode(read_base, python_files)
