"""The mutation operators: the small edits one file's suspicious lines are given, each a span of
the file's text and what replaces it, so every other byte of the file (its formatting, its
comments) stays as it was.

The file is read with libcst, a concrete syntax tree: each node knows its exact place in the
text (`WhitespaceInclusivePositionProvider`, the span `code_for_node` renders) and which names
are in scope where it stands (`ScopeProvider`), which the "wrong variable" and "return another
value" operators need; an `ast` tree has neither the operators' positions nor the scopes.

Operators, by `OPERATORS` name (the order is the priority within one line; agent/mutation/
mutants.py ranks across lines):
comparison (`<` for `<=`, `==` for `!=`, `is`/`in` negated); off_by_one (an integer constant, an
index, a slice bound, a call argument, an operand, a comparison's right side ±1); arithmetic
(augmented, arithmetic and bitwise operators, an operand dropped); swap (two arguments of a call,
two operands, two elements of a tuple, two subscripts, a conditional's branches); boolean
(`and`/`or`, one side dropped, a `not` dropped); condition (negated, always true / false, a
constant loop condition replaced by a variable, `v is None or ...`, `... or not v`); slice (a bound
dropped, a sequence argument sliced from 1); call (replaced by its argument; any/all, min/max);
constant (True/False; `[]` as `[[]]` or `[v]`); return_value (`return` of another name in
scope); variable (a name read, a call or an integer constant replaced by a variable in scope);
attribute (another
attribute name the file uses); statement (deleted, or duplicated); clamp (`x = e` as
`x = max(x, e)`, `min(x, e)`, `max(0, e)`).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import (
    BuiltinScope,
    CodeRange,
    ExpressionContext,
    ExpressionContextProvider,
    MetadataWrapper,
    PositionProvider,
    Scope,
    ScopeProvider,
    WhitespaceInclusivePositionProvider,
)

OPERATORS = ("comparison", "off_by_one", "arithmetic", "swap", "boolean", "condition", "slice",
             "call", "constant", "return_value", "variable", "attribute", "statement", "clamp")
"""Every operator's name, in priority order (a lower index is tried first on a line)."""
PRIORITY = {name: index for index, name in enumerate(OPERATORS)}


