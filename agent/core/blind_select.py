"""Which candidate a blind run submits, chosen without the tests that judge it.

A blind run (docs/SWEBENCH.md) sees only its own checks. Each distinct judged candidate's
`Evidence` is what they said of it: its regression tests (which ran, which broke), the
model's reproduction tests it passed, whether the other checks passed, and how it behaved on
the issue's own examples (verifiers/issue_probes.py) beside the unpatched code's behaviour.
`rank` orders the candidates by, in this order (each step only among those level so far):

1. **regression tests, weighed**: a test every candidate that reproduces the fix breaks is
   one the issue changes (`issue_changed`), not a regression; then a candidate that keeps its
   regression tests passing ranks above one to which no regression test applied, which ranks
   above one that breaks a test;
2. the model's reproduction tests passed (the required ones first);
3. every other check passed (syntax, ruff, security, mypy);
4. **differential testing** on the same inputs — the issue's examples and the reproduction
   tests: a candidate whose behaviour there differs from the base's (it touched what the issue
   reports) first; then the largest group of candidates (counted in samples) that behave
   alike;
5. a model's judgement, where a model is configured (agent/core/critic.py): its score;
6. votes: samples that produced the same code up to formatting;
7. consensus: how much its changed lines agree with the other samples' (agent/core/consensus.py,
   a soft vote);
8. the larger diff (measured on real systems' candidates: bench/selection), then the sample
   order (deterministic).

`Policy` switches each signal off for the ablation bench/selection prints. The record (run.json
`selection`) holds every candidate's evidence, the ranking, the finalists (those level before
the patch-text parts 6-8: what the checks could not tell apart) and the sentence that says why.
Pure functions of the attempts.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from ooda.agent.core.consensus import consensus
from ooda.agent.core.critic import Critic
from ooda.agent.core.records import Attempt

JUDGED = ("passed", "failed", "timeout", "error")
"""Statuses of attempts whose patch the visible checks judged (invalid edits have no patch)."""
TESTS_STAGE = "pytest"
REPRO_STAGE = "repro"
RegressionClass = Literal["kept", "none", "broke"]
_REGRESSION_RANK = {"kept": 2, "none": 1, "broke": 0}
MAX_RECORDED_IDS = 50


@dataclass(frozen=True)
class Evidence:
    """What the visible checks said of one distinct candidate (run.json keeps it)."""

    attempt_id: str
    order: int
    """Its place among the run's samples (the last tie-break)."""
    code_key: str
    size: int
    """Lines its patch adds or removes."""
    samples: int = 1
    """Samples (this one included) that produced its code up to formatting."""
    passed: bool = False
    """It passed every check (the loop's own verdict)."""
    checks_ok: bool = True
    """Every stage other than the regression and reproduction tests passed or was skipped."""
    regression_ran: tuple[str, ...] = ()
    """Regression tests run on it (those passing on the unpatched code)."""
    broken: tuple[str, ...] = ()
    """Of those, the ones that did not pass on it."""
    regression_failed: bool = False
    """The regression stage failed without per-test results (timeout, a crash): all broken."""
    repro_required: int = 0
    repro_optional: int = 0
    """Reproduction tests (the model's) it passed: required, optional."""
    repro_all_required: bool = False
    """It passed every required reproduction test, and there was at least one."""
    behaviour: tuple[str, ...] = ()
    """Its fingerprint per block of the issue's examples ("": not compared); () when the
    examples did not run on it."""
    base_behaviour: tuple[str, ...] = ()
    critic: float | None = None
    """A model's score for it (None: no model judged it)."""
    consensus: float | None = None
    """How much its changed lines agree with the other samples' (None: not measured)."""
    dropped: tuple[str, ...] = ()
    """Files its patch also changed that the edit policy left out before judging (tests,
    configuration): recorded, not weighed (no measurement says it tells right from wrong)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("regression_ran", "broken", "dropped"):
            data[key] = list(data[key])[:MAX_RECORDED_IDS]
        data["regression_ran_count"] = len(self.regression_ran)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("regression_ran", "broken", "behaviour", "base_behaviour", "dropped"):
            values[key] = tuple(values.get(key) or ())
        return cls(**values)

    @property
    def changed_behaviour(self) -> bool | None:
        """Whether it behaves otherwise than the base on some compared block (None: unknown)."""
        pairs = [(mine, base) for mine, base in zip(self.behaviour, self.base_behaviour, strict=False)
                 if mine and base]
        if not pairs:
            return None
        return any(mine != base for mine, base in pairs)

    def compared(self) -> tuple[str, ...]:
        """Its fingerprints on the blocks stable on the base."""
        return tuple(m if b else "" for m, b in zip(self.behaviour, self.base_behaviour, strict=False))


KEY_PARTS = ("regression", "reproduction (required)", "reproduction (optional)", "checks",
             "behaviour changed", "behaviour group", "critic", "votes", "consensus", "size", "order")
"""The parts of a candidate's ranking key, in the order a blind run ranks by."""
TEXT_PARTS = ("votes", "consensus", "size", "order")
"""The parts read from the patch text (and sample order), not from running it or a model: among
finalists every check left level they choose about as well as chance (bench/selection:
"which part decides the pick")."""


