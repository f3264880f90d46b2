"""The scan of one streaming answer: `Watchdog.observe(text)` reads the lines completed since
its last call (agent/edits/stream_lines.py), follows each edit's statements (lexer.py) and
returns the first finding in a line the answer adds that the base does not already have
(base_code.py), with the rule, the line, why, and the safe alternative."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ooda.agent.edits.stream_lines import AnswerLine, AnswerLines
from ooda.verifiers.security_rules import (
    CALL_RULES,
    SECRET_ADVICE,
    SQL_FORMATTING,
    CallRule,
    find_secret,
    looks_like_sql,
    selected,
)
from ooda.verifiers.watchdog.base_code import BaseCode
from ooda.verifiers.watchdog.lexer import Lexer

PY_LANGS = frozenset({"", "python", "py", "python3", "py3"})
"""Fence languages read as Python when the edit names no file (those agent/edits/code_blocks.py
takes as code: a `pycon` transcript is never an edit)."""
MAX_STATEMENT_LINES = 60
MAX_STATEMENT_CHARS = 12_000
"""A statement longer than this is judged as it stands and its lines let go (a runaway
bracket in text that is not Python must not hold a growing buffer)."""
MAX_BLOCK_LINES = 400
"""Lines of a code block kept to find the file it rewrites when it names none."""
SHOWN_CHARS = 160
_LAST_LITERAL = re.compile(r"[\"'][^\"'\s]{8,}[\"']\s*$")
"""A secret's quoted value at the end of its match: only that is hidden from the feedback."""


@dataclass(frozen=True)
class Finding:
    """The first security problem in a line an answer adds."""

    code: str
    """The security stage's code for it: a ruff rule (S608) or SECRET."""
    name: str
    """The watchdog's rule (sql-format, aws-access-key-id, ...)."""
    path: str | None
    line: str
    """The offending line as written (a secret in it replaced by `<secret>`), clipped."""
    why: str
    instead: str
    end: int
    """Offset in the answer just past the line whose arrival completed the finding."""

    @property
    def rule(self) -> str:
        return f"{self.code} {self.name}"

    def feedback(self) -> str:
        """What the model is told: where, which rule, why, and what to write instead."""
        where = f" in {self.path}" if self.path else ""
        return (f"security watchdog: your answer was stopped at this line{where}:\n"
                f"    {self.line}\n"
                f"rule {self.rule}: {self.why}.\n"
                f"Instead: {self.instead}.\n"
                "Write your whole answer again, with the same fix and without this problem.")


# --------------------------------------------------------------------------- statements


@dataclass
class _Physical:
    line: AnswerLine
    code: str


@dataclass
class _Statement:
    """The lines of one statement so far, on one side of an edit (what it writes or what it
    quotes)."""

    lexer: Lexer = field(default_factory=Lexer)
    lines: list[_Physical] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    triggered: list[CallRule] = field(default_factory=list)
    fired: set[str] = field(default_factory=set)
    chars: int = 0

    def reset(self) -> None:
        self.lines, self.strings, self.triggered, self.fired, self.chars = [], [], [], set(), 0


def _span(stmt: _Statement, joined: str, start: int, end: int) -> list[_Physical]:
    """The physical lines holding joined[start:end] (lines are joined by one space)."""
    found: list[_Physical] = []
    pos = 0
    for phys in stmt.lines:
        stop = pos + len(phys.code)
        if stop >= start and pos <= max(end - 1, start):
            found.append(phys)
        pos = stop + 1
    return found or stmt.lines[-1:]


