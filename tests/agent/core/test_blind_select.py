"""The blind selection's ranking from candidates' evidence (agent/core/blind_select.py): a
broken regression test weighed, not absolute; "no test applied" below "kept them passing";
differential testing on the issue's examples; the last tie-break the sample order."""

from __future__ import annotations

from collections import Counter

from ooda.agent.contracts.protocols import Verdict, VerifierResult
from ooda.agent.core.blind_select import (
    Evidence,
    Policy,
    evidence_of,
    explain,
    issue_changed,
    rank,
)
from ooda.agent.core.consensus import consensus
from ooda.agent.core.records import Attempt


def ev(name: str, order: int, **kw: object) -> Evidence:
    values: dict[str, object] = {"code_key": name, "size": 4}
    values.update(kw)
    return Evidence(attempt_id=name, order=order, **values)  # type: ignore[arg-type]


def winner(evidence: list[Evidence], policy: Policy | None = None) -> str:
    best = rank(evidence, policy or Policy()).best
    assert best is not None
    return best.evidence.attempt_id


def test_a_test_every_reproducing_candidate_breaks_is_changed_by_the_issue() -> None:
    # the issue changes what test_old asserts: both fixes "break" it; the incomplete fix keeps it
    right = ev("right", 0, regression_ran=("t::old", "t::other"), broken=("t::old",),
               behaviour=("b",), base_behaviour=("a",))
    right2 = ev("right2", 1, regression_ran=("t::old", "t::other"), broken=("t::old",),
                behaviour=("b",), base_behaviour=("a",))
    partial = ev("partial", 2, regression_ran=("t::old", "t::other"),
                 behaviour=("a",), base_behaviour=("a",))
    assert issue_changed([right, right2, partial]) == ("t::old",)
    assert winner([partial, right, right2]) in ("right", "right2")
    # without excusing it, "keeps the regression tests" decides for the incomplete fix
    assert winner([partial, right, right2], Policy(issue_changed=False)) == "partial"


def test_a_test_only_some_reproducing_candidates_break_stays_a_regression() -> None:
    good = ev("good", 0, regression_ran=("t::a",), behaviour=("b",), base_behaviour=("a",))
    bad = ev("bad", 1, regression_ran=("t::a",), broken=("t::a",), behaviour=("b",),
             base_behaviour=("a",), samples=3)
    assert issue_changed([good, bad]) == ()
    ranking = rank([bad, good])
    assert ranking.best is not None and ranking.best.evidence.attempt_id == "good"
    assert [r.regression for r in ranking.ranked] == ["kept", "broke"]


def test_no_regression_test_applied_ranks_below_kept_them_passing() -> None:
    untested = ev("untested", 0, samples=2)
    kept = ev("kept", 1, regression_ran=("t::a",))
    assert winner([untested, kept]) == "kept"
    assert winner([untested, kept], Policy(none_below_kept=False)) == "untested"  # votes


def test_a_candidate_that_changes_the_issues_behaviour_beats_one_that_does_not() -> None:
    same = ev("same", 0, behaviour=("a", "x"), base_behaviour=("a", "x"), samples=3)
    fix = ev("fix", 1, behaviour=("a", "y"), base_behaviour=("a", "x"))
    assert winner([same, fix]) == "fix"


def test_the_largest_group_behaving_alike_wins_and_unstable_blocks_are_not_compared() -> None:
    base = ("a", "")  # the second block printed differently on two base runs
    one = ev("one", 0, behaviour=("b", "1"), base_behaviour=base, size=30)
    two = ev("two", 1, behaviour=("b", "2"), base_behaviour=base)
    odd = ev("odd", 2, behaviour=("c", "3"), base_behaviour=base, size=50)
    ranking = rank([one, two, odd])
    assert [r.group for r in ranking.ranked][:2] == [2, 2]
    assert ranking.best is not None and ranking.best.evidence.attempt_id == "one"  # larger diff
    assert winner([one, two, odd], Policy(behaviour_groups=False)) == "odd"


def test_the_last_tie_break_is_the_sample_order() -> None:
    first, second = ev("first", 0), ev("second", 1)
    assert winner([second, first]) == "first"
    assert winner([first, second]) == "first"