@dataclass(frozen=True)
class Policy:
    """Which signals rank the candidates (all on: what a blind run uses)."""

    regression: bool = True
    issue_changed: bool = True
    """Excuse a test every reproducing candidate breaks (else any break counts)."""
    none_below_kept: bool = True
    """"No regression test applied" ranks below "kept them passing" (else level)."""
    reproduction: bool = True
    checks: bool = True
    probe_changed: bool = True
    behaviour_groups: bool = True
    critic: bool = True
    votes: bool = True
    consensus: bool = True
    size: Literal["larger", "smaller", "none"] = "larger"
    order: tuple[str, ...] = KEY_PARTS
    """The key's parts in the order they rank by ("order", the sample order, always last)."""

    def without(self, name: str) -> Policy:
        """This policy with the signal `name` (a field) switched off."""
        if name == "size":
            return replace(self, size="none")
        switched: dict[str, Any] = {name: False}
        return replace(self, **switched)


@dataclass(frozen=True)
class Ranked:
    """One candidate's place: its evidence and the key it was ranked by."""

    evidence: Evidence
    regression: RegressionClass
    unexcused: tuple[str, ...]
    group: int
    """Samples in its behaviour group (0: no behaviour compared)."""
    key: tuple[float, ...]


@dataclass
class Ranking:
    ranked: list[Ranked] = field(default_factory=list)
    issue_changed: tuple[str, ...] = ()
    parts: tuple[str, ...] = KEY_PARTS
    """The names of the key's parts, in order."""

    @property
    def best(self) -> Ranked | None:
        return self.ranked[0] if self.ranked else None

    def finalists(self) -> list[Ranked]:
        """The candidates level with the winner on every part before the patch-text ones:
        what the checks (and a model's judgement) could not tell apart."""
        text = [i for i, part in enumerate(self.parts) if part in TEXT_PARTS]
        return self.level_with_best(min(text) if text else len(self.parts))

    def level_with_best(self, depth: int) -> list[Ranked]:
        """Candidates whose key equals the winner's in its first `depth` parts."""
        if not self.ranked:
            return []
        head = self.ranked[0].key[:depth]
        return [r for r in self.ranked if r.key[:depth] == head]


# --------------------------------------------------------------------------- evidence


def vote_counts(attempts: list[Attempt]) -> Counter[str]:
    """Samples per code key, over every attempt whose patch was judged (duplicates too: each
    is a sample that arrived at the same code)."""
    return Counter(a.code_key for a in attempts if a.code_key and a.status in JUDGED)


