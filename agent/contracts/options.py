"""Every option of a run, declared once, grouped by the part that consumes it: the model
(ModelOptions), the loop (LoopOptions), escalation to a stronger model (EscalationOptions), the
sandbox (SandboxOptions), the task's environment (EnvironmentOptions) and the verifier stages
(StageOptions).

One field is one option: its default, its type, its flags and help (`option(...)`), whether it
changes results (an evaluation's fingerprint, agent/app/evaluate/options.py) and its check
(the group's `check()`). The command line (agent/cli/options.py turns a group into typer
options), the `OODA_*` variables and the config file (agent/cli/config.py, named after the
flags) and the records all read these declarations; nothing lists the options again. A new
option is one field here and the code that uses it.

Standard library only (the bottom layer): the CLI's types are derived from the field types.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import OptionError, UsageError

META = "ooda.option"
"""The key of a field's metadata holding its OptionSpec."""


class _Same:
    """OptionSpec.cli_default when the command line's default is the field's."""

    def __repr__(self) -> str:
        return "SAME"


SAME: Any = _Same()


@dataclass(frozen=True)
class OptionSpec:
    """How one field appears to users: flags, help, name in the config file and records."""

    flags: tuple[str, ...]
    """`("-n", "--samples")`: the first long flag names the OODA_* variable."""
    help: str
    name: str | None = None
    """The name on the command line's parameter and in the config file (default: the
    field's)."""
    key: str | None = None
    """Its name in the records and an evaluation's fingerprint (default: the field's)."""
    commands: tuple[str, ...] | None = None
    """The commands that offer it (None: every command that takes its group)."""
    help_for: Mapping[str, str] = field(default_factory=dict)
    """command -> help, where one command says it differently."""
    cli_default: Any = SAME
    """The default on the command line, when it differs from the field's (the field's is
    what a caller that does not say gets)."""
    choices: tuple[str, ...] = ()
    """The values allowed (shown as `[a|b]`)."""
    changes_results: bool = False
    """Whether it changes what a run finds (an evaluation's fingerprint holds these)."""
    newer: bool = False
    """Added after evaluations were first fingerprinted: left out of the fingerprint at its
    default, so that earlier evaluations still resume (and keep their default eval id)."""


def option(default: Any, *flags: str, help: str, **spec: Any) -> Any:
    """A dataclass field that is a user-facing option (see OptionSpec for `spec`)."""
    return field(default=default, metadata={META: OptionSpec(tuple(flags), help, **spec)})


def option_fields(group: type) -> list[tuple[Field[Any], OptionSpec]]:
    """The fields of a group class that are options, with their specs (internal fields, such
    as LoopOptions.sibling_digest, have none)."""
    return [(f, f.metadata[META]) for f in fields(group) if META in f.metadata]


def record_key(f: Field[Any]) -> str:
    """A field's name in the records and fingerprints."""
    spec = f.metadata.get(META)
    return (spec.key if spec is not None else None) or f.name


# --------------------------------------------------------------------------- model

MAX_ANSWER_TOKENS = 131_072
"""The largest `--max-tokens` taken: above it, the value is surely a run's budget (its meaning
before it capped each answer)."""