class Watchdog:
    """The security findings of one streaming answer: `observe(text)` with the answer so far
    (it only grows) returns the first finding in the lines completed since, or None.

    `call_rules`: the Python rules to apply (default: all); `secrets`: apply the secret scan.
    Once it returned a finding it returns None (the stream is meant to end there)."""

    def __init__(self, base: BaseCode, call_rules: Iterable[CallRule] = CALL_RULES,
                 secrets: bool = True) -> None:
        self.base = base
        self.rules = tuple(call_rules)
        self.secrets = secrets
        self.lines = AnswerLines()
        self.finding: Finding | None = None
        self._part = -1
        self._new = _Statement()
        self._old = _Statement()
        self._replaced: Counter[tuple[str | None, str]] = Counter()
        self._seen: Counter[tuple[str | None, str]] = Counter()
        self._counts: dict[str, Counter[str]] = {}
        self._block_lines: list[str] = []
        self._block_file: tuple[int, str | None] | None = None
        self._placed = True

    def observe(self, text: str) -> Finding | None:
        if self.finding is not None:
            return None
        for line in self.lines.feed(text):
            found = self._line(line)
            if found is not None:
                self.finding = found
                return found
        return None

    # ------------------------------------------------------------------ one line

    def _line(self, line: AnswerLine) -> Finding | None:
        if line.part != self._part:
            self._part = line.part
            self._new, self._old = _Statement(), _Statement()
            self._block_lines = []
            self._placed = line.part_kind == "code"
        if line.part_kind == "code" and len(self._block_lines) < MAX_BLOCK_LINES:
            self._block_lines.append(line.text.strip())
        path = line.paths[0] if line.paths else None
        if self.secrets:
            found = self._secret(line, path)
            if found is not None:
                return found
        if not self.rules or not _is_python(line):
            return None
        if not self._placed:
            self._enter(line, path)
        if line.kind != "added":
            self._statement(self._old, line, path, quoted=True)
        if line.kind != "quoted":
            return self._statement(self._new, line, path, quoted=False)
        return None

    def _enter(self, line: AnswerLine, path: str | None) -> None:
        """An edit may begin in the middle of a statement (a REPLACE part that starts at a
        call's third line): the statement's first lines, from the base file, are read as kept
        lines before the edit's own, so that a rule sees the whole call."""
        if path is None:
            self._placed = True
            return
        index = line.at
        if index is None:
            if line.kind == "added" or not line.text.strip():
                self._placed = line.kind == "added"
                return
            index = self.base.locate(path, line.text)
        self._placed = True
        lines = self.base.text_lines(path)
        if index is None or lines is None:
            return
        start = self.base.statement_start(path, min(index, len(lines) - 1))
        for text in lines[start:index]:
            context = AnswerLine(line.part, line.part_kind, "kept", text, line.paths, line.lang,
                                 line.end)
            self._advance(self._old, context)
            self._advance(self._new, context)

    def _secret(self, line: AnswerLine, path: str | None) -> Finding | None:
        hit = find_secret(line.text)
        if hit is None:
            return None
        kind, start, end = hit
        if line.kind != "added":
            if line.kind == "quoted":  # a removed line makes room for one; a kept one does not
                self._replaced[(path, kind)] += 1
            return None
        if self._is_base([line], line, path, kind):
            return None
        literal = _LAST_LITERAL.search(line.text, start, end)
        if literal is not None:
            start, end = literal.start(), literal.end()
        shown = line.text[:start] + "<secret>" + line.text[end:]
        why, instead = SECRET_ADVICE[kind]
        return Finding("SECRET", kind, path, _clip(shown), why, instead, line.end)

    def _statement(self, stmt: _Statement, line: AnswerLine, path: str | None,
                   quoted: bool) -> Finding | None:
        for rule, span in self._advance(stmt, line):
            if quoted:
                # it leaves the file only if one of its lines is removed (not only kept)
                if any(p.line.kind == "quoted" for p in span):
                    self._replaced[(path, rule.name)] += 1
            elif not self._is_base(span, line, path, rule.name):
                shown = next((p.line.text for p in span if p.line.kind == "added"), line.text)
                return Finding(rule.codes[0], rule.name, path, _clip(shown), rule.why,
                               rule.instead, line.end)
        return None

    def _advance(self, stmt: _Statement, line: AnswerLine) -> list[tuple[CallRule,
                                                                         list[_Physical]]]:
        """Add one physical line to the statement: the rules it now matches for the first
        time (a rule with an `unless` only once the statement is complete), with the lines
        each match spans."""
        code, strings = stmt.lexer.line(line.text)
        stmt.lines.append(_Physical(line, code))
        stmt.strings += strings
        stmt.chars += len(line.text)
        for rule in self.rules:
            if rule not in stmt.triggered and rule.trigger.search(line.text):
                stmt.triggered.append(rule)
        complete = (not stmt.lexer.inside or len(stmt.lines) >= MAX_STATEMENT_LINES
                    or stmt.chars >= MAX_STATEMENT_CHARS)
        hits: list[tuple[CallRule, list[_Physical]]] = []
        if stmt.triggered:
            joined = " ".join(p.code for p in stmt.lines)
            for rule in stmt.triggered:
                if rule.name in stmt.fired or (rule.unless is not None and not complete):
                    continue
                span = self._match(rule, stmt, joined)
                if span is not None:
                    stmt.fired.add(rule.name)
                    hits.append((rule, span))
        if complete:
            stmt.reset()
        return hits

    @staticmethod
    def _match(rule: CallRule, stmt: _Statement, joined: str) -> list[_Physical] | None:
        if rule.name == "sql-format":
            return stmt.lines if _formats_sql(stmt.strings, joined) else None
        start = after = 0
        if rule.call is not None:
            call = rule.call.search(joined)
            if call is None:
                return None
            start, after = call.start(), call.end() - 1
        match = rule.pattern.search(joined, after)
        if match is None or (rule.unless is not None and rule.unless.search(joined)):
            return None
        return _span(stmt, joined, start if rule.call is not None else match.start(),
                     match.end())

    def _is_base(self, span: list[_Physical] | list[AnswerLine], line: AnswerLine,
                 path: str | None, rule: str) -> bool:
        """Whether a finding is the base's: every line it adds is already in the file (or,
        for a code block, in the repository); or it replaces a line with the same finding
        that the answer quoted from the same file; or, in a code block that rewrites a file
        the base has, the file has had no more such findings so far than the base holds."""
        added = [p.line if isinstance(p, _Physical) else p for p in span]
        added = [a for a in added if a.kind == "added"]
        code_block = line.part_kind == "code"
        if code_block:
            path = self._code_block_file(line)
            self._seen[(path, rule)] += 1
        if all(self.base.has(a.paths, a.text, code_block) for a in added):
            return True
        if self._replaced[(path, rule)] > 0:
            self._replaced[(path, rule)] -= 1
            return True
        return (code_block and path is not None
                and self._seen[(path, rule)] <= self._base_counts(path)[rule])

    def _code_block_file(self, line: AnswerLine) -> str | None:
        """The base file a code block rewrites: the first it names that the base has, else
        the Python file holding most of the block's lines so far (as the definitions format
        places a block that names no file), None when no file holds any."""
        if self._block_file is None or self._block_file[0] != line.part:
            named = next((p for p in line.paths if self.base.lines_of(p) is not None), None)
            self._block_file = (line.part, named or self.base.likeliest(self._block_lines))
        return self._block_file[1]

    def _base_counts(self, path: str) -> Counter[str]:
        """How many findings of each rule the base file has (as the watchdog reads them)."""
        if path not in self._counts:
            counts: Counter[str] = Counter()
            stmt = _Statement()
            for number, text in enumerate((self.base.read(path) or "").splitlines()):
                hit = find_secret(text) if self.secrets else None
                if hit is not None:
                    counts[hit[0]] += 1
                line = AnswerLine(0, "code", "added", text, (path,), "", number)
                counts.update(rule.name for rule, _ in self._advance(stmt, line))
            self._counts[path] = counts
        return self._counts[path]