def evidence_of(attempt: Attempt, order: int, votes: Counter[str]) -> Evidence:
    """`attempt`'s evidence; `order`: its place among the run's samples."""
    results = attempt.verdict.results if attempt.verdict else []
    by_name = {r.name: r for r in results}
    tests = by_name.get(TESTS_STAGE)
    ran: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()
    failed_whole = False
    if tests is not None and tests.status not in ("skipped",):
        required = tests.details.get("required")
        if isinstance(required, dict) and required:
            ran = tuple(str(t) for t in required)
            broken = tuple(str(t) for t, o in required.items() if o != "passed")
        elif tests.status != "passed":
            failed_whole = True
    repro = by_name.get(REPRO_STAGE)
    outcomes = repro.details.get("outcomes") if repro else None
    listed = repro.details.get("required") if repro else None
    passed_tests = ({str(n) for n, o in outcomes.items() if o == "passed"}
                    if isinstance(outcomes, dict) else set())
    required_names = {str(n) for n in listed} if isinstance(listed, list) else set()
    probes = repro.details.get("probes") if repro else None
    behaviour: tuple[str, ...] = ()
    base: tuple[str, ...] = ()
    if isinstance(probes, dict):
        for probe in probes.values():  # one probe per run (the issue's examples)
            if isinstance(probe, dict):
                behaviour = tuple(str(x) for x in probe.get("behaviour") or ())
                base = tuple(str(x) for x in probe.get("base") or ())
                behaviour += ("missing",) * (len(base) - len(behaviour))  # cut short
    if isinstance(outcomes, dict) and outcomes:
        # the reproduction tests are inputs too: how each ended, beside how it ended on the
        # base (a required one failed there with an assertion, an optional one otherwise)
        names = sorted(str(n) for n in outcomes)
        behaviour += tuple(f"{n}={outcomes[n]}" for n in names)
        base += tuple(f"{n}={'failed' if n in required_names else 'error'}" for n in names)
    others_ok = all(r.status in ("passed", "skipped") for r in results
                    if r.name not in (TESTS_STAGE, REPRO_STAGE))
    return Evidence(
        attempt_id=attempt.attempt_id, order=order, code_key=attempt.code_key or "",
        size=_size(attempt.patch), samples=votes[attempt.code_key or ""] or 1,
        passed=attempt.status == "passed",
        checks_ok=others_ok and attempt.status != "error",
        regression_ran=ran, broken=broken, regression_failed=failed_whole,
        repro_required=len(passed_tests & required_names),
        repro_optional=len(passed_tests - required_names),
        repro_all_required=bool(required_names) and required_names <= passed_tests,
        behaviour=behaviour, base_behaviour=base,
        dropped=tuple(d.path for d in attempt.dropped))


# --------------------------------------------------------------------------- ranking


def issue_changed(evidence: list[Evidence]) -> tuple[str, ...]:
    """Regression tests the issue itself changes: every candidate that reproduces the fix and
    ran the test broke it, and at least two did. Reproducing: passing every required
    reproduction test when some candidate does; else behaving otherwise than the base on the
    issue's examples when some candidate does; else every candidate."""
    reproducing = [e for e in evidence if e.repro_all_required]
    if not reproducing:
        reproducing = [e for e in evidence if e.changed_behaviour]
    if not reproducing:
        reproducing = list(evidence)
    changed = []
    for test in sorted({t for e in evidence for t in e.broken}):
        ran = [e for e in reproducing if test in e.regression_ran]
        if len(ran) >= 2 and all(test in e.broken for e in ran):
            changed.append(test)
    return tuple(changed)


