"""Every interface ooda is built from, in one place: a model, a sandbox and the backend that
opens sandboxes, a verifier stage, and the patch verifier the loop is typed against, with their
result types.

Everything else (OpenAI client, Docker/bubblewrap/local backends, ruff/mypy/pytest checks, the
task verifier) is one implementation of one of these. Standard library only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from ooda.agent.contracts import stages

# --------------------------------------------------------------------------- model


@dataclass
class Completion:
    """One finished answer from the model, with its timings (seconds, monotonic clock)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    t_first_token: float | None = None
    t_done: float | None = None
    stopped_early: bool = False
    """True when on_text asked to stop: the text is incomplete."""
    finish_reason: str | None = None
    """The endpoint's word on how the answer ended ("stop", "length", …); None when the
    stream was stopped early."""
    tokens_estimated: bool = False
    """True when the token counts are estimates (the endpoint sent no usage)."""
    t_request: float | None = None
    """When the request that gave this answer was sent (after any wait for a request slot)."""


class Model(Protocol):
    """Something that turns chat messages into one completion."""

    name: str

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        deadline: float,
        on_text: Callable[[str], bool] | None = None,
    ) -> Completion:
        """Answer before `deadline` (time.monotonic()); `on_text` sees the text so far and
        may return False to stop the stream early."""
        ...


@runtime_checkable
class EndpointReport(Protocol):
    """A model on an endpoint that adapts to it (requests at once, context window) and says
    what it adapted to: `notices` one line each, `report()` for run.json's `endpoint`."""

    notices: list[str]
    on_notice: Callable[[str], None] | None

    def report(self) -> dict[str, object]:
        """Where the endpoint is and what was learned of it (JSON values only)."""
        ...


@runtime_checkable
class KnowsWindow(Protocol):
    """A model that may know its context window (from the user, or learned from its
    endpoint): the first prompt's code is fitted to it."""

    def context_window(self) -> int | None:
        """The window in tokens, None while it is unknown."""
        ...


# --------------------------------------------------------------------------- sandbox


@dataclass(frozen=True)
class ExecResult:
    """What one command did inside a sandbox."""

    exit_code: int | None
    """The command's exit status; None when it was killed for its timeout."""
    output: str
    """stdout and stderr together, capped: head and tail kept, the middle elided."""
    duration_s: float
    timed_out: bool = False
    limit: str | None = None
    """Set by the sandbox (never from the command's output) when it killed the command for a
    resource limit: the one line saying which (workspace disk, memory)."""


class Sandbox(Protocol):
    """One isolated workspace where candidate code runs."""

    backend: str
    """"docker", "bwrap" or "local"."""
    workspace: Path
    """Host path of the writable workspace (a copy of the task's repo)."""
    workdir: str
    """The same workspace as commands inside the sandbox see it."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run argv with cwd = workdir; kill the whole process tree after timeout_s."""
        ...

    def close(self) -> None:
        """Stop everything still running and release the sandbox (not the workspace)."""
        ...


class SandboxBackend(Protocol):
    """Opens sandboxes of one kind; `close` releases what they share (e.g. a docker client)."""

    name: str
    reusable: bool
    """Its sandboxes can be reset for the next candidate (`Resettable`): the pool keeps them
    warm (Docker); otherwise each candidate gets a fresh one."""

    def open(self, workspace: Path, *, requirements: Path | None = None) -> Sandbox:
        """Start an isolated sandbox whose writable workspace is the host dir `workspace`."""
        ...

    def adopt(self, launched: object, *, requirements: Path | None = None) -> Sandbox | None:
        """A sandbox on `launched`, one started ahead of need (agent/startup/prestart.py) on
        its own workspace, when it fits this backend and `requirements`; None when it does not
        (the caller then releases it)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Resettable(Protocol):
    """A sandbox that can serve another candidate after a reset."""

    def reset(self) -> bool:
        """Leave nothing of the last command behind; False when that failed."""
        ...

    def lend(self) -> None:
        """Hand the refilled workspace to the sandbox user."""
        ...


# --------------------------------------------------------------------------- verifier

VerifierStatus = Literal["passed", "failed", "timeout", "error", "skipped"]


@dataclass
class VerifierResult:
    """One verifier's verdict on one candidate."""

    name: str
    status: VerifierStatus
    duration_s: float
    summary: str
    """Short, bounded text fit to be fed back to a model (empty when passed)."""
    log: str = ""
    """Full log, written to the attempt's directory by the caller."""
    details: dict[str, object] = field(default_factory=dict)
    """Machine-readable extras (per-test outcomes, new diagnostics)."""


