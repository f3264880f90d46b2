"""The task plan: how one task is judged, settled once and then frozen. Every command that
judges a task (`ooda verify`, `run`, `ci`, `eval`, `tasks validate`) makes it the same way,
with `make_plan` (agent/verify/prepare.py), and every part reads it; nothing changes a task in
place.

A plan holds, from the task and the user's choices (`--environment`, `--sandbox`, the stage
options): the environment its tests run in (parsed once into an EnvSpec, or ooda's image), the
line that says so, the test runner, the verifier stages that run, the tests (which ids; the
hidden test patch and its files, which exist nowhere the model can see: `hidden()`, and for a
blind run's loop `visible()`), and, once the unpatched code has been run (agent/verify/base.py), the facts about it:
which tests fail, which pass, which cannot be collected and why.

`draft_plan` makes the first part (no sandbox: it reads the repository's files); the facts
and the test lists derived from a test command come after the environment is built, in
`make_plan`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ooda.agent.contracts.options import EnvironmentOptions, SandboxOptions, StageOptions
from ooda.agent.contracts.stages import task_keys
from ooda.agent.sandbox.environments.spec import EnvSpec
from ooda.agent.support.env_numbers import positive_from_env
from ooda.agent.verify.workspace import patch_paths
from ooda.tasks.environment import environment_from_file
from ooda.tasks.hidden import HiddenTests, hidden_tests, visible_task
from ooda.tasks.loader import Task
from ooda.verifiers.runners import TestRunner, runner_for

BASE_LIMIT_S = 1800.0
"""How long the unpatched run may take when neither the user nor the task set a limit (the
SWE-bench harness's own per-instance timeout; OODA_BASE_TIMEOUT)."""
LIMIT_FLOOR_S = 60.0
"""The least a candidate's run is given when the limit comes from the unpatched run
(OODA_TIMEOUT_FLOOR)."""
LIMIT_FACTOR = 3.0
"""A candidate's run may take this many times the unpatched run (OODA_TIMEOUT_FACTOR): a
loaded machine, a slower correct fix."""


def _seconds(name: str, default: float) -> float:
    return positive_from_env(name, default, float, "a positive number of seconds")


def base_limit_s() -> float:
    """The unpatched run's limit when none was set."""
    return _seconds("OODA_BASE_TIMEOUT", BASE_LIMIT_S)


def candidate_limit_s(base_duration_s: float) -> float:
    """A candidate run's limit from the unpatched run's duration: the factor times it, never
    under the floor (whole seconds)."""
    factor = _seconds("OODA_TIMEOUT_FACTOR", LIMIT_FACTOR)
    return float(max(_seconds("OODA_TIMEOUT_FLOOR", LIMIT_FLOOR_S),
                     math.ceil(factor * base_duration_s)))


@dataclass(frozen=True)
class Stages:
    """Which verifier stages run, and how long each run may take."""

    ruff: bool = True
    mypy: bool = True
    security: bool = True
    security_rules: tuple[str, ...] | None = None
    """The ruff `S` rules the security stage checks (None: its default set)."""
    timeout_s: float = 60.0
    base_timeout_s: float | None = None
    """The unpatched run's limit when no limit was set (--verifier-timeout, the task's
    [verifiers] timeout_s): then a settled plan's timeout_s comes from that run's duration
    (until then it is the floor). None: the limit was set; the base runs with timeout_s."""

    @property
    def timeout_given(self) -> bool:
        """The user or the task set the limit."""
        return self.base_timeout_s is None

    @property
    def base_run_timeout_s(self) -> float:
        """How long the unpatched run may take."""
        return self.timeout_s if self.base_timeout_s is None else self.base_timeout_s
    off: frozenset[str] = frozenset()
    """The task keys of the other optional stages (agent/contracts/stages.py) that are off."""

    def on(self, key: str) -> bool:
        """Whether the optional stage with task key `key` runs."""
        value = getattr(self, key, None)
        return value if isinstance(value, bool) else key not in self.off


@dataclass(frozen=True)
class TestSets:
    """The tests that judge a candidate, and which of them the model can never see."""

    __test__ = False

    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    test_cmd: str | None = None
    """A pytest command (plain repositories), used when there are no ids."""
    whole_files: bool = False
    """Run the test files of the ids whole, grading the ids from them (SWE-bench)."""
    hidden_patch: str | None = None
    """The hidden tests: a patch applied only when verifying."""
    hidden_files: tuple[str, ...] = ()
    """The files the hidden test patch touches."""
    derived: bool = False
    """fail_to_pass and pass_to_pass were derived from the test command on the base."""
    set_apart: Mapping[str, str] = field(default_factory=dict)
    """Tests not required, and why: with a test command, those failing on the unpatched code
    for the machine's reason (agent/verify/environmental.py); pass_to_pass ids skipped there
    (the environment cannot run them: before or after, they say nothing of the change)."""

    @property
    def ids(self) -> tuple[str, ...]:
        """Every test id, the failing ones first."""
        return self.fail_to_pass + self.pass_to_pass

    @classmethod
    def of(cls, task: Task) -> TestSets:
        """The tests `task` names (before any are derived from its test command)."""
        return cls(
            fail_to_pass=tuple(task.fail_to_pass),
            pass_to_pass=tuple(task.pass_to_pass),
            test_cmd=task.test_cmd,
            whole_files=task.run_test_files,
            hidden_patch=task.test_patch,
            hidden_files=tuple(patch_paths(task.test_patch)) if task.test_patch else (),
        )


@dataclass(frozen=True)
class Uncollectable:
    """A test file pytest could not collect on the unpatched code."""

    where: str
    """The file (or module) as pytest reported it."""
    reason: str
    """Its error, one line (`ModuleNotFoundError: No module named 'attrs'`)."""
    missing_module: str | None = None
    """The module it lacks when that module is not the repository's own (nor named by the
    task): the environment's fault, not a bug for the model."""


@dataclass(frozen=True)
class BaseFacts:
    """What the task's tests do on the unpatched code (plus the hidden tests)."""

    outcomes: Mapping[str, str] = field(default_factory=dict)
    """Test id or node id -> passed | failed | error | skipped | xfailed | missing."""
    timed_out: bool = False
    """The run hung past its timeout (code that loops: a failing base, not a broken task)."""
    error: str | None = None
    """Why the run left no report (its first lines; with `timed_out`, the timeout)."""
    messages: Mapping[str, str] = field(default_factory=dict)
    """node id -> what it said, for the tests that did not pass (bounded per test)."""
    uncollectable: tuple[Uncollectable, ...] = ()
    fail_to_pass_passing: tuple[str, ...] = ()
    """Given FAIL_TO_PASS ids that pass already: they cannot tell a fix from no change."""
    pass_to_pass_passing: tuple[str, ...] = ()
    """Given PASS_TO_PASS ids that pass (feedback says "passed before the change" of these)."""
    duration_s: float = 0.0
    """How long the run took (a candidate's limit comes from it when none was set)."""
    environmental: Mapping[str, str] = field(default_factory=dict)
    """node id -> why its failure is the machine's, not the code's (no network, a locale)."""
    skipped: tuple[str, ...] = ()
    """Given PASS_TO_PASS ids whose every test skipped."""
    kept_from: str | None = field(default=None, compare=False)
    """When these facts were read back from an earlier check of the same base
    (agent/verify/basecache.py): that check's time (UTC); None when this run checked it."""

    @property
    def failing(self) -> tuple[str, ...]:
        return tuple(t for t, o in self.outcomes.items() if o in ("failed", "error"))

    @property
    def passing(self) -> tuple[str, ...]:
        return tuple(t for t, o in self.outcomes.items() if o == "passed")

    @property
    def missing_modules(self) -> tuple[Uncollectable, ...]:
        """The uncollectable files whose cause is a module the environment lacks."""
        return tuple(u for u in self.uncollectable if u.missing_module)


@dataclass(frozen=True)
class TaskPlan:
    """How one task is judged. Frozen: a changed plan is a new one (`dataclasses.replace`)."""

    task: Task
    """The task as given (never changed)."""
    environment: EnvSpec | None
    """The image the tests run in, parsed; None: ooda's image (with `task.requirements`
    installed on it, when the task names some)."""
    environment_table: Mapping[str, Any] | None
    """The same, as the table it was read from (what records and messages show)."""
    environment_line: str | None
    """What the tests run in, in one line, when it is worth saying (console, run.json)."""
    runner: TestRunner
    """The test runner (verifiers/runners/: pytest, django, sympy)."""
    runner_cmd: str | None
    """The runner's own command line (an environment's `runner.test_cmd`)."""
    pre_test: tuple[str, ...]
    """Shell commands run before every test run (an environment's `runner.pre_test`)."""
    stages: Stages
    tests: TestSets
    base: BaseFacts | None = None
    """Facts about the unpatched code; None until it has run."""

    @property
    def requirements(self) -> Path | None:
        """Third-party packages installed on ooda's image (no environment of its own)."""
        return self.task.requirements if self.environment is None else None

    def judged_task(self) -> Task:
        """The task as candidates are judged against it (and as the loop and the records see
        it): the test lists of the plan, derived from a test command when it had only that."""
        return dataclasses.replace(self.task, fail_to_pass=list(self.tests.fail_to_pass),
                                   pass_to_pass=list(self.tests.pass_to_pass))

    def hidden(self) -> HiddenTests:
        """What of the task the model must never see when it runs blind: its test patch's
        files, the names it defines, the lines it adds, the judging ids (tasks/hidden.py)."""
        return hidden_tests(self.task)

    def visible(self) -> TaskPlan:
        """The plan of the task as a blind run's loop sees it (tasks/hidden.py's
        visible_task: no judging ids, no test patch): the same environment, runner and
        stages; its tests are the repository's own and the model's (agent/verify/blind.py)."""
        task = visible_task(self.task)
        return dataclasses.replace(self, task=task, tests=TestSets.of(task), base=None)

    def with_statement(self, statement: str) -> TaskPlan:
        """The same plan for the same tests, with another statement (`ooda ci` writes it from
        the base's failures)."""
        return dataclasses.replace(self, task=dataclasses.replace(self.task,
                                                                  statement=statement))


def draft_plan(
    task: Task,
    environment: EnvironmentOptions | None = None,
    sandbox: SandboxOptions | None = None,
    stages: StageOptions | None = None,
    *,
    time_budget_s: float | None = None,
) -> TaskPlan:
    """The plan of `task` before its base has run: the environment (the task's own, else the
    user's `--environment` choice: detected, ooda's image, or a file), the runner, the stages
    and the tests. UsageError (one line) for a bad environment or runner. With a task's
    `time_budget_s` (ooda run, eval, ci), an unpatched run no limit was set for ends within
    it: the budget is the whole task's."""
    environment = environment or EnvironmentOptions()
    sandbox = sandbox or SandboxOptions()
    stages = stages or StageOptions()
    table, line, where = resolve_environment(task, environment.environment, sandbox.sandbox)
    spec = EnvSpec.from_dict(table, where=where) if table is not None else None
    runner = runner_for(spec.runner.kind if spec is not None else "pytest",
                        where=f"{where} [runner]")
    chosen = table is not None and task.environment is None
    return TaskPlan(
        task=task,
        environment=spec,
        environment_table=dict(table) if table is not None else None,
        environment_line=line,
        runner=runner,
        runner_cmd=spec.runner.test_cmd if spec is not None else None,
        pre_test=spec.runner.pre_test if spec is not None else (),
        stages=_stages(task, stages, tools_absent=chosen, time_budget_s=time_budget_s),
        tests=TestSets.of(task),
    )


_TYPED_KEYS = frozenset(f.name for f in fields(Stages))
"""The optional stages with a field of their own in Stages (the others' state is `off`)."""


def _stages(task: Task, given: StageOptions, *, tools_absent: bool,
            time_budget_s: float | None = None) -> Stages:
    """The task's [verifiers] with the user's say on top. An environment the user chose turns
    ruff, mypy and the security stage off, as a task's own does (tasks/loader.py): ooda's
    tools are not in it."""
    own = task.verifiers
    return Stages(
        ruff=own.ruff and not given.no_ruff and not tools_absent,
        mypy=own.mypy and not given.no_mypy and not tools_absent,
        security=own.security and not tools_absent,
        security_rules=tuple(own.security_rules) if own.security_rules is not None else None,
        timeout_s=given.verifier_timeout if given.verifier_timeout is not None
        else own.timeout_s if own.timeout_s is not None else LIMIT_FLOOR_S,
        base_timeout_s=None if given.verifier_timeout is not None or own.timeout_s is not None
        else min(base_limit_s(), time_budget_s or math.inf),
        off=frozenset(k for k in task_keys() if k not in _TYPED_KEYS
                      and (tools_absent or not own.on(k))),
    )


def resolve_environment(
    task: Task, choice: str | None, sandbox: str | None = None
) -> tuple[Mapping[str, Any] | None, str | None, str]:
    """(the environment table the task's tests run in, the one line that says what they run
    in or None when there is nothing to say, where the table came from for messages).

    The task's own [environment] always wins. Otherwise `choice` (`--environment`): None (the
    task's own only: `ooda eval`), "none" (ooda's image), "auto" (detected from the
    repository's files, tasks/detect_environment.py), or a TOML file. `auto` leaves alone a
    task that names its requirements (the light path: wheels on ooda's image) and `--sandbox
    local` (the user's own Python), and, with no Docker engine to build the detected
    environment, says so and keeps ooda's image (a file or the task's own table then fails
    the build, exit 3, as asked)."""
    own = "task.toml [environment]"
    if task.environment is not None:
        said = None if choice in (None, "auto") else (
            f"environment: the task's own [environment] (--environment {choice} ignored)")
        return task.environment, said, own
    if choice is None:
        return None, None, own
    if choice == "none":
        return None, "environment: ooda's image (--environment none)", own
    if choice != "auto":
        return environment_from_file(Path(choice)), f"environment: from {choice}", \
            f"--environment {choice}"
    if task.requirements is not None or sandbox == "local":
        return None, None, own
    from ooda.tasks.detect_environment import detect_environment

    detected = detect_environment(task.repo)
    if detected is None:
        return None, None, own
    from ooda.agent.sandbox.docker.launch import docker_problem

    if docker_problem() is not None:  # bwrap alone: it runs images Docker builds
        return None, (f"environment: {detected.description} — detected, but building it "
                      "needs a Docker engine, which is not answering here: ooda's image "
                      "instead (start Docker to use it; --environment none to skip "
                      "detection)"), own
    return detected.table, (f"environment: {detected.description} — detected; "
                            "--environment none to skip"), "detected environment"
