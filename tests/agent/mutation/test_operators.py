"""The mutation operators (agent/mutation/operators.py): what each makes of a line, that the rest
of the file is left byte for byte, and that every mutant parses."""

from __future__ import annotations

import ast

from ooda.agent.mutation.operators import OPERATORS, Change, apply, mutations

SOURCE = '''\
"""A module."""


def window(items, start, size):   # a comment kept
    end = start + size
    if start < 0 and size > 0:
        return []
    total = 0
    for item in items:
        total += item
    return items[start:end]
'''


def mutated_lines(source: str, line: int) -> dict[str, list[str]]:
    """Operator -> the mutated text of `line` (its first line) for each mutant there."""
    found: dict[str, list[str]] = {}
    for m in mutations("m.py", source, [line]):
        text = apply(source, [m.change])
        found.setdefault(m.operator, []).append(text.splitlines()[line - 1].strip())
    return found


def test_every_mutant_parses_and_changes_only_its_span() -> None:
    every = mutations("m.py", SOURCE, list(range(1, 12)))
    assert len(every) > 50
    assert {m.operator for m in every} <= set(OPERATORS)
    for m in every:
        text = apply(SOURCE, [m.change])
        ast.parse(text)
        assert text != SOURCE
        assert text[: m.change.start] == SOURCE[: m.change.start]
        assert text.endswith(SOURCE[m.change.end:])


def test_comparison_arithmetic_and_boolean_operators() -> None:
    line6 = mutated_lines(SOURCE, 6)
    assert "if start <= 0 and size > 0:" in line6["comparison"]
    assert "if start < 0 and size >= 0:" in line6["comparison"]
    assert "if start < 0 or size > 0:" in line6["boolean"]
    assert "if start < 0:" in line6["boolean"]
    assert "if not (start < 0 and size > 0):" in line6["condition"]
    assert "if True:" in line6["condition"]
    assert "if start < 1 and size > 0:" in line6["off_by_one"]
    line5 = mutated_lines(SOURCE, 5)
    assert "end = start - size" in line5["arithmetic"]
    assert "end = start" in line5["arithmetic"]
    assert "end = size" in line5["arithmetic"]
    assert "end = size + start" in line5["swap"]
    assert "end = start + items" in line5["variable"]
    assert "end = max(end, start + size)" in line5["clamp"]
    line10 = mutated_lines(SOURCE, 10)
    assert "total -= item" in line10["arithmetic"]
    assert "total = item" in line10["arithmetic"]


def test_slices_returns_statements_and_constants() -> None:
    line11 = mutated_lines(SOURCE, 11)
    assert "return items[start:]" in line11["slice"]
    assert "return items[:end]" in line11["slice"]
    assert "return items[start:end + 1]" in line11["off_by_one"]
    assert "return total" in line11["return_value"]
    line7 = mutated_lines(SOURCE, 7)
    assert "return [[]]" in line7["constant"]
    assert "return [start]" in line7["constant"]
    assert "pass" in line7["statement"]
    line8 = mutated_lines(SOURCE, 8)
    assert "total = 1" in line8["off_by_one"]
    assert "total = start" in line8["variable"]  # a constant where a variable belongs
    deleted_or_doubled = [apply(SOURCE, [m.change]) for m in mutations("m.py", SOURCE, [10])
                          if m.operator == "statement"]
    assert any("        total += item\n        total += item\n" in t for t in deleted_or_doubled)
    assert any("    for item in items:\n        pass\n" in t for t in deleted_or_doubled)


def test_calls_arguments_attributes_and_subscripts() -> None:
    source = ("def f(a, b, table, node):\n"
              "    x = g(a, b)\n"
              "    y = table[a, b] + table[a][b]\n"
              "    return any(node.left for _ in a) or node.right\n")
    line2 = mutated_lines(source, 2)
    assert "x = g(b, a)" in line2["swap"]
    assert "x = g(a + 1, b)" in line2["off_by_one"]
    assert "x = a" in line2["call"]
    assert "x = g(a[1:], b)" in line2["slice"]
    assert "x = g(a - b, b)" in line2["variable"]
    line3 = mutated_lines(source, 3)
    assert "y = table[b, a] + table[a][b]" in line3["swap"]
    assert "y = table[a, b] + table[b][a]" in line3["swap"]
    line4 = mutated_lines(source, 4)
    assert "return all(node.left for _ in a) or node.right" in line4["call"]
    assert "return any(node.right for _ in a) or node.right" in line4["attribute"]


def test_operand_off_by_one_keeps_precedence() -> None:
    source = "def f(n):\n    return [1] + (len(n)) * [0] + n * 2\n"
    texts = [apply(source, [m.change]) for m in mutations("m.py", source, [2])
             if m.operator == "off_by_one"]
    assert any("(len(n) - 1) * [0]" in t for t in texts)
    assert any("(n + 1) * 2" in t for t in texts)
    assert not any("n + 1 * 2" in t for t in texts)


def test_a_constant_loop_condition_becomes_a_variable_and_a_missing_condition_is_added() -> None:
    source = ("def f(queue, node):\n"
              "    while True:\n"
              "        if node.next is None:\n"
              "            return queue\n")
    assert "while queue:" in mutated_lines(source, 2)["condition"]
    assert "if node is None or node.next is None:" in mutated_lines(source, 3)["condition"]


def test_unreadable_source_gives_nothing() -> None:
    assert mutations("m.py", "def f(:\n", [1]) == []
    assert apply("abcdef", [Change(1, 2, "X"), Change(4, 4, "Y")]) == "aXcdYef"