def test_a_stage_that_failed_without_per_test_results_broke_them() -> None:
    hung = ev("hung", 0, regression_failed=True, samples=5)
    fine = ev("fine", 1, regression_ran=("t::a",))
    ranking = rank([hung, fine])
    assert ranking.best is not None and ranking.best.evidence.attempt_id == "fine"
    assert ranking.ranked[1].regression == "broke"


def test_the_explanation_names_what_decided() -> None:
    a = ev("a", 0, regression_ran=("t::x",), passed=True)
    b = ev("b", 1, regression_ran=("t::x",), passed=True, samples=2, code_key="k")
    text = explain(rank([a, b]))
    assert text.startswith("b: it passed every check; it keeps its regression tests passing")
    assert "produced by 2 sample(s), the most" in text


def test_evidence_round_trips_through_json() -> None:
    e = ev("x", 3, regression_ran=("t::a",), broken=("t::a",), behaviour=("1",),
           base_behaviour=("0",), critic=0.5)
    assert Evidence.from_json(e.to_json()) == e


def test_reproduction_outcomes_join_the_behaviour_compared() -> None:
    a = Attempt("r1c1", 1, None, [])
    a.patch, a.code_key, a.status = "+x\n", "k", "failed"
    a.verdict = Verdict(status="failed", reason="", results=[VerifierResult(
        "repro", "failed", 0.1, "", "", {
            "outcomes": {"repro_1": "failed", "repro_2": "passed"}, "required": ["repro_1"],
            "probes": {"probe_issue": {"behaviour": ["b0"], "base": ["b0", "b1"]}}})])
    e = evidence_of(a, 0, Counter({"k": 1}))
    assert e.behaviour == ("b0", "missing", "repro_1=failed", "repro_2=passed")
    assert e.base_behaviour == ("b0", "b1", "repro_1=failed", "repro_2=error")
    assert e.changed_behaviour is True and e.repro_required == 0 and e.repro_optional == 1


def _diff(*lines: str) -> str:
    return "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@ def f():\n" + "\n".join(lines) + "\n"


def test_consensus_is_a_soft_vote_over_the_changed_lines() -> None:
    # three samples share the fix's key line; the larger outlier shares nothing
    fix = _diff("-    return x", "+    return x or default")
    fix_plus = _diff("-    return x", "+    return x or default", "+    # keep the default")
    also = _diff("-  return x", "+  return  x or default", "+    log(x)")  # whitespace ignored
    outlier = _diff("-    return x", "+    if x is None:", "+        x = default",
                    "+        log(x)", "+    return x")
    scores = consensus([fix, outlier], [fix, fix_plus, also, outlier])
    assert scores[0] > scores[1]
    assert consensus([fix], [fix, fix]) == [1.0]  # a sample with the same code counts 1
    assert consensus([""], [""]) == [0.0]


def test_consensus_decides_after_votes_and_before_the_diff_size() -> None:
    agreeing = ev("agreeing", 1, consensus=2.5, size=3)
    larger = ev("larger", 0, consensus=0.5, size=9)
    ranking = rank([larger, agreeing])
    assert winner([larger, agreeing]) == "agreeing"
    assert "agree the most with the other samples' (2.5)" in explain(ranking)
    assert winner([larger, agreeing], Policy(consensus=False)) == "larger"
    assert winner([larger, ev("voted", 1, consensus=2.5, samples=2)]) == "voted"
    assert winner([ev("a", 0, consensus=1.0, samples=2), agreeing]) == "a"


def test_the_finalists_are_what_the_checks_left_level_and_the_why_says_the_text_chose() -> None:
    kept = {"regression_ran": ("t::x",), "passed": True}
    a = ev("a", 0, consensus=0.5, **kept)
    b = ev("b", 1, consensus=2.0, **kept)
    broke = ev("c", 2, consensus=3.0, regression_ran=("t::x",), broken=("t::x",))
    ranking = rank([a, b, broke])
    assert [r.evidence.attempt_id for r in ranking.finalists()] == ["b", "a"]
    assert "the checks could not tell it from 1 other(s): the patch text chose" in explain(ranking)
    alone = rank([a, broke])
    assert [r.evidence.attempt_id for r in alone.finalists()] == ["a"]
    assert "patch text chose" not in explain(alone)
    same = ev("d", 3, consensus=0.5, **kept)  # level with a on every part but the sample order
    assert "from 1 other(s): the sample order chose" in explain(rank([a, same, broke]))