_EXPRESSION_BOUNDARY = re.compile(r"[,()\[\]{};:]|(?<![=!<>])=(?!=)|\b(?:if|else|and|or|in|not|"
                                  r"return|lambda|yield|await)\b")
"""Where one expression of a statement's masked code ends (S608 judges each apart)."""


def _formats_sql(strings: list[str], joined: str) -> bool:
    """Whether one expression of the statement builds a SQL query by formatting: its string
    literals, joined as ruff joins a `+` chain or implicit concatenation, read as SQL, and the
    expression formats them (an f-string placeholder, `%`, `.format`, `+`)."""
    index = 0
    for expression in _EXPRESSION_BOUNDARY.split(joined):
        count = expression.count('"') // 2
        if not count:
            continue
        parts = strings[index:index + count]
        index += count
        if SQL_FORMATTING.search(expression) and looks_like_sql("".join(parts)):
            return True
    return False


def _is_python(line: AnswerLine) -> bool:
    if line.paths:
        return line.paths[0].endswith((".py", ".pyi"))
    return line.lang in PY_LANGS


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def rules_for(selection: Iterable[str] | None, default: Iterable[str]) -> tuple[CallRule, ...]:
    """The call rules on for a task whose ruff `security_rules` are `selection` (None: the
    security stage's `default`)."""
    chosen = tuple(default if selection is None else selection)
    return tuple(r for r in CALL_RULES if selected(r.codes, chosen))
