"""The security watchdog: reads an answer as it streams and names the first security finding
in a line the answer adds, so that the stream can be halted there and corrected at once.

Pure and cheap (no network, no sandbox, no parse of the whole answer): `Watchdog.observe(text)`
looks only at the lines completed since its last call. Each line an edit adds
(agent/edits/stream_lines.py: REPLACE parts, `+` lines, code blocks; never prose, SEARCH parts
or `-` lines) is checked by

- the secret scan of the security stage (verifiers/security_rules.find_secret), in any file;
- in Python files, the call rules (security_rules.CALL_RULES), on whole statements: a tiny
  lexer follows strings (docstrings too), comments and brackets, so a rule sees a call across
  its lines, never the inside of a string or comment, and `yaml.load(` waits for its `Loader=`.

Baseline-relative, like the security stage: a finding whose added lines are all code the
repository already has (`BaseCode`: the same line, stripped, in the file the edit names; for a
code block that names no readable file, in any of the repository's Python files) is no finding,
and neither is one that replaces a line with the same finding the answer quotes from the same
file (a SEARCH part's or a `-` line's). Such code is the base's, and the stage would not charge
it either.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Iterable
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


class BaseCode:
    """Lines the repository already has, stripped, per file; read once per file, lazily.

    `read(path)` gives a file of the unpatched repository (None: absent); `python_files()`
    lists the repository's Python files, read all at once only the first time a code block
    that names no file of the repository needs them. One may serve the answers of a run from
    several threads (what it caches is only ever added, the same for every thread)."""

    def __init__(self, read: Callable[[str], str | None],
                 python_files: Callable[[], Iterable[str]] | None = None) -> None:
        self._read = read
        self._python_files = python_files
        self._files: dict[str, frozenset[str] | None] = {}
        self._texts: dict[str, list[str] | None] = {}
        self._starts: dict[str, list[int]] = {}
        self._everywhere: frozenset[str] | None = None

    def read(self, path: str) -> str | None:
        return self._read(path)

    def text_lines(self, path: str) -> list[str] | None:
        """The file's lines, in order (None: absent)."""
        if path not in self._texts:
            text = self._read(path)
            self._texts[path] = None if text is None else text.splitlines()
        return self._texts[path]

    def statement_start(self, path: str, index: int) -> int:
        """The first line (from 0) of the innermost statement of the file that holds line
        `index`: where a call that an edit enters in its middle begins. `index` itself when
        the file does not parse."""
        if path not in self._starts:
            self._starts[path] = _statement_starts(self.read(path) or "")
        starts = self._starts[path]
        return starts[index] if 0 <= index < len(starts) else index

    def locate(self, path: str, line: str) -> int | None:
        """The index of the one line of the file equal to `line` (stripped); None when there
        is none or more than one."""
        lines = self.text_lines(path)
        if lines is None:
            return None
        text = line.strip()
        found = [i for i, ln in enumerate(lines) if ln.strip() == text]
        return found[0] if len(found) == 1 else None

    def lines_of(self, path: str) -> frozenset[str] | None:
        if path not in self._files:
            text = self._read(path)
            self._files[path] = (None if text is None
                                 else frozenset(ln.strip() for ln in text.splitlines()))
        return self._files[path]

    def has(self, paths: tuple[str, ...], line: str, anywhere: bool) -> bool:
        """Whether `line` (stripped) is in one of `paths`, or with `anywhere` (a code block)
        when none of them is a file of the repository, in any of its Python files."""
        text = line.strip()
        readable = False
        for path in paths:
            lines = self.lines_of(path)
            if lines is not None:
                readable = True
                if text in lines:
                    return True
        return anywhere and not readable and text in self._all_lines()

    def likeliest(self, lines: list[str]) -> str | None:
        """The Python file of the repository holding most of `lines` (stripped, blank ones
        left out); None when none holds any or two hold as many."""
        wanted = {ln for ln in lines if ln}
        self._all_lines()
        files = list(self._files.items())  # a snapshot: other answers' threads add files
        scores = sorted(((len(wanted & found), path) for path, found in files
                         if found and path.endswith(".py")), reverse=True)
        if not scores or scores[0][0] == 0 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
            return None
        return scores[0][1]

    def _all_lines(self) -> frozenset[str]:
        if self._everywhere is None:
            found: set[str] = set()
            for path in self._python_files() if self._python_files else ():
                lines = self.lines_of(path)
                if lines:
                    found |= lines
            self._everywhere = frozenset(found)
        return self._everywhere