@dataclass(frozen=True)
class ModelOptions:
    """Which model answers and how to sample from it (agent/models/)."""

    name: str = option(
        "", "--model", name="model", key="model", changes_results=True,
        help="Model name sent to the endpoint; 'gold' = the task's reference patch; "
        "'replay' = the bundled endpoint replaying the task's scripted answers (offline); "
        "'mutate' = no model: mutants of the lines the failing tests point at.",
        help_for={"ci": "Model name sent to the endpoint (--base-url or OPENAI_BASE_URL); "
                        "'mutate' = no model: mutants of the lines the failing tests point at."},
    )
    """"gold" = the task's reference patch; "replay" = the bundled endpoint replaying the
    task's scripted answers (offline demo and tests); "mutate" = fault-localised mutation, no
    model (agent/core/sources/mutate.py); "" = not given."""
    base_url: str | None = option(
        None, "--base-url", changes_results=True,
        help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL).",
    )
    temperature: float = option(0.8, "--temperature", help="Sampling temperature.",
                                changes_results=True)
    concurrency: int = option(
        8, "--concurrency", commands=("run", "ci"),
        help="Model requests in flight at once (in `ooda eval`, --concurrency counts tasks "
        "and --requests counts requests).",
    )
    max_tokens: int | None = option(
        4096, "--max-tokens", changes_results=True, newer=True,
        help="Completion tokens one answer may take, as in OpenAI's API (lowered to what the "
        "model's context window leaves). Before, this was the whole run's budget: that is "
        "--token-budget now.",
    )
    """Completion tokens one answer may take (lowered to what the context window leaves);
    None: the endpoint's default."""
    context_window: int | None = option(
        None, "--context-window", changes_results=True, newer=True,
        help="The model's context window in tokens (default: learned from the endpoint's "
        "model listing or its error for a prompt too long); prompts and answers are fitted "
        "to it.",
    )
    request_timeout_s: float | None = option(
        None, "--request-timeout", name="request_timeout",
        help="Seconds one model request may take, first token included; the answer so far is "
        "kept (default: only --time-budget).",
    )
    """Longest time one request may take, first token included; None: only the deadline."""
    price_prompt: float | None = option(None, "--price-prompt",
                                        help="Dollars per 1M prompt tokens.")
    price_completion: float | None = option(None, "--price-completion",
                                            help="Dollars per 1M completion tokens.")
    replay_tokens_per_s: float = 0.0
    """With --model replay: simulated generation speed (0 = instant); not on the command
    line (tests and benchmarks)."""

    def check(self) -> None:
        if not self.name:
            raise UsageError(
                "no model given: pass --model NAME (with --base-url or OPENAI_BASE_URL), "
                "--model gold, or --model replay for the scripted offline demo"
            )
        if self.concurrency < 1:
            raise OptionError("--concurrency",
                              f"--concurrency must be at least 1 (got {self.concurrency})")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise OptionError("--max-tokens",
                              f"--max-tokens must be positive (got {self.max_tokens})")
        if self.max_tokens is not None and self.max_tokens > MAX_ANSWER_TOKENS:
            raise OptionError(
                "--max-tokens",
                f"--max-tokens caps each answer, as in OpenAI's API, and {self.max_tokens:,} is "
                f"more than models answer at once; for a token budget of the whole run (what "
                f"--max-tokens meant before), use --token-budget {self.max_tokens}")
        if self.context_window is not None and self.context_window < 1:
            raise OptionError("--context-window",
                              f"--context-window must be positive (got {self.context_window})")
        if self.request_timeout_s is not None and self.request_timeout_s <= 0:
            raise OptionError(
                "--request-timeout",
                f"--request-timeout must be positive (got {self.request_timeout_s:g})")
        for flag, price in (("--price-prompt", self.price_prompt),
                            ("--price-completion", self.price_completion)):
            if price is not None and not price >= 0:
                raise OptionError(flag, f"{flag} must be a non-negative number (got {price})")


# --------------------------------------------------------------------------- loop


