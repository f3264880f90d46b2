"""The facts about the unpatched code, and what they settle in a task's plan.

Before the first model request, the task's tests run once on the unpatched code (plus the
hidden tests), in the plan's environment: `examine_base` says which fail, which pass, which
cannot be collected and why. `settle` then turns a draft plan into the one candidates are
judged by, or stops the run with one line (UsageError, exit 2) when the base cannot judge
anything:

- a test file that cannot be imported because a module is missing that is not the
  repository's own (nor named by the task): the environment's fault, never a bug for the model
  (the message names the module and what to do: `--environment`, a requirements file);
- given test ids that match no test, tests that do not run at all;
- a test command that collects nothing, or whose every test passes (nothing to fix).

With only a test command, the tests failing on the base become fail_to_pass and the passing
ones pass_to_pass (`ooda run --test-cmd`, `ooda verify`, `ooda ci`), except those failing for
the machine's reason (no network, a missing locale or program, a refused privilege:
agent/verify/environmental.py), which are set apart and said. FAIL_TO_PASS ids that pass
on the base already are kept as a fact (a warning, a record): such a task cannot tell a fix
from no change (SWE-bench's requests-2674). PASS_TO_PASS ids that skip on the base are set
apart: skipped before and after, they say nothing of the change.

Time: when neither the user nor the task set a limit, the unpatched run may take up to
`base_limit_s()` (never more than the task's --time-budget) and a candidate's run then gets `candidate_limit_s()` of its duration (a
factor, a floor); an unpatched run that does not finish within its limit stops the run with one
line naming --verifier-timeout (exit 2), unless a task's own limit declares a hang a failure
(the bug may be the loop). `plan_line` says after the base check, in one line, which tests a
fix must make pass, what was set apart, and the limit.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from ooda.agent.contracts.errors import UsageError
from ooda.agent.verify.plan import BaseFacts, TaskPlan, Uncollectable, candidate_limit_s
from ooda.verifiers.environmental import environmental_reason
from ooda.verifiers.pytest_check import (
    NodeIndex,
    TestRun,
    TestRunError,
    match_id,
    normalize_id,
)

SKIP_DIRS = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules",
                       "__pycache__", "build", "dist"})
_IMPORT_ERROR = re.compile(r"^(?:E\s+)?((?:ModuleNotFoundError|ImportError): .+)$", re.M)
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '\w+' from '([\w.]+)'")


class BaseRunner(Protocol):
    """What runs the task's tests on the unpatched code (the task verifier)."""

    def run_base(self, target: list[str] | str, *, timeout_s: float | None = None) -> TestRun:
        ...


def examine_base(plan: TaskPlan, runner: BaseRunner) -> BaseFacts:
    """Run the plan's tests (its ids, else its test command) on the unpatched code and say
    what they do there."""
    tests = plan.tests
    target: list[str] | str | None = list(tests.ids) if tests.ids else tests.test_cmd
    if target is None:
        return BaseFacts()
    try:
        run = runner.run_base(target)
    except TestRunError as exc:
        return BaseFacts(timed_out=exc.timed_out, error=_first_lines(exc),
                         uncollectable=_from_output(str(exc), plan))
    except ValueError as exc:  # NotGradable: a command the runner cannot grade per test
        return BaseFacts(error=_first_lines(exc))
    outcomes = dict(run.outcomes)
    uncollectable = tuple(_uncollectable(node, run.messages.get(node, ""), plan)
                          for node in plan.runner.collection_errors(run))
    environmental = {node: why for node, outcome in outcomes.items()
                     if outcome in ("failed", "error")
                     and (why := environmental_reason(run.messages.get(node, "")))}
    return BaseFacts(
        duration_s=round(run.duration_s, 3),
        environmental=environmental,
        skipped=_all_skipped(tests.pass_to_pass, outcomes, tests.ids),
        outcomes=outcomes,
        messages={n: m for n, m in run.messages.items() if outcomes.get(n) != "passed"},
        uncollectable=uncollectable,
        fail_to_pass_passing=_all_passed(tests.fail_to_pass, outcomes, tests.ids),
        pass_to_pass_passing=tuple(normalize_id(i) for i in _all_passed(
            tests.pass_to_pass, outcomes, tests.ids)),
    )


