"""The verifier stages, in the order a candidate meets them: `STAGES`, one line per stage.

Everything that depends on the stages derives from this table: the cascade's order
(`CASCADE_ORDER`, which the loop also ranks failed attempts by: a later stage makes a better
parent), the stages judged on the host before any tool sees the candidate (`HOST_FIRST`), those
that run only once the tests passed, those judged against the unpatched code, their keys in
task.toml's `[verifiers]` table and their `--no-…` options, and the module that builds each one
(verifiers/cascade.py `build`: the module's `stage(settings)` function). A new stage is its
module in verifiers/ and its line here. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    """One stage of the cascade."""

    name: str
    """Its name in records (attempts.jsonl `verifiers`, the verdict's stage)."""
    module: str
    """The module whose `stage(settings) -> Verifier` builds it."""
    host: bool = False
    """Judged on the host from the candidate's files, before anything of it runs in a sandbox."""
    after_tests: bool = False
    """Runs only once the tests passed, on a fresh copy (no candidate code ran there)."""
    baseline: bool = False
    """Judged against the unpatched code: only what the candidate added counts."""
    task_key: str | None = None
    """Its on/off key in task.toml's `[verifiers]` (None: it always runs). A stage with a key
    runs one of ooda's tools, so it is off in an environment the task or the user chose unless
    the task turns it on (the environment holds the repository's tools, not ooda's)."""
    flag: str | None = None
    """The command-line option that turns it off (agent/contracts/options.py StageOptions)."""
    blind_only: bool = False
    """Runs only in a blind run (the model's reproduction tests)."""


STAGES: tuple[Stage, ...] = (
    Stage("syntax", "ooda.verifiers.syntax", host=True),
    Stage("tampering", "ooda.verifiers.tamper_check", host=True, baseline=True),
    Stage("ruff", "ooda.verifiers.ruff_check", baseline=True, task_key="ruff", flag="--no-ruff"),
    Stage("pytest", "ooda.verifiers.tests_stage"),
    Stage("security", "ooda.verifiers.security_check", after_tests=True, baseline=True,
          task_key="security"),
    Stage("mypy", "ooda.verifiers.mypy_check", after_tests=True, baseline=True,
          task_key="mypy", flag="--no-mypy"),
    Stage("repro", "ooda.verifiers.repro_check", after_tests=True, blind_only=True),
)
"""Every stage, in cascade order."""

CASCADE_ORDER: tuple[str, ...] = tuple(s.name for s in STAGES)
"""The stage names in the order a candidate meets them."""
HOST_FIRST: frozenset[str] = frozenset(s.name for s in STAGES if s.host)
"""The stages that judge the candidate's files on the host before any tool sees them in a
sandbox: nothing else of the candidate's is looked at, let alone run, before they passed."""


def task_keys() -> tuple[str, ...]:
    """The stages' on/off keys of task.toml's `[verifiers]` table."""
    return tuple(s.task_key for s in STAGES if s.task_key is not None)


def stage(name: str) -> Stage | None:
    """The stage called `name`, None when there is none."""
    return next((s for s in STAGES if s.name == name), None)


def runs(s: Stage, switched_on: bool, *, blind: bool) -> bool:
    """Whether stage `s` runs: an optional one when `switched_on` (its task key and option
    allow it), a blind-only one in a blind run, every other one always."""
    if s.blind_only:
        return blind
    return switched_on if s.task_key is not None else True