@dataclass(frozen=True)
class LoopOptions:
    """How one task is attacked (agent/core/loop.py)."""

    samples: int = option(4, "-n", "--samples", help="Candidates per round.",
                          changes_results=True)
    """Candidates sampled in parallel per round."""
    rounds: int = option(3, "--rounds", help="Feedback rounds at most.", changes_results=True)
    time_budget_s: float = option(
        600.0, "--time-budget", name="time_budget", changes_results=True,
        help="Wall-clock seconds per task.",
    )
    """Hard wall-clock deadline for the whole task: generation, verification and clean-up."""
    token_budget: int | None = option(
        None, "--token-budget", changes_results=True, newer=True,
        help="Prompt plus completion tokens for the whole task.",
    )
    """Prompt plus completion tokens for the whole run; None for no limit."""
    max_prose_tokens: int = option(
        2048, "--max-prose-tokens", changes_results=True, newer=True,
        help="Stop an answer that streams this many tokens of prose without beginning an edit "
        "(0: never; a leading <think> block does not count).",
    )
    no_watchdog: bool = option(
        False, "--no-watchdog", changes_results=True, newer=True,
        help="Do not halt an answer at the first security finding in what it adds while it "
        "streams (the security stage after the tests still judges every candidate).",
    )
    """Turn the security watchdog off (agent/core/checks/security.py)."""
    select: str = option(
        "first", "--select", choices=("first", "best"), changes_results=True,
        help="'first' stops at the first pass; 'best' picks among a round's passes.",
    )
    """"first": stop at the first passing candidate; "best": finish the round and pick;
    "blind" (set by a blind run, not an option): finish the round and pick as a blind run does
    (agent/core/blind_select.py), and when none passed, submit the best standing candidate."""
    oracle: bool = option(
        False, "--oracle", commands=("run", "eval"), changes_results=True,
        help="Let the loop run a task's hidden tests (its test patch) and feed their failures "
        "back: an oracle's number, not comparable with leaderboards. Default: blind (the "
        "hidden tests judge only the submitted patch; docs/SWEBENCH.md).",
    )
    """Let the loop verify with the task's hidden tests and feed their failures back (an
    oracle's number); otherwise a task with hidden tests runs blind (agent/app/protocol.py)."""
    repro_tests: int = option(
        4, "--repro-tests", commands=("run", "eval"), changes_results=True,
        help="Blind runs: reproduction tests asked of the model, in parallel (0: none).",
    )
    """Reproduction tests a blind run asks the model for, in parallel."""
    critic: int = option(
        2, "--critic", commands=("run", "eval"), changes_results=True, newer=True,
        help="Blind runs: requests to the model judging the candidates still level after "
        "the checks (each in another order of the candidates; 0: none).",
    )
    """Requests of a blind run's critic (agent/core/critic.py): the model scores the
    finalists the checks could not tell apart, once per order of them; its tokens count."""
    judge_submitted: bool = option(
        False, "--judge-submitted", commands=("run", "eval"),
        help="Blind runs: after the loop, the hidden tests judge only the submitted patch, not "
        "every distinct candidate (faster; oracle coverage then says only whether it resolved).",
    )
    """After a blind loop, the hidden tests judge only the submitted candidate (else every
    distinct one: oracle coverage, pass@k)."""
    verify_concurrency: int = option(2, "--verify-concurrency",
                                     help="Candidates verified at once, per task.")
    """Candidates verified at once (verification is CPU-bound)."""
    context_tokens: int = option(
        32_000, "--context-tokens", changes_results=True, newer=True,
        help="Most tokens the first prompt may take, the repository's code it shows included "
        "(small repositories are shown whole; larger ones ranked and shown in part).",
    )
    """Tokens of repository code the first prompt may show (agent/context): a quarter of a
    128k-token window, leaving room for the rounds of feedback that follow it."""
    sibling_digest: bool = True
    """Tell each next-round candidate how its parent's siblings failed (not an option)."""
    context_votes: int = 3
    """Requests to the fast model voting where the change belongs, when the repository is
    too large to show whole (agent/context/votes.py); 0: none (not an option)."""

    def check(self) -> None:
        at_least = (("--samples", self.samples, 1), ("--rounds", self.rounds, 1),
                    ("--verify-concurrency", self.verify_concurrency, 1),
                    ("--max-prose-tokens", self.max_prose_tokens, 0),
                    ("--repro-tests", self.repro_tests, 0),
                    ("--critic", self.critic, 0),
                    ("--context-tokens", self.context_tokens, 1))
        for flag, value, least in at_least:
            if value < least:
                raise OptionError(flag, f"{flag} must be at least {least} (got {value})")
        if self.time_budget_s <= 0:
            raise OptionError("--time-budget",
                              f"--time-budget must be positive (got {self.time_budget_s:g})")
        if self.token_budget is not None and self.token_budget < 1:
            raise OptionError("--token-budget",
                              f"--token-budget must be positive (got {self.token_budget})")
        if self.select not in ("first", "best", "blind"):
            raise OptionError("--select", f"--select must be first or best (got {self.select!r})")


# --------------------------------------------------------------------------- escalation