@dataclass(frozen=True)
class Change:
    """Replace the file's text[start:end] by `text`."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Mutation:
    """One operator applied once to one file."""

    path: str
    line: int
    """The line it stands on (where its node starts)."""
    operator: str
    description: str
    """What it does, one short line ("`<` -> `<=`")."""
    change: Change

    @property
    def priority(self) -> int:
        return PRIORITY[self.operator]


_COMPARISONS: dict[type[cst.BaseCompOp], tuple[type[cst.BaseCompOp], ...]] = {
    cst.LessThan: (cst.LessThanEqual, cst.GreaterThanEqual, cst.GreaterThan, cst.Equal,
                   cst.NotEqual),
    cst.LessThanEqual: (cst.LessThan, cst.GreaterThan, cst.GreaterThanEqual, cst.Equal,
                        cst.NotEqual),
    cst.GreaterThan: (cst.GreaterThanEqual, cst.LessThanEqual, cst.LessThan, cst.Equal,
                      cst.NotEqual),
    cst.GreaterThanEqual: (cst.GreaterThan, cst.LessThan, cst.LessThanEqual, cst.Equal,
                           cst.NotEqual),
    cst.Equal: (cst.NotEqual, cst.LessThanEqual, cst.GreaterThanEqual, cst.LessThan,
                cst.GreaterThan),
    cst.NotEqual: (cst.Equal, cst.LessThan, cst.GreaterThan, cst.LessThanEqual,
                   cst.GreaterThanEqual),
    cst.Is: (cst.IsNot, cst.Equal),
    cst.IsNot: (cst.Is, cst.NotEqual),
    cst.In: (cst.NotIn,),
    cst.NotIn: (cst.In,),
}
"""A comparison operator -> its replacements, the likeliest first (a bound off by one)."""

_BINARY: dict[type[cst.BaseBinaryOp], tuple[type[cst.BaseBinaryOp], ...]] = {
    cst.Add: (cst.Subtract, cst.Multiply),
    cst.Subtract: (cst.Add, cst.FloorDivide, cst.Modulo),
    cst.Multiply: (cst.FloorDivide, cst.Divide, cst.Add, cst.Power),
    cst.Divide: (cst.FloorDivide, cst.Multiply),
    cst.FloorDivide: (cst.Divide, cst.Modulo, cst.Multiply),
    cst.Modulo: (cst.FloorDivide, cst.Divide),
    cst.Power: (cst.Multiply,),
    cst.LeftShift: (cst.RightShift,),
    cst.RightShift: (cst.LeftShift,),
    cst.BitAnd: (cst.BitOr, cst.BitXor),
    cst.BitOr: (cst.BitAnd, cst.BitXor),
    cst.BitXor: (cst.BitAnd, cst.BitOr),
    cst.MatrixMultiply: (),
}
_AUGMENTED: dict[type[cst.BaseAugOp], tuple[type[cst.BaseAugOp], ...]] = {
    cst.AddAssign: (cst.SubtractAssign, cst.MultiplyAssign),
    cst.SubtractAssign: (cst.AddAssign,),
    cst.MultiplyAssign: (cst.FloorDivideAssign, cst.DivideAssign, cst.AddAssign),
    cst.DivideAssign: (cst.FloorDivideAssign, cst.MultiplyAssign),
    cst.FloorDivideAssign: (cst.DivideAssign, cst.ModuloAssign, cst.MultiplyAssign),
    cst.ModuloAssign: (cst.FloorDivideAssign,),
    cst.PowerAssign: (cst.MultiplyAssign,),
    cst.LeftShiftAssign: (cst.RightShiftAssign,),
    cst.RightShiftAssign: (cst.LeftShiftAssign,),
    cst.BitAndAssign: (cst.BitOrAssign, cst.BitXorAssign),
    cst.BitOrAssign: (cst.BitAndAssign, cst.BitXorAssign),
    cst.BitXorAssign: (cst.BitAndAssign, cst.BitOrAssign),
    cst.MatrixMultiplyAssign: (),
}
_NON_COMMUTATIVE = (cst.Subtract, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power,
                    cst.LeftShift, cst.RightShift)
_SIMPLE_STATEMENTS = (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr, cst.Return,
                      cst.Break, cst.Continue, cst.Raise, cst.Del)
_NOT_VARIABLES = (cst.FunctionDef, cst.ClassDef, cst.Import, cst.ImportFrom)
_CALLEE_SWAPS = {"any": "all", "all": "any", "min": "max", "max": "min"}
MAX_NAMES = 8
"""At most this many variables in scope stand in for one name (its own scope's first)."""


def mutations(path: str, source: str, lines: Sequence[int], *,
              parsing_only: bool = True) -> list[Mutation]:
    """Every operator applied once to each node standing on one of `lines` of `source` (the
    file `path`), in the order of `lines` and then `OPERATORS`; [] for a file libcst cannot
    read. With `parsing_only`, each mutated file still parses (a parse of the whole file per
    mutation: on a large file, most of the time; mutants.parsing checks as they are drawn)."""
    try:
        wrapper = MetadataWrapper(cst.parse_module(source))
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return []
    collector = _Collector(path, source, set(lines), wrapper.module, _attributes(source))
    wrapper.visit(collector)
    order = {line: index for index, line in enumerate(lines)}
    found = sorted(collector.found, key=lambda m: (order[m.line], m.priority))
    return [m for m in found if not parsing_only or _parses(source, m.change)]


def apply(source: str, changes: Sequence[Change]) -> str:
    """`source` with `changes` (non-overlapping) made."""
    for change in sorted(changes, key=lambda c: c.start, reverse=True):
        source = source[: change.start] + change.text + source[change.end:]
    return source


def _attributes(source: str) -> list[str]:
    """The attribute names `source` uses (`x.name`), in the order they first appear."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = [node for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    found.sort(key=lambda node: (node.lineno, node.col_offset))
    return list(dict.fromkeys(node.attr for node in found))


def _parses(source: str, change: Change) -> bool:
    try:
        ast.parse(apply(source, [change]))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


class _Collector(cst.CSTVisitor):
    """Walks the tree once; on each node whose first line is a target, adds its mutations."""

    METADATA_DEPENDENCIES = (PositionProvider, WhitespaceInclusivePositionProvider,
                             ScopeProvider, ExpressionContextProvider)

    def __init__(self, path: str, source: str, lines: set[int], module: cst.Module,
                 attributes: list[str]) -> None:
        super().__init__()
        self.path = path
        self.lines = lines
        self.module = module
        self.source = source
        self.attributes = attributes
        self.found: list[Mutation] = []
        self._callees: set[int] = set()
        """The ids of names called as functions (no variable stands for them)."""
        self._starts = [0]
        for text_line in source.splitlines(keepends=True):
            self._starts.append(self._starts[-1] + len(text_line))

    # ---------------------------------------------------------------- helpers

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _on_target(self, node: cst.CSTNode) -> bool:
        return self._line(node) in self.lines

    def _offset(self, position: CodeRange, end: bool = False) -> int:
        point = position.end if end else position.start
        return self._starts[point.line - 1] + point.column

    def _span(self, node: cst.CSTNode) -> tuple[int, int]:
        position = self.get_metadata(WhitespaceInclusivePositionProvider, node)
        return self._offset(position), self._offset(position, end=True)

    def _code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def _add(self, node: cst.CSTNode, operator: str, text: str, description: str,
             line: int | None = None) -> None:
        start, end = self._span(node)
        self.found.append(Mutation(self.path, line or self._line(node), operator,
                                   description, Change(start, end, text)))

    def _replace(self, node: cst.CSTNode, new: cst.CSTNode, operator: str,
                 description: str = "", line: int | None = None) -> None:
        text = self._code(new)
        if text == self._code(node):
            return
        self._add(node, operator, text,
                  description or f"`{_short(self._code(node))}` -> `{_short(text)}`", line)

    def _names_in_scope(self, node: cst.CSTNode) -> list[str]:
        """The variables (not functions, classes or modules) visible where `node` stands:
        its own scope's first, then the enclosing ones' (builtins left out)."""
        try:
            scope: Scope | None = self.get_metadata(ScopeProvider, node)
        except KeyError:
            return []
        names: list[str] = []
        while scope is not None and not isinstance(scope, BuiltinScope):
            for assignment in scope.assignments:
                target = getattr(assignment, "node", None)
                if isinstance(target, _NOT_VARIABLES) or assignment.name in names:
                    continue
                names.append(assignment.name)
            parent = scope.parent
            scope = None if parent is scope else parent
        return [n for n in names if n.isidentifier()]

    def _others(self, node: cst.CSTNode, current: str, first: Sequence[str] = ()) -> list[str]:
        """Up to MAX_NAMES variables in scope at `node` other than `current`, `first` first."""
        names = [n for n in dict.fromkeys([*first, *self._names_in_scope(node)])
                 if n != current]
        return names[:MAX_NAMES]

    # ---------------------------------------------------------------- operators

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not self._on_target(node):
            return
        for index, target in enumerate(node.comparisons):
            for replacement in _COMPARISONS.get(type(target.operator), ()):
                self._replace(target.operator, _same_spacing(target.operator, replacement),
                              "comparison",
                              line=self._line(node))
            self._plus_minus_one(target.comparator, "comparison's right side",
                                 self._line(node))
            if index == 0 and len(node.comparisons) == 1 and isinstance(
                    target.operator, (cst.LessThan, cst.LessThanEqual, cst.GreaterThan,
                                      cst.GreaterThanEqual, cst.Equal, cst.NotEqual)):
                swapped = node.with_changes(left=target.comparator,
                                            comparisons=[target.with_changes(
                                                comparator=node.left)])
                self._replace(node, swapped, "swap", "operands swapped")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not self._on_target(node):
            return
        line = self._line(node)
        for replacement in _BINARY.get(type(node.operator), ()):
            self._replace(node.operator, _same_spacing(node.operator, replacement), "arithmetic",
                          line=line)
        if isinstance(node.operator, (*_NON_COMMUTATIVE, cst.Add)):  # (`+` joins strings)
            self._replace(node, node.with_changes(left=node.right, right=node.left), "swap",
                          "operands swapped")
        if isinstance(node.operator, (cst.Add, cst.Subtract)):  # a term too many
            self._replace(node, node.left, "arithmetic")
            if isinstance(node.operator, cst.Add):
                self._replace(node, node.right, "arithmetic")
        for operand in (node.left, node.right):
            if not isinstance(operand, (cst.Integer, cst.BinaryOperation)):
                self._plus_minus_one(operand, "operand", line, grouped=True)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not self._on_target(node):
            return
        for replacement in _AUGMENTED.get(type(node.operator), ()):
            self._replace(node.operator, _same_spacing(node.operator, replacement),
                          "arithmetic", line=self._line(node))
        # `x += y` -> `x = y`
        self._replace(node, cst.Assign(targets=[cst.AssignTarget(node.target)], value=node.value),
                      "arithmetic")

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if not self._on_target(node):
            return
        other = cst.Or() if isinstance(node.operator, cst.And) else cst.And()
        self._replace(node.operator, _same_spacing(node.operator, type(other)), "boolean",
                      line=self._line(node))
        self._replace(node, node.left, "boolean", "right side of "
                      f"`{_short(self._code(node.operator)).strip()}` dropped")
        self._replace(node, node.right, "boolean", "left side of "
                      f"`{_short(self._code(node.operator)).strip()}` dropped")

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if not self._on_target(node):
            return
        if isinstance(node.operator, (cst.Not, cst.Minus, cst.BitInvert)):
            self._replace(node, node.expression, "boolean" if isinstance(node.operator, cst.Not)
                          else "arithmetic")

    def visit_If(self, node: cst.If) -> None:
        self._condition(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._condition(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._condition(node.test)
        if self._on_target(node):
            self._replace(node, node.with_changes(body=node.orelse, orelse=node.body), "swap",
                          "branches of the conditional swapped")

    def visit_Assert(self, node: cst.Assert) -> None:
        if self._on_target(node):
            self._add(node, "statement", "pass", "assert removed")

    def _condition(self, test: cst.BaseExpression) -> None:
        if not self._on_target(test):
            return
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            negated: cst.BaseExpression = test.expression
        else:
            inner = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) \
                if isinstance(test, (cst.BooleanOperation, cst.Comparison, cst.IfExp,
                                     cst.Lambda, cst.NamedExpr)) and not test.lpar else test
            negated = cst.UnaryOperation(cst.Not(), inner)
        self._replace(test, negated, "condition", "condition negated")
        self._replace(test, cst.Name("True"), "condition", "condition dropped (always true)")
        self._replace(test, cst.Name("False"), "condition", "condition always false")
        code = self._code(test).strip()
        if isinstance(test, cst.Name) and test.value in ("True", "False"):
            for name in self._others(test, test.value):  # `while True:` -> `while queue:`
                self._add(test, "condition", name, f"condition `{name}`")
                self._add(test, "condition", f"not {name}", f"condition `not {name}`")
            return
        mentioned = [n.value for n in _names_in(test)]
        for name in self._others(test, "", first=mentioned):  # a condition missing
            self._add(test, "condition", f"{name} is None or {code}",
                      f"`{name} is None or` added")
            self._add(test, "condition", f"{code} or not {name}", f"`or not {name}` added")

    def visit_Integer(self, node: cst.Integer) -> None:
        if not self._on_target(node):
            return
        try:
            value = int(node.value.replace("_", ""), 0)
        except ValueError:
            return
        for new in (value + 1, value - 1) if value else (1, -1):
            if new >= 0:
                self._replace(node, cst.Integer(str(new)), "off_by_one")
        for name in self._others(node, ""):  # a constant where a variable belongs
            self._add(node, "variable", name, f"`{node.value}` -> `{name}`")

    def visit_Name(self, node: cst.Name) -> None:
        if not self._on_target(node):
            return
        if node.value in ("True", "False"):
            self._replace(node, cst.Name("False" if node.value == "True" else "True"),
                          "constant")
            return
        if node.value == "None" or id(node) in self._callees:
            return
        try:
            context = self.get_metadata(ExpressionContextProvider, node)
        except KeyError:
            return
        if context is not ExpressionContext.LOAD:
            return
        for name in self._others(node, node.value):
            self._replace(node, cst.Name(name), "variable")

    def visit_Call(self, node: cst.Call) -> None:
        self._callees.add(id(node.func))
        if not self._on_target(node):
            return
        if isinstance(node.func, cst.Name) and node.func.value in _CALLEE_SWAPS:
            self._replace(node.func, cst.Name(_CALLEE_SWAPS[node.func.value]), "call",
                          line=self._line(node))
        for arg in node.args:  # `f(x)` -> `x`
            if not arg.star and arg.keyword is None:
                self._add(node, "call", self._code(arg.value).strip(),
                          f"call replaced by its argument `{_short(self._code(arg.value))}`")
            if not arg.star and isinstance(arg.value, cst.Name) and arg.value.value not in (
                    "None", "True", "False"):
                self._sliced(arg.value, "argument", self._line(node))
                for other in self._others(arg.value, arg.value.value):  # `k` -> `k - m`
                    for sign in "-+":
                        text = f"{arg.value.value} {sign} {other}"
                        self._add(arg.value, "variable", text, f"argument `{text}`",
                                  self._line(node))
        for name in self._others(node, ""):
            self._add(node, "variable", name, f"call replaced by `{name}`")
        positional = [i for i, a in enumerate(node.args) if a.keyword is None and not a.star]
        for first, second in zip(positional, positional[1:], strict=False):
            args = list(node.args)
            args[first] = node.args[first].with_changes(value=node.args[second].value)
            args[second] = node.args[second].with_changes(value=node.args[first].value)
            self._replace(node, node.with_changes(args=args), "swap",
                          f"arguments {first + 1} and {second + 1} swapped")
        for arg in node.args:
            if not arg.star and not isinstance(arg.value, cst.Integer):
                self._plus_minus_one(arg.value, "argument", self._line(node))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not self._on_target(node):
            return
        line = self._line(node)
        for element in node.slice:
            part = element.slice
            if isinstance(part, cst.Index):
                if not isinstance(part.value, cst.Integer):
                    self._plus_minus_one(part.value, "index", line)
            elif isinstance(part, cst.Slice):
                for bound, label in ((part.lower, "lower"), (part.upper, "upper")):
                    if bound is None:
                        continue
                    if not isinstance(bound, cst.Integer):
                        self._plus_minus_one(bound, f"slice's {label} bound", line)
                    dropped = part.with_changes(**{label: None})
                    self._replace(part, dropped, "slice", f"slice's {label} bound dropped",
                                  line)
        for first in range(len(node.slice) - 1):  # a[i, j] -> a[j, i]
            elements = list(node.slice)
            elements[first], elements[first + 1] = (
                node.slice[first].with_changes(slice=node.slice[first + 1].slice),
                node.slice[first + 1].with_changes(slice=node.slice[first].slice))
            self._replace(node, node.with_changes(slice=elements), "swap",
                          f"subscripts {first + 1} and {first + 2} swapped")
        # a[i][j] -> a[j][i]
        if isinstance(node.value, cst.Subscript) and len(node.slice) == 1 \
                and len(node.value.slice) == 1:
            inner = node.value
            swapped = node.with_changes(value=inner.with_changes(slice=node.slice),
                                        slice=inner.slice)
            self._replace(node, swapped, "swap", "subscripts swapped")

    def visit_For(self, node: cst.For) -> None:
        if self._on_target(node.iter) and isinstance(node.iter, cst.Name):
            self._sliced(node.iter, "iterable", self._line(node.iter), starts=True)

    def _sliced(self, name: cst.Name, what: str, line: int, starts: bool = False) -> None:
        """`v` as `v[1:]`, `v[:-1]` (and `v[w:]` for the variables w in scope: `starts`)."""
        value = name.value
        slices = ["[1:]", "[:-1]"]
        if starts:
            slices += [f"[{other}:]" for other in self._others(name, value)]
        for sliced in slices:
            self._add(name, "slice", value + sliced, f"{what} `{value}` as `{value}{sliced}`",
                      line)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if not self._on_target(node):
            return
        for name in self.attributes:
            if name != node.attr.value:
                self._replace(node.attr, cst.Name(name), "attribute", line=self._line(node))

    def visit_List(self, node: cst.List) -> None:
        if not self._on_target(node) or node.elements:
            return
        self._add(node, "constant", "[[]]", "`[]` -> `[[]]`")
        for name in self._others(node, ""):
            self._add(node, "constant", f"[{name}]", f"`[]` -> `[{name}]`")

    def visit_Tuple(self, node: cst.Tuple) -> None:
        if not self._on_target(node) or len(node.elements) < 2:
            return
        elements = list(node.elements)
        for first in range(len(elements) - 1):
            swapped = list(elements)
            swapped[first] = elements[first].with_changes(value=elements[first + 1].value)
            swapped[first + 1] = elements[first + 1].with_changes(value=elements[first].value)
            self._replace(node, node.with_changes(elements=swapped), "swap",
                          f"elements {first + 1} and {first + 2} swapped")

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._on_target(node) or len(node.targets) != 1:
            return
        target = self._code(node.targets[0].target).strip()
        value = self._code(node.value).strip()
        for wrapped in (f"max({target}, {value})", f"min({target}, {value})",
                        f"max(0, {value})"):
            self._add(node.value, "clamp", wrapped, f"`{_short(value)}` -> `{_short(wrapped)}`",
                      self._line(node))

    def visit_Return(self, node: cst.Return) -> None:
        if not self._on_target(node) or node.value is None:
            return
        current = self._code(node.value).strip()
        for name in self._others(node, current):
            if name != current:
                self._replace(node.value, cst.Name(name), "return_value",
                              f"returns `{name}` instead of `{_short(current)}`")

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if not self._on_target(node):
            return
        if not all(isinstance(s, _SIMPLE_STATEMENTS) for s in node.body):
            return
        start, end = self._span(node.body[0])[0], self._span(node.body[-1])[1]
        text = self.source[start:end].rstrip()
        end = start + len(text)
        line = self._line(node)
        self.found.append(Mutation(self.path, line, "statement", "statement deleted",
                                   Change(start, end, "pass")))
        if not any(isinstance(s, (cst.Return, cst.Raise, cst.Break, cst.Continue))
                   for s in node.body):
            indent = self.source[self.source.rfind("\n", 0, start) + 1:start]
            if not indent.strip():
                self.found.append(Mutation(self.path, line, "statement", "statement duplicated",
                                           Change(end, end, "\n" + indent + text)))

    def _plus_minus_one(self, expression: cst.BaseExpression, what: str, line: int,
                        grouped: bool = False) -> None:
        """`expression` ± 1, inside its own parentheses if it has some, else in new ones when
        it is a compound expression or `grouped` (an operand: `a * b` -> `a * (b + 1)`)."""
        if isinstance(expression, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString,
                                   cst.List, cst.Dict, cst.Set, cst.Tuple, cst.Lambda,
                                   cst.ListComp, cst.DictComp, cst.SetComp, cst.GeneratorExp,
                                   cst.Float, cst.Imaginary, cst.Ellipsis)):
            return
        if isinstance(expression, cst.Name) and expression.value in ("None", "True", "False"):
            return
        code = self._code(expression).strip()
        if expression.lpar:
            inner = self._code(expression.with_changes(lpar=[], rpar=[])).strip()
            texts = [f"({inner} {sign} 1)" for sign in "+-"]
        elif grouped or not isinstance(expression, (cst.Name, cst.Attribute, cst.Call,
                                                    cst.Subscript)):
            texts = [f"({code} {sign} 1)" for sign in "+-"]
        else:
            texts = [f"{code} {sign} 1" for sign in "+-"]
        for text, sign in zip(texts, "+-", strict=True):
            self._add(expression, "off_by_one", text, f"{what} `{_short(code)}` {sign} 1", line)


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    """The names `node` reads (attribute names left out), in order."""
    found: list[cst.Name] = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            attribute.value.visit(self)
            return False

    node.visit(Names())
    return list({n.value: n for n in found if n.value not in ("None", "True", "False")}
                .values())


def _same_spacing(old: cst.CSTNode, new_type: type[cst.CSTNode]) -> cst.CSTNode:
    """An operator of `new_type` with `old`'s whitespace around it."""
    before = getattr(old, "whitespace_before", None)
    after = getattr(old, "whitespace_after", None)
    kwargs = {}
    if before is not None:
        kwargs["whitespace_before"] = before
    if after is not None:
        kwargs["whitespace_after"] = after
    return new_type(**kwargs)


def _short(code: str, limit: int = 60) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."
