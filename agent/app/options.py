"""RunOptions: everything a run is told besides the task, as the option groups of
agent/contracts/options.py (model, loop, escalation, sandbox, environment, stages) plus where
its records go. Each part of ooda takes its own group; nothing copies an option from one
structure to another by hand.

Also here: the options that change results (an evaluation's fingerprint), read from the
groups' declarations, and the models a run opens (the model and the one it escalates to).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import (
    META,
    EnvironmentOptions,
    EscalationOptions,
    LoopOptions,
    ModelOptions,
    SandboxOptions,
    StageOptions,
    option_fields,
    record_key,
)

_GROUP_FIELDS = ("model", "loop", "escalation", "sandbox", "environment", "stages")


@dataclass(frozen=True)
class RunOptions:
    """Everything `ooda run` (and each task of `ooda eval`, and `ooda ci`) is told besides the
    task itself, one group per part that consumes it."""

    model: ModelOptions = field(default_factory=ModelOptions)
    loop: LoopOptions = field(default_factory=LoopOptions)
    escalation: EscalationOptions = field(default_factory=EscalationOptions)
    sandbox: SandboxOptions = field(default_factory=SandboxOptions)
    environment: EnvironmentOptions = field(default_factory=EnvironmentOptions)
    stages: StageOptions = field(default_factory=StageOptions)
    runs_dir: Path = Path("runs")
    """Where run directories go."""

    @classmethod
    def of(cls, **values: Any) -> RunOptions:
        """RunOptions from flat values named as on the command line or as the groups' fields
        (`model="m", samples=2, time_budget=60`); an unknown name is a TypeError."""
        groups: dict[str, dict[str, Any]] = {name: {} for name in _GROUP_FIELDS}
        names = _flat_names()
        rest: dict[str, Any] = {}
        for name, value in values.items():
            if name in names:
                group, field_name = names[name]
                groups[group][field_name] = value
            elif name == "runs_dir":
                rest[name] = value
            else:
                raise TypeError(f"RunOptions has no option {name!r}")
        built = {name: _group_type(name)(**kw) for name, kw in groups.items()}
        return cls(**built, **rest)

    def replace(self, **values: Any) -> RunOptions:
        """A copy with some options changed, named as in `of`."""
        names = _flat_names()
        changed: dict[str, Any] = {}
        for name, value in values.items():
            if name == "runs_dir":
                changed[name] = value
                continue
            if name not in names:
                raise TypeError(f"RunOptions has no option {name!r}")
            group, field_name = names[name]
            current = changed.get(group, getattr(self, group))
            changed[group] = dataclasses.replace(current, **{field_name: value})
        return dataclasses.replace(self, **changed)

    def checked(self) -> RunOptions:
        """These options checked (UsageError, one line, for an impossible value), with
        `--model FAST,STRONG` read as the model and the one it escalates to, and
        `--model mutate,FAST[,STRONG]` as a first source before them (`--first`)."""
        from ooda.agent.core.sources import FIRST_SOURCES  # (not at start-up: ~0.1 s)

        options = self
        names = [n.strip() for n in self.model.name.split(",")] if self.model.name else [""]
        if len(names) > 1 and names[0] in FIRST_SOURCES:  # mutate,FAST[,STRONG]
            if self.escalation.first and self.escalation.first != names[0]:
                raise UsageError(f"--model {self.model.name!r} and --first name different "
                                 "sources")
            options = options.replace(first=names[0], model=",".join(names[1:]))
            names = names[1:]
        if options.escalation.first and options.escalation.first not in FIRST_SOURCES:
            raise UsageError(f"--first {options.escalation.first!r}: the source tried first "
                             f"is one of {', '.join(sorted(FIRST_SOURCES))}")
        if len(names) > 2 or (len(names) == 2 and not all(names)):
            raise UsageError(f"--model {self.model.name!r}: give one model, or two as "
                             "FAST,STRONG (after a first source: mutate,FAST,STRONG)")
        if len(names) == 2:
            if self.escalation.escalate_to and self.escalation.escalate_to != names[1]:
                raise UsageError("--model FAST,STRONG and --escalate-to name different models")
            options = options.replace(model=names[0], escalate_to=names[1])
        options.loop.check()
        options.sandbox.check()
        options.environment.check()
        options.stages.check()
        options.model.check()
        options.escalation.check(options.model.name)
        return options

    def results(self) -> dict[str, Any]:
        """The options that change results, as plain JSON values under their record names;
        so that earlier evaluations still resume, the escalation ones only when there is a
        model to escalate to, and the options added since (`newer`) only away from their
        default."""
        found: dict[str, Any] = {}
        for group_name in _GROUP_FIELDS:
            group = getattr(self, group_name)
            if group_name == "escalation" and self.escalation.escalate_to is None:
                continue
            for f, spec in option_fields(type(group)):
                value = getattr(group, f.name)
                if spec.changes_results and not (spec.newer and value == f.default):
                    found[record_key(f)] = value
        return found

    def escalation_model(self) -> ModelOptions | None:
        """The model `escalation` escalates to, as the model registry opens it (None: no
        escalation): the same sampling, its own endpoint and prices."""
        esc = self.escalation
        if not esc.escalate_to:
            return None
        return dataclasses.replace(
            self.model, name=esc.escalate_to,
            base_url=esc.escalate_base_url or self.model.base_url,
            price_prompt=esc.escalate_price_prompt,
            price_completion=esc.escalate_price_completion,
            context_window=None,  # another model: its own window, learned
        )


def _group_type(name: str) -> type:
    return {"model": ModelOptions, "loop": LoopOptions, "escalation": EscalationOptions,
            "sandbox": SandboxOptions, "environment": EnvironmentOptions,
            "stages": StageOptions}[name]


def _flat_names() -> dict[str, tuple[str, str]]:
    """Every option's command-line name and field name -> (its group, its field)."""
    names: dict[str, tuple[str, str]] = {}
    for group_name in _GROUP_FIELDS:
        for f in fields(_group_type(group_name)):
            names[f.name] = (group_name, f.name)
            spec = f.metadata.get(META)
            if spec is not None and spec.name:
                names[spec.name] = (group_name, f.name)
    return names