def rank(evidence: list[Evidence], policy: Policy = Policy()) -> Ranking:
    """The candidates best first (see the module docstring)."""
    excused = set(issue_changed(evidence)) if policy.regression and policy.issue_changed \
        else set()
    groups: Counter[tuple[str, ...]] = Counter()
    for e in evidence:
        if e.changed_behaviour is not None:
            groups[e.compared()] += e.samples
    ranked = []
    for e in evidence:
        unexcused = tuple(t for t in e.broken if t not in excused)
        regression: RegressionClass
        if e.regression_failed or unexcused:
            regression = "broke"
        elif e.regression_ran:
            regression = "kept"
        else:
            regression = "none"
        level = _REGRESSION_RANK[regression]
        if not policy.none_below_kept and level == 1:
            level = 2
        changed = e.changed_behaviour
        group = groups[e.compared()] if changed is not None else 0
        size = {"larger": e.size, "smaller": -e.size, "none": 0}[policy.size]
        parts: dict[str, float] = {
            "regression": level if policy.regression else 0,
            "reproduction (required)": e.repro_required if policy.reproduction else 0,
            "reproduction (optional)": e.repro_optional if policy.reproduction else 0,
            "checks": int(e.checks_ok) if policy.checks else 0,
            # unknown behaviour sits between "changed" and "unchanged"
            "behaviour changed": {True: 2, None: 1, False: 0}[changed]
            if policy.probe_changed else 0,
            "behaviour group": group if policy.behaviour_groups else 0,
            "critic": e.critic if policy.critic and e.critic is not None else 0.0,
            "votes": e.samples if policy.votes else 0,
            "consensus": e.consensus if policy.consensus and e.consensus is not None else 0.0,
            "size": size,
        }
        key = tuple(parts[name] for name in policy.order if name != "order") + (-e.order,)
        ranked.append(Ranked(e, regression, unexcused, group, key))
    ranked.sort(key=lambda r: r.key, reverse=True)
    names = tuple(n for n in policy.order if n != "order") + ("order",)
    return Ranking(ranked, tuple(sorted(excused)), names)



def distinct_judged(attempts: list[Attempt]) -> list[Attempt]:
    return [a for a in attempts if a.status in JUDGED and a.patch and a.duplicate_of is None]


def choose(candidates: list[Attempt], everyone: list[Attempt], critic: Critic | None = None,
           deadline: float | None = None, policy: Policy = Policy(),
           ) -> tuple[Attempt | None, dict[str, Any]]:
    """The candidate to submit among `candidates` (votes counted over `everyone`, sample
    order taken from it), and the record of why: {"winner", "why", "evidence", "ranking",
    "finalists", "issue_changed", "tests", "critic"}. `critic`: the model that scores the finalists still
    level before its part of the key (asked before `deadline`). None when no candidate has a
    judged patch."""
    votes = vote_counts(everyone)
    order = {a.attempt_id: i for i, a in enumerate(everyone)}
    judged = distinct_judged(candidates)
    if not judged:
        return None, {"winner": None, "why": "no candidate produced a patch the checks judged"}
    evidence = [evidence_of(a, order.get(a.attempt_id, len(order)), votes) for a in judged]
    agreement = consensus([a.patch for a in judged], [a.patch for a in everyone if a.patch])
    evidence = [replace(e, consensus=c) for e, c in zip(evidence, agreement, strict=True)]
    ranking = rank(evidence, policy)
    finalists = ranking.level_with_best(ranking.parts.index("critic"))
    if critic is not None and policy.critic and len(finalists) >= 2:
        ids = {r.evidence.attempt_id for r in finalists}
        shown = sorted((a for a in judged if a.attempt_id in ids),
                       key=lambda a: order.get(a.attempt_id, len(order)))
        scores = critic(shown, deadline if deadline is not None else time.monotonic() + 120)
        evidence = [replace(e, critic=scores.get(e.attempt_id)) for e in evidence]
        ranking = rank(evidence, policy)
    best = ranking.best
    assert best is not None
    winner = next(a for a in judged if a.attempt_id == best.evidence.attempt_id)
    record = {
        "winner": winner.attempt_id,
        "why": explain(ranking),
        "evidence": [e.to_json() for e in evidence],
        "ranking": [{"attempt_id": r.evidence.attempt_id, "regression": r.regression,
                     "unexcused": list(r.unexcused)[:MAX_RECORDED_IDS], "group": r.group,
                     "key": list(r.key)} for r in ranking.ranked],
        "key_parts": list(ranking.parts),
        "finalists": [r.evidence.attempt_id for r in ranking.finalists()][:MAX_RECORDED_IDS],
        "issue_changed": list(ranking.issue_changed)[:MAX_RECORDED_IDS],
        "tests": test_tallies(everyone),
        **({"critic": critic.report.record()} if critic is not None else {}),
    }
    return winner, record