def settle(plan: TaskPlan, facts: BaseFacts) -> TaskPlan:
    """The plan with its base facts (and, with only a test command, the test lists derived
    from them; the candidates' limit from the base's duration when none was set); UsageError,
    one line, when the unpatched code cannot judge a candidate."""
    missing_module = facts.missing_modules
    if missing_module:
        raise UsageError(missing_module_message(missing_module[0], len(missing_module)))
    if facts.timed_out and plan.tests.ids and not plan.stages.timeout_given:
        raise UsageError(base_timeout_message(plan, facts))  # a test command's: _hang_hint
    if not plan.stages.timeout_given and not facts.timed_out and facts.error is None:
        stages = dataclasses.replace(plan.stages, timeout_s=candidate_limit_s(facts.duration_s))
        plan = dataclasses.replace(plan, stages=stages)
    tests = plan.tests
    if tests.ids:
        if facts.error is not None and not facts.timed_out:
            raise UsageError(f"the task's tests do not run on the unpatched code: {facts.error}")
        missing = [i for i in tests.ids if facts.outcomes.get(i) == "missing"]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise UsageError(
                f"test id {missing[0]!r}{more} matches no test on the unpatched code: "
                "check its spelling (`pytest --collect-only -q` lists the ids)"
            )
        if facts.skipped:
            apart = {i: "skipped on the unpatched code" for i in facts.skipped}
            tests = dataclasses.replace(
                tests, pass_to_pass=tuple(i for i in tests.pass_to_pass if i not in apart),
                set_apart={**tests.set_apart, **apart})
        return dataclasses.replace(plan, tests=tests, base=facts)
    cmd = tests.test_cmd
    if cmd is None:
        return dataclasses.replace(plan, base=facts)
    if facts.error is not None:
        raise UsageError(f"the test command {cmd!r} does not run on the unpatched code: "
                         f"{facts.error}{_hang_hint(facts, plan)}")
    if not facts.outcomes:
        raise UsageError(f"{cmd!r} collects no test on the unpatched code: check the paths "
                         "and ids it names")
    failing, passing = sorted(facts.failing), sorted(facts.passing)
    apart = {node: f"fails on the unpatched code: the sandbox {why}"
             for node in failing if (why := facts.environmental.get(node))}
    failing = [node for node in failing if node not in apart]
    if not failing and apart:
        first, why = next(iter(apart.items()))
        raise UsageError(f"every test failing under {cmd!r} on the unpatched code fails for "
                         f"the machine, not the code ({first}: {why.split(': ', 1)[1]}): "
                         "nothing a fix could change (docs/SECURITY.md, what a test sees)")
    if not failing:
        raise UsageError(f"every test of {cmd!r} passes on the unpatched code: nothing to fix")
    derived = dataclasses.replace(tests, fail_to_pass=tuple(failing),
                                  pass_to_pass=tuple(passing), derived=True, set_apart=apart)
    # its pass_to_pass passed on the base by construction
    facts = dataclasses.replace(facts, pass_to_pass_passing=tuple(passing))
    return dataclasses.replace(plan, tests=derived, base=facts)


def _hang_hint(facts: BaseFacts, plan: TaskPlan) -> str:
    """What to do about tests that hung on the unpatched code: more time, or leave out the
    one that was running (pytest's --deselect)."""
    if not facts.timed_out:
        return ""
    named = re.search(r"\((\S+) was still running\)", facts.error or "")
    skip = (f", or leave that test out (add `--deselect {named[1]}` to the test command)"
            if named else "")
    return (f": give it more time (--verifier-timeout SECONDS; now "
            f"{plan.stages.base_run_timeout_s:g}){skip}")


def base_timeout_message(plan: TaskPlan, facts: BaseFacts) -> str:
    """One line: the unpatched run did not finish, the option that gives it longer, and the
    test that was running (it may hang: leave it out)."""
    named = re.search(r"\((\S+) was still running\)", facts.error or "")
    skip = (f", or leave {named[1]} out (`--deselect {named[1]}` in the test command)"
            if named else "")
    return (f"the tests did not finish on the unpatched code within "
            f"{plan.stages.base_run_timeout_s:g} s: give them longer with --verifier-timeout SECONDS "
            f"(OODA_VERIFIER_TIMEOUT; a task's [verifiers] timeout_s){skip}")