class Verifier(Protocol):
    """One stage of the verification cascade."""

    name: str
    """Its stage's name (agent/contracts/stages.py says where and when it runs)."""

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        """Judge the candidate now in `sandbox.workspace`."""
        ...


@dataclass(frozen=True)
class ReproTest:
    """A reproduction test the model wrote for a blind run (agent/core/repro_prompt.py): a
    standalone Python script run from the repository root, failing (an AssertionError) while
    the issue is present and exiting normally once it is fixed (verifiers/repro_check.py)."""

    name: str
    """Its name in the run (`repro_1`, ...): a file name stem."""
    source: str
    """The script."""
    required: bool = True
    """A candidate must pass it to pass the stage (it failed on the base with an
    AssertionError); an optional one (it failed on the base for another reason) only counts
    when candidates are ranked."""
    probe: bool = False
    """Not a test but a probe: the issue's own examples (verifiers/issue_probes.py), never
    passed or failed; each candidate's output there is compared with the others' and the
    base's."""
    base_behaviour: tuple[str, ...] = ()
    """A probe's fingerprint per block on the unpatched code ("": a block whose output was not
    the same on two runs there, not compared)."""


REPRO_REQUEST_LINE = "Request: reproduction test"
"""The first line of a reproduction-test request's user message (agent/core/repro_prompt.py):
the bundled endpoint serves such requests only the scripted answers marked for them."""


CRITIC_REQUEST_LINE = "Request: judge candidate patches"
"""The first line of a blind run's critic request (agent/core/critic.py): served, like a
reproduction-test request, only the scripted answers marked for it."""


@dataclass(frozen=True)
class ReproOnBase:
    """How one reproduction test ended on the unpatched code, and whether it is kept."""

    name: str
    status: str
    """passed | failed | error | timeout (verifiers/repro_check.py)."""
    exception: str
    """The exception that ended it ("" when it passed or timed out)."""
    kept: bool
    """It failed there, so it can tell a fix from no change."""
    required: bool
    """Kept, and it failed with an AssertionError: candidates must pass it."""
    behaviour: tuple[str, ...] = ()
    """A probe's fingerprints on the base (see ReproTest.base_behaviour)."""


class ReproJudge(Protocol):
    """Takes a blind run's reproduction tests (the task verifier of agent/verify implements
    it): runs them on the unpatched code, keeps those that fail there, and verifies every
    candidate against the kept ones from then on."""

    def adopt_reproduction(self, tests: list[ReproTest], *, deadline: float) -> list[ReproOnBase]:
        """Judge `tests` on the base before `deadline` and keep the failing ones; called once
        (with [] when none were written). verify() waits for it."""
        ...