@dataclass(frozen=True)
class EscalationOptions:
    """The stronger model later rounds escalate to, and when (agent/core/schedule.py)."""

    escalate_to: str | None = option(
        None, "--escalate-to", changes_results=True,
        help="A stronger model for the rounds after the fast one keeps failing "
        "(also: --model FAST,STRONG).",
    )
    escalate_base_url: str | None = option(
        None, "--escalate-base-url", changes_results=True,
        help="Its endpoint [default: the model's].",
    )
    escalate_key_env: str | None = option(
        None, "--escalate-key-env",
        help="Environment variable holding its API key [default: the model's key].",
    )
    escalate_price_prompt: float | None = option(
        None, "--escalate-price-prompt", help="Its dollars per 1M prompt tokens.")
    escalate_price_completion: float | None = option(
        None, "--escalate-price-completion", help="Its dollars per 1M completion tokens.")
    escalate_after: int | None = option(
        None, "--escalate-after", changes_results=True,
        help="Rounds of the fast model without a pass before escalating [default: all but "
        "the last].",
    )
    escalate_below: float = option(
        0.25, "--escalate-below", changes_results=True,
        help="Escalate once less than this fraction of the budget is left.",
    )
    first: str | None = option(
        None, "--first", changes_results=True, newer=True,
        help="A source that needs no model tried before it: 'mutate' (until it has nothing "
        "left or has used a third of the budget; also: --model mutate,FAST[,STRONG]).",
    )

    def check(self, model: str) -> None:
        if self.escalate_to is None:
            return
        if self.escalate_to == model:
            raise OptionError("--escalate-to", "--escalate-to names the model itself")
        if self.escalate_after is not None and self.escalate_after < 1:
            raise OptionError("--escalate-after",
                              f"--escalate-after must be at least 1 (got {self.escalate_after})")
        if not 0 <= self.escalate_below < 1:
            raise OptionError("--escalate-below",
                              f"--escalate-below must be in [0, 1) (got {self.escalate_below})")
        if self.escalate_key_env and not os.environ.get(self.escalate_key_env):
            raise OptionError("--escalate-key-env",
                              f"--escalate-key-env: ${self.escalate_key_env} is not set")

    def api_key(self) -> str | None:
        """The key of the model escalated to (None: the same key as the model's)."""
        return os.environ.get(self.escalate_key_env) if self.escalate_key_env else None


# --------------------------------------------------------------------------- sandbox


@dataclass(frozen=True)
class SandboxOptions:
    """Where candidates run (agent/sandbox/registry.py)."""

    sandbox: str | None = option(
        None, "--sandbox", choices=("docker", "bwrap", "local"),
        help="Where verifiers run (default: docker, else bwrap); 'local' means no isolation.",
    )
    """None (or "auto"): Docker, else bubblewrap."""
    retry_failed_environments: bool = False
    """Build again a task environment whose build failed before (`ooda eval --retry-errors`
    sets it); otherwise a recorded failure is raised at once."""

    def check(self) -> None:
        if self.sandbox not in (None, "auto", "docker", "bwrap", "local"):
            raise OptionError("--sandbox",
                              f"--sandbox must be docker, bwrap or local (got {self.sandbox!r})")


# --------------------------------------------------------------------------- environment

ENVIRONMENT_CHOICES = ("auto", "none")
"""`--environment auto|none|PATH`: detect it, keep ooda's image, or read it from a file."""


@dataclass(frozen=True)
class EnvironmentOptions:
    """What a task that names no environment runs its tests in (the task plan decides)."""

    environment: str | None = option(
        None, "--environment", cli_default="auto", commands=("run", "ci", "verify"),
        help="What the tests run in when the task names no [environment]: 'auto' detects it "
        "from the repository's files (.python-version, pyproject.toml, setup.cfg, setup.py, "
        "requirements*.txt, tox.ini) and builds it; 'none' keeps ooda's image; PATH is a TOML "
        "file holding an [environment] table (docs/TASKS.md).",
    )
    """"auto" detects one from the repository's files (tasks/detect_environment.py), "none"
    keeps ooda's image, else a TOML file holding an [environment] table; None: the task's
    own only (`ooda eval`)."""

    def check(self) -> None:
        value = self.environment
        if value is not None and value not in ENVIRONMENT_CHOICES and not Path(value).is_file():
            raise OptionError("--environment",
                              f"--environment {value!r}: give auto, none, or a TOML file "
                              "holding an [environment] table (no such file)")


# --------------------------------------------------------------------------- stages


@dataclass(frozen=True)
class StageOptions:
    """The user's say over the verifier stages, on top of the task's [verifiers] table."""

    no_ruff: bool = option(False, "--no-ruff", help="Skip the ruff verifier.")
    no_mypy: bool = option(False, "--no-mypy", help="Skip the mypy verifier.")
    verifier_timeout: float | None = option(None, "--verifier-timeout",
                                            help="Seconds per verifier run.")

    def check(self) -> None:
        if self.verifier_timeout is not None and not self.verifier_timeout > 0:
            raise OptionError("--verifier-timeout", f"--verifier-timeout must be positive "
                              f"(got {self.verifier_timeout:g})")


GROUPS: tuple[type, ...] = (
    ModelOptions, LoopOptions, EscalationOptions, SandboxOptions, EnvironmentOptions,
    StageOptions,
)
"""Every option group, in the order `--help` lists them."""
