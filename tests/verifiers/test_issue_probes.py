"""The issue's own examples as a probe (verifiers/issue_probes.py): which blocks are taken,
the script they become (run here with this Python), and the fingerprints of its output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ooda.verifiers.issue_probes import (
    behaviour,
    issue_blocks,
    probe_from_issue,
    stable,
    top_package,
)

ISSUE = """Wrong result\r\n\r\n```python\r\nfrom fractions import Fraction\r\nx = Fraction(1, 3)\r\n```\r\n
This works:\n```\nx * 3\n```\nThis does not:\n```\n>>> x / 0\nTraceback (most recent call last):
ZeroDivisionError\n>>> print('after')\nafter\n```\n
```\nTraceback (most recent call last):\n  File "x.py", line 1\nValueError: boom\n```\n
```sh\n$ pip install thing\n```\nAlso `len([1, 2])` is fine and `Fraction` is a name.
"""


def test_python_blocks_sessions_and_inline_calls_are_taken_in_order() -> None:
    blocks = issue_blocks(ISSUE, package="fractions")
    assert blocks == [
        "from fractions import Fraction\nx = Fraction(1, 3)\n",
        "x * 3\n",
        "x / 0\nprint('after')\n",
        "from fractions import *\nlen([1, 2])\n",
    ]
    assert issue_blocks("no code here, only `a name`") == []
    assert issue_blocks("```python\nimport os\n```") == []  # imports alone do nothing


def run_probe(tmp_path: Path, source: str) -> str:
    script = tmp_path / "probe.py"
    script.write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    return done.stdout


def test_the_probe_runs_each_statement_prints_values_and_survives_exceptions(
    tmp_path: Path,
) -> None:
    source = probe_from_issue(ISSUE, package="fractions")
    assert source is not None
    output = run_probe(tmp_path, source)
    assert "Fraction(1, 1)" in output  # the expression's value, as the interpreter shows it
    assert "!! ZeroDivisionError: Fraction(1, 0)" in output
    assert "after" in output and "2" in output
    prints = behaviour(output)
    assert len(prints) == 4 and len(set(prints)) == 4
    assert behaviour(run_probe(tmp_path, source)) == prints  # the same on a second run


def test_addresses_and_paths_do_not_change_a_fingerprint() -> None:
    sep = "=== ooda-issue-block"
    one = f"noise\n{sep} 0\n<Foo object at 0x7f00aa11>\n/work/pkg/mod.py\n"
    two = f"{sep} 0\n<Foo object at 0x7f00bb22>  \n/tmp/xyz/pkg/mod.py\n"
    assert behaviour(one) == behaviour(two)
    assert behaviour(f"{sep} 0\n1\n") != behaviour(f"{sep} 0\n2\n")


def test_blocks_that_differ_between_two_base_runs_are_not_compared() -> None:
    assert stable([["a", "b"], ["a", "c"]]) == ("a", "")
    assert stable([["a", "b"], ["a"]]) == ("a", "")
    assert stable([["a"]]) == ()


def test_the_top_package_is_the_one_package_beside_tests_and_docs(tmp_path: Path) -> None:
    for name in ("pkg", "tests", "docs"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    assert top_package(tmp_path) == "pkg"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "__init__.py").write_text("")
    assert top_package(tmp_path) is None


def test_a_block_of_tests_is_run_by_pytest_and_each_outcome_printed(tmp_path: Path) -> None:
    issue = ("The xfail marker is ignored:\n```python\nimport pytest\n\n\n"
             "def test_xfail_test(request):\n    request.node.add_marker(pytest.mark.xfail)\n"
             "    assert 0\n\n\ndef test_fine():\n    pass\n```\n")
    source = probe_from_issue(issue)
    assert source is not None
    output = run_probe(tmp_path, source)
    assert "XFAIL" in output and "PASSED" in output and "1 passed, 1 xfailed" in output
    assert " in 0." not in output  # no timing: the fingerprint must not change with it
    assert behaviour(run_probe(tmp_path, source)) == behaviour(output)