@dataclass
class CheckSpec:
    """What the verifiers need to know about the task, independent of the sandbox."""

    changed_files: list[str]
    """Repo-relative paths the candidate patch touched (for syntax, ruff, mypy)."""
    changed_lines: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Per changed file, the (first, last) lines of the new version its patch added or
    changed (a file absent here: all of it): code outside them existed before the candidate
    (the pytest guard's re-decided comparisons judge classes by it)."""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    test_cmd: str | None = None
    """A shell test command (plain repositories); pytest node ids are preferred."""
    timeout_s: float = 60.0
    tests_timeout_s: float | None = None
    """The tests' own limit when it is less than `timeout_s` (a source whose candidates often
    loop: `TracesBase.limit_test_time`); the other stages keep `timeout_s`."""
    baseline: dict[str, object] = field(default_factory=dict)
    """Per-verifier baseline diagnostics of the unpatched code, keyed by verifier name."""
    verdict_only: bool = False
    """Only the verdict matters (no feedback round follows): stages may stop at the first
    failure (pytest -x: the fail_to_pass tests run first, the rest only if they pass)."""
    whole_files: bool = False
    """Run the test files of the listed ids whole and grade the ids from them (SWE-bench)."""
    runner_cmd: str | None = None
    """The runner's own command line (a task environment's `runner.test_cmd`)."""
    pre_test: list[str] = field(default_factory=list)
    """Shell commands run before the tests, in the test command's shell (`runner.pre_test`)."""
    test_files: list[str] = field(default_factory=list)
    """The task's test files (those its hidden test patch touches)."""
    passed_before: list[str] | None = None
    """The pass_to_pass ids a base run showed passing (None: not measured); feedback says
    "passed before the change" only of these."""
    unjudgeable: dict[str, str] = field(default_factory=dict)
    """Tests whose failure on the unpatched code was the machine's (node id -> why: "needs
    the network"): failing again for that same reason, a required one is reported as not
    judged here, not as the candidate's failure."""
    tests_optional: bool = False
    """A blind run's regression tests: when none apply to this candidate (no ids, no command),
    the tests stage is skipped rather than an error."""
    reproduction: list[ReproTest] = field(default_factory=list)
    """A blind run's reproduction tests, kept because they failed on the base."""


# --------------------------------------------------------------------------- verdict

VerdictStatus = Literal["passed", "failed", "invalid_edit", "timeout", "error"]


@dataclass(frozen=True)
class Dropped:
    """A file a candidate's patch changed that the edit policy keeps out of the verified tree
    (a test, conftest.py, tool configuration, test support): its changes were left out and the
    rest judged (agent/verify/admit.py)."""

    path: str
    kind: str
    """"test_file" or "protected_file" (as an invalid edit's kind)."""
    reason: str
    """One line: the policy's reason."""

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind, "reason": self.reason}


@dataclass
class Verdict:
    """The outcome of verifying one patch."""

    status: VerdictStatus
    reason: str
    """One line."""
    results: list[VerifierResult] = field(default_factory=list)
    feedback: str = ""
    """Bounded text for the model: the patch problem or the failing verifier's summary."""
    changed_files: list[str] = field(default_factory=list)
    kind: str | None = None
    """For an invalid edit: the reason in a word or two ("test_file", "does_not_apply", …)."""
    dropped: list[Dropped] = field(default_factory=list)
    """Files of the given patch left out before judging (tests, configuration: the policy's);
    `patch` is then what was judged."""
    patch: str | None = None
    """The patch judged, when it is not the one given (files were dropped); what a run
    submits of this candidate."""


# --------------------------------------------------------------------------- patch verifier

CASCADE_ORDER = stages.CASCADE_ORDER
"""The verifier stages in the order a candidate meets them (agent/contracts/stages.py): syntax,
tampering (static, on the host), ruff and pytest, then security, mypy and (blind runs) the
reproduction tests only for a candidate whose tests pass. The loop ranks failed attempts by
how far along this order they got (a later stage makes a better parent)."""


class PatchVerifier(Protocol):
    """Judges candidate patches for one task: what the loop is typed against (the task
    verifier of agent/verify is the implementation)."""

    def verify(
        self,
        patch: str,
        *,
        log_dir: Path | None = None,
        deadline: float | None = None,
        verdict_only: bool = False,
        stop: threading.Event | None = None,
    ) -> Verdict:
        """Judge `patch` (a unified diff against the task's repo) before `deadline`
        (time.monotonic()), writing its logs under `log_dir`; `verdict_only`: no feedback will
        be drawn from it, so the stages may stop at the first failure. Raises InfraError when
        the sandbox is broken for every candidate, VerificationStopped when `stop` was set
        meanwhile (the run was decided: the command running is stopped, no verdict)."""
        ...