def explain(ranking: Ranking) -> str:
    """The sentence that says why the first candidate was chosen."""
    best = ranking.best
    if best is None:
        return "no candidate"
    e = best.evidence
    said = ["it passed every check" if e.passed else
            "it did not pass every check (another did, and ranks lower)"
            if any(r.evidence.passed for r in ranking.ranked) else
            "no candidate passed every check"]
    said += [{"kept": "it keeps its regression tests passing",
             "none": "no regression test applied to it",
             "broke": f"it breaks {len(best.unexcused) or 'its'} regression test(s) "
                      "(so does every other candidate)"}[best.regression]]
    if ranking.issue_changed:
        said.append(f"{len(ranking.issue_changed)} test(s) every reproducing candidate breaks "
                    "count as changed by the issue")
    if e.repro_required or e.repro_optional:
        said.append(f"it passes {e.repro_required + e.repro_optional} reproduction test(s)")
    said.append("it passed every other check" if e.checks_ok else "it failed another check")
    if e.dropped:
        said.append(f"its changes to {len(e.dropped)} test or configuration file(s) were left "
                    "out before judging")
    if e.changed_behaviour is not None:
        said.append("it behaves otherwise than the unpatched code on the issue's examples"
                    if e.changed_behaviour else
                    "it behaves as the unpatched code on the issue's examples")
        if best.group:
            said.append(f"{best.group} sample(s) behave as it does there")
    if e.critic is not None:
        said.append(f"the model's judgement gives it {e.critic:g}")
    decided = "order"
    for depth, part in enumerate(ranking.parts, start=1):
        if len(ranking.level_with_best(depth)) == 1:
            decided = part
            rivals = len(ranking.level_with_best(depth - 1)) - 1
            if rivals and part == "votes":
                said.append(f"{rivals} other(s) stood level; its code was produced by "
                            f"{e.samples} sample(s), the most")
            elif rivals and part == "consensus":
                said.append(f"{rivals} other(s) stood level; its changed lines agree the most "
                            f"with the other samples' ({e.consensus:g})")
            elif rivals:
                said.append(f"{rivals} other(s) stood level until the {part} decided")
            break
    level = len(ranking.finalists()) - 1
    if level:
        chooser = "the sample order" if decided == "order" else "the patch text"
        said.append(f"the checks could not tell it from {level} other(s): {chooser} chose")
    return f"{e.attempt_id}: " + "; ".join(said)


def test_tallies(attempts: list[Attempt]) -> dict[str, dict[str, Any]]:
    """Per reproduction test: how many distinct candidates it ran on and how many passed it;
    `weak` when it ran on two or more and none passed (a wrong expectation, or a fix no
    sample found: either way it told no candidate apart)."""
    ran: dict[str, int] = {}
    passed: dict[str, int] = {}
    for attempt in attempts:
        if attempt.duplicate_of is not None or attempt.verdict is None:
            continue
        repro = next((r for r in attempt.verdict.results if r.name == REPRO_STAGE), None)
        outcomes = repro.details.get("outcomes") if repro else None
        if not isinstance(outcomes, dict):
            continue
        for name, outcome in outcomes.items():
            ran[str(name)] = ran.get(str(name), 0) + 1
            passed[str(name)] = passed.get(str(name), 0) + (outcome == "passed")
    return {name: {"ran_on": n, "passed_by": passed[name], "weak": n >= 2 and not passed[name]}
            for name, n in sorted(ran.items())}


def _size(patch: str) -> int:
    return sum(1 for line in patch.splitlines()
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---")))