def _statement_starts(source: str) -> list[int]:
    """For each line of `source` (from 0), the first line of the innermost statement holding
    it (the line itself where no statement spans it, or the source does not parse)."""
    count = len(source.splitlines())
    starts = list(range(count))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return starts
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            last = (node.end_lineno or node.lineno) - 1
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                last = max(node.lineno - 1, body[0].lineno - 2)  # a compound's header only
            spans.append((node.lineno - 1, last))
    for first, last in sorted(spans, key=lambda span: span[0] - span[1]):  # outermost first
        for index in range(first, min(last, count - 1) + 1):
            starts[index] = first
    return starts


# --------------------------------------------------------------------------- the lexer

_CODE_STOP = re.compile(r"[\"'#\\]")
_PREFIX_CHARS = "rRbBuUfFtT"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


class _Lexer:
    """Python's strings, comments and brackets, one physical line at a time (state carried
    across lines: an open triple-quoted string, open brackets, a backslash continuation)."""

    def __init__(self) -> None:
        self.quote = ""
        self.fstring = False
        self.content: list[str] = []
        self.depth = 0
        self.continued = False

    @property
    def inside(self) -> bool:
        """Whether the statement goes on past the last line lexed."""
        return bool(self.quote) or self.depth > 0 or self.continued

    def line(self, text: str) -> tuple[str, list[str]]:
        """The line's code with each string that ends on it as `""` (`"^"`: an f-string
        with a placeholder) and comments dropped; and the literal text of those
        strings (an f-string's placeholders left out)."""
        code: list[str] = []
        strings: list[str] = []
        self.continued = False
        i, n = 0, len(text)
        while i < n:
            if self.quote:
                i = self._in_string(text, i, code, strings)
                continue
            match = _CODE_STOP.search(text, i)
            stop = n if match is None else match.start()
            chunk = text[i:stop]
            self.depth += sum(chunk.count(c) for c in "([{") - sum(chunk.count(c) for c in ")]}")
            self.depth = max(self.depth, 0)
            code.append(chunk)
            if match is None:
                break
            char = text[stop]
            if char == "#":
                break
            if char == "\\":
                if stop == n - 1:
                    self.continued = True
                i = stop + 2
                continue
            triple = text.startswith(char * 3, stop)
            self.quote = char * 3 if triple else char
            prefix = text[max(stop - 2, 0):stop]
            prefix = prefix[len(prefix.rstrip(_PREFIX_CHARS)):]
            self.fstring = "f" in prefix.lower()
            self.content = []
            i = stop + len(self.quote)
        if self.quote and len(self.quote) == 1:  # a one-line string left open: end it
            if not self.continued and not text.endswith("\\"):
                self._close(code, strings)
        elif self.quote:
            self.content.append("\n")
        return "".join(code), strings

    def _in_string(self, text: str, i: int, code: list[str], strings: list[str]) -> int:
        quote = self.quote
        j = i
        while True:
            k = text.find(quote, j)
            b = text.find("\\", j)
            if b != -1 and (k == -1 or b < k):
                j = b + 2
                if j >= len(text):
                    self.content.append(text[i:])
                    return len(text)
                continue
            if k == -1:
                self.content.append(text[i:])
                return len(text)
            self.content.append(text[i:k])
            self._close(code, strings)
            return k + len(quote)

    def _close(self, code: list[str], strings: list[str]) -> None:
        literal = "".join(self.content)
        placeholder = False
        if self.fstring:
            placeholder = any(m.group() not in ("{{", "}}") for m in _PLACEHOLDER.finditer(literal))
            literal = _PLACEHOLDER.sub("", literal)
        code.append('"^"' if placeholder else '""')
        strings.append(literal)
        self.quote = ""
        self.content = []


# --------------------------------------------------------------------------- statements


@dataclass
class _Physical:
    line: AnswerLine
    code: str


@dataclass
class _Statement:
    """The lines of one statement so far, on one side of an edit (what it writes or what it
    quotes)."""

    lexer: _Lexer = field(default_factory=_Lexer)
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
