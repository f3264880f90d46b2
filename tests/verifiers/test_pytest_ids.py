"""SWE-bench's test-id quirks in grading: truncated parametrized ids (verifiers/pytest_check/parse.py)."""

from __future__ import annotations

from ooda.verifiers.pytest_check.parse import NodeIndex, match_id, run_target, truncated

NODES = [
    "tests/test_cli.py::test_locate_app[cliapp.factory-create_app]",
    "tests/test_cli.py::test_locate_app[cliapp.factory-no_app]",
    "tests/test_cli.py::test_locate_app[cliapp.app-app]",
    "tests/test_cli.py::test_other",
]


def test_a_truncated_id_stands_for_the_parametrizations_it_begins() -> None:
    cut = "tests/test_cli.py::test_locate_app[cliapp.factory-"
    assert truncated(cut) and not truncated(NODES[0]) and not truncated("tests/test_cli.py")
    assert match_id(cut, NODES) == NODES[:2]
    assert run_target(cut) == "tests/test_cli.py::test_locate_app"
    assert run_target(NODES[0]) == NODES[0]


def test_a_truncated_id_of_a_file_that_failed_to_collect_is_that_error() -> None:
    cut = "tests/test_x.py::test_a[1-"
    assert match_id(cut, ["tests/test_x.py"]) == ["tests/test_x.py"]
    assert match_id(cut, ["tests/test_y.py::test_a[1-2]"]) == []


def test_an_id_cut_at_a_space_and_closed_stands_for_the_parametrization_it_begins() -> None:
    # sqlfluff-1517 lists `[select id from tbl;;]` for `[select id from tbl;;-Could not parse: ;]`
    nodes = [
        "t.py::test_semi[select id from tbl;;-Could not parse: ;]",
        "t.py::test_semi[select id from tbl;;;;;;-Could not parse: ;;;;;]",
        "t.py::test_semi[select id from tbl;;select id2 from tbl2;-Could not parse: ;select]",
        "t.py::test_semi[select id from tbl;-]",
    ]
    assert match_id("t.py::test_semi[select id from tbl;;]", nodes) == nodes[:1]
    assert match_id("t.py::test_semi[select id from tbl;]", nodes) == nodes[3:]
    assert match_id("t.py::test_semi[select]", nodes) == []
    assert match_id(nodes[1], nodes) == [nodes[1]]


def test_a_parameter_may_hold_double_colons() -> None:
    node = "t.py::test_parses[SelectClauseElementSegment-NULL::INT-True]"
    cut = "t.py::test_parses[SelectClauseElementSegment-NULL::INT"
    assert truncated(cut) and not truncated(node)
    assert match_id(cut, [node, "t.py::test_other"]) == [node]
    assert run_target(cut) == "t.py::test_parses"


def test_passed_before_is_said_only_when_the_base_run_showed_it() -> None:
    from ooda.verifiers.pytest_check.grade import Graded, summarize
    from ooda.verifiers.pytest_check.parse import TestRun

    bad = [Graded("t.py::test_a", "pass_to_pass", "failed", "t.py::test_a")]
    assert "before the change" not in summarize("1 failed:", bad, TestRun())
    measured = summarize("1 failed:", bad, TestRun(), ["t.py::test_a"])
    assert "(passed before the change)" in measured
    broken = summarize("1 failed:", bad, TestRun(), [])
    assert "(did not pass before the change either)" in broken


def test_an_id_with_newlines_in_its_parameter_matches_pytests_escaped_node_id() -> None:
    from ooda.verifiers.pytest_check import match_id

    swebench = 'tests/t.py::T::test_f[\n    "a {:c}".format(None)\n    ]'
    node = 'tests/t.py::T::test_f[\\n    "a {:c}".format(None)\\n    ]'
    assert match_id(swebench, [node, "tests/t.py::T::test_g"]) == [node]


def test_a_rewritten_parameter_stands_for_the_one_parametrization_no_other_id_claims() -> None:
    """pylint-7080 lists `test_stdin[/mymodule.py]` for a parameter that holds the checkout's
    absolute path; its sibling `[mymodule.py-mymodule-mymodule.py]` matches exactly."""
    run = {
        "tests/test_self.py::TestRunTC::test_stdin[/work/tests/mymodule.py-mymodule-"
        "/work/tests/mymodule.py]": "passed",
        "tests/test_self.py::TestRunTC::test_stdin[mymodule.py-mymodule-mymodule.py]": "passed",
        "tests/test_self.py::TestRunTC::test_other": "passed",
    }
    odd = "tests/test_self.py::TestRunTC::test_stdin[/mymodule.py]"
    plain = "tests/test_self.py::TestRunTC::test_stdin[mymodule.py-mymodule-mymodule.py]"
    assert match_id(odd, run) == []  # alone, it names nothing
    assert match_id(odd, run, [odd, plain]) == [next(iter(run))]
    assert match_id(plain, run, [odd, plain]) == [plain]
    # two parametrizations left for one unmatched id: which one it was cannot be told
    more = {**run, "tests/test_self.py::TestRunTC::test_stdin[x-y-z]": "failed"}
    assert match_id(odd, more, [odd, plain]) == []


def test_brackets_inside_parameters_need_not_balance() -> None:
    # a parameter holding "[=" (the hidden set's `test_x[[=b-expected3]`): a whole id, not a cut
    whole = "tests/test_x.py::test_x[[=b-expected3]"
    nodes = [whole, "tests/test_x.py::test_x[a-expected0]"]
    assert not truncated(whole) and run_target(whole) == whole
    assert match_id(whole, nodes) == [whole]
    cut = "tests/test_x.py::test_x[[=b-exp"
    assert truncated(cut) and run_target(cut) == "tests/test_x.py::test_x"
    assert match_id(cut, nodes) == [whole]


def test_an_index_of_the_run_matches_as_the_plain_list_does_in_the_run_s_order() -> None:
    """Many ids graded against one run use a NodeIndex (sorted once, found by prefix): the
    same nodes as from the plain list, in the run's order, for every kind of id."""
    run = ["t.py::test_b[2]", "t.py::test_b[1]", "t.py::T::test_m", "t.py::test_b2",
           "u/v.py::test_c[x-y]", "u/v.py::test_c[x-z]", "u/w.py"]
    ids = ["t.py", "u", "t.py::test_b", "t.py::T", "u/v.py::test_c[x-", "u/v.py::test_c[x]",
           "u/w.py::test_gone", "t.py::test_b[9]", "t.py::test_none", run[0]]
    index = NodeIndex(run)
    for test_id in ids:
        assert match_id(test_id, index, ids) == match_id(test_id, run, ids), test_id
    assert match_id("t.py::test_b", index) == ["t.py::test_b[2]", "t.py::test_b[1]"]
    assert match_id("t.py", index) == run[:4]
    assert match_id("u/w.py::test_gone", index) == ["u/w.py"]  # its collection error