def plan_line(plan: TaskPlan, most: int = 3) -> str | None:
    """After the base check, one line: the tests a fix must make pass, how many must keep
    passing, what was set apart and why, each run's limit. None before the base has run."""
    if plan.base is None:
        return None
    tests = plan.tests

    def named(ids: Sequence[str]) -> str:
        shown = ", ".join(ids[:most])
        return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")

    parts = [f"must pass: {len(tests.fail_to_pass)} test(s)"
             + (f" failing on the unpatched code ({named(tests.fail_to_pass)})"
                if tests.derived else "")]
    if tests.pass_to_pass:
        parts.append(f"{len(tests.pass_to_pass)} passing must keep passing")
    if tests.set_apart:
        reasons: dict[str, list[str]] = {}
        for test, why in tests.set_apart.items():
            reasons.setdefault(why, []).append(test)
        parts += [f"set apart, {why}: {named(ids)}" for why, ids in reasons.items()]
    given = [n for n, why in plan.base.environmental.items() if n not in tests.set_apart]
    if given and not tests.derived:
        parts.append(f"failing on the unpatched code for the machine: {named(given)}")
    limit = f"{plan.stages.timeout_s:g} s per run"
    if not plan.stages.timeout_given:
        limit += f" (from the unpatched run's {plan.base.duration_s:.0f} s)"
    parts.append(limit)
    if plan.base.kept_from is not None:
        parts.append(f"the unpatched code as checked at {plan.base.kept_from} (nothing it "
                     "depends on changed; OODA_BASE_CACHE=0 checks again)")
    return "; ".join(parts)


def missing_module_message(first: Uncollectable, count: int = 1) -> str:
    """One line: which test file cannot be imported, the module it lacks, what to do."""
    more = f" (and {count - 1} more test file(s))" if count > 1 else ""
    return (f"the tests cannot run on the unpatched code: {first.where}{more} fails to import "
            f"({first.reason}); the environment lacks {first.missing_module!r}, which is not "
            "a bug to fix: give the tests their environment (--environment auto detects it "
            "from the repository's files, --environment PATH reads an [environment] table) "
            "or list the package in a requirements file (task.toml `requirements`, ooda ci "
            "--requirements)")


def _all_skipped(ids: Iterable[str], outcomes: Mapping[str, str],
                 listed: Sequence[str]) -> tuple[str, ...]:
    """The ids whose every matching test skipped."""
    run = NodeIndex(outcomes)
    return tuple(i for i in ids
                 if (nodes := match_id(i, run, listed))
                 and all(outcomes[n] == "skipped" for n in nodes))


def _all_passed(ids: Iterable[str], outcomes: Mapping[str, str],
                listed: Sequence[str]) -> tuple[str, ...]:
    """The ids whose every matching test passed (`listed`: all the task's ids, which
    match_id shares parametrizations among)."""
    run = NodeIndex(outcomes)
    return tuple(i for i in ids
                 if (nodes := match_id(i, run, listed))
                 and all(outcomes[n] == "passed" for n in nodes))


def _uncollectable(node: str, message: str, plan: TaskPlan) -> Uncollectable:
    errors = _IMPORT_ERROR.findall(message)
    reason = errors[-1].strip() if errors else (message.strip().splitlines() or ["error"])[-1]
    return Uncollectable(node, reason[:300], _missing_module(reason, plan))


def _from_output(output: str, plan: TaskPlan) -> tuple[Uncollectable, ...]:
    """A run that left no report because an import failed first (a conftest.py, a plugin)."""
    errors = _IMPORT_ERROR.findall(output)
    if not errors:
        return ()
    reason = errors[-1].strip()
    return (Uncollectable("conftest.py or a plugin", reason[:300],
                          _missing_module(reason, plan)),)


def _missing_module(reason: str, plan: TaskPlan) -> str | None:
    """The module `reason` says is missing, when it is not the repository's own (a file or
    package of it or of the hidden tests) nor a name the task's statement uses: then the
    environment lacks it. None otherwise (a new module may be the fix)."""
    found = _NO_MODULE.search(reason) or _CANNOT_IMPORT.search(reason)
    if found is None:
        return None
    module = found.group(1)
    top = module.split(".", 1)[0]
    hidden = {Path(p).stem for p in plan.tests.hidden_files} | {
        Path(p).parts[0] for p in plan.tests.hidden_files if Path(p).parts}
    if top in hidden or top in _own_names(plan.task.repo):
        return None
    if re.search(rf"\b{re.escape(top)}\b", plan.task.statement):
        return None
    return module


@functools.lru_cache(maxsize=64)
def _own_names(repo: Path, depth: int = 4) -> frozenset[str]:
    """The module names the repository itself provides: its .py files' stems and its
    directories' names, a few levels deep."""
    names: set[str] = set()
    root_depth = str(repo).rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        if dirpath.count(os.sep) - root_depth >= depth:
            dirnames[:] = []
        names.update(dirnames)
        names.update(f[:-3] for f in filenames if f.endswith(".py"))
    return frozenset(names)


def _first_lines(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n", 2)[:2])
    return text.strip() or type(exc).__name__
