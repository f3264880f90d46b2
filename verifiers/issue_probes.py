"""The issue's own examples as a probe every candidate runs: differential testing without a
model.

An issue usually shows the code that misbehaves (a fenced block, a `>>>` or IPython session).
Those blocks, run on the unpatched code and on each candidate, say how each behaves on the very
input the issue is about: a candidate whose output there equals the base's did not touch the
behaviour the issue reports, and candidates whose outputs agree behave alike (blind_select
prefers the largest such group among those that changed something). Nothing here knows what the
right output is: a probe is never required and never passes or fails.

`probe_from_issue` turns the issue text into one script (Python 3.5 and later, the oldest a
SWE-bench environment runs): the blocks in order, in one namespace, each top-level statement
run as the interactive interpreter runs it (an expression's value printed), an exception
printed as one line (`!! TypeError: ...`) and the next statement run; a block that only
defines tests (an issue about a test runner, or one that shows its failing test) is run by
pytest instead, and how each of its tests ended is printed; each block's output begins with a
separator line. `behaviour` turns a run's output into one fingerprint per block
(memory addresses and the workspace's paths left out); `stable` keeps the blocks two runs on
the unpatched code agree on.
Pure functions.
"""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from pathlib import Path

from ooda.agent.contracts.protocols import ReproTest

PROBE_NAME = "probe_issue"
"""The probe's name among a run's reproduction tests (the model's are `repro_N`)."""
SEPARATOR = "=== ooda-issue-block"
PYTEST_MARK = "# ooda: run under pytest\n"
"""Begins a block that only defines tests: the probe runs it with pytest and prints how each
test ended."""
MAX_BLOCKS = 6
MAX_BLOCK_CHARS = 4000

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$",
                    re.MULTILINE | re.DOTALL)
_PROMPT = re.compile(r"^(>>>|\.\.\.)( |$)")
_IPYTHON_IN = re.compile(r"^In \[\d*\]: ?")
_IPYTHON_MORE = re.compile(r"^ +\.\.\.+: ?")
_PYTHON_LANGS = frozenset({"", "python", "py", "python3", "pycon", "ipython", "ipython3",
                           "pytb", "console", "python-console", "pyi"})
_INLINE = re.compile(r"(?<!`)`([^`\n]{3,200})`(?!`)")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
_WORKDIR = re.compile(r"(/[\w.-]+)*/(work|tmp)/[\w./-]*")

DRIVER = '''\
import os, sys
if os.environ.get("PYTHONHASHSEED") != "0":
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-s", "-B", os.path.abspath(sys.argv[0])], env)
sys.path.insert(0, os.getcwd())  # the repository root, as for the script before the exec
import ast
BLOCKS = %(blocks)r
SEPARATOR = %(separator)r
PYTEST_MARK = %(pytest_mark)r
namespace = {"__name__": "__main__", "__builtins__": __builtins__}


def statements(source):
    lines = source.splitlines(True)
    body = ast.parse(source).body
    for index, node in enumerate(body):
        end = body[index + 1].lineno - 1 if index + 1 < len(body) else len(lines)
        start = node.lineno - 1
        if getattr(node, "decorator_list", None):
            start = min([start] + [d.lineno - 1 for d in node.decorator_list])
        yield isinstance(node, ast.Expr), "".join(lines[start:end])


def under_pytest(source, number):
    import re, shutil, subprocess, tempfile
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "test_ooda_issue_%%d.py" %% number)
    with open(path, "w") as handle:
        handle.write(source)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd()] + [p for p in [env.get("PYTHONPATH")] if p])
    try:
        run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-rA", "-p",
                                "no:cacheprovider", path], cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        output = run.communicate(timeout=60)[0].decode("utf-8", "replace")
    except Exception as exc:
        print("!! pytest: %%s" %% (type(exc).__name__,))
        return
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for line in output.splitlines():
        if re.match(r"(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) ", line) or re.search(
                r"\\d+ (passed|failed|error|errors|xfailed|xpassed|skipped)\\b", line):
            print(re.sub(r" in [\\d.]+s.*", "", line.split(" - ")[0]).strip("= "))


for number, block in enumerate(BLOCKS):
    sys.stdout.write("\\n%%s %%d\\n" %% (SEPARATOR, number))
    sys.stdout.flush()
    if block.startswith(PYTEST_MARK):
        under_pytest(block, number)
        continue
    try:
        parts = list(statements(block))
    except SyntaxError as exc:
        print("!! unparsable here: %%s" %% (exc.msg,))
        continue
    for is_expression, source in parts:
        try:
            code = compile(source, "<issue>", "single" if is_expression else "exec")
            exec(code, namespace)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            message = str(exc).splitlines()[0][:300] if str(exc) else ""
            print("!! %%s: %%s" %% (type(exc).__name__, message))
        sys.stdout.flush()
        sys.stderr.flush()
'''


def issue_blocks(text: str, package: str | None = None) -> list[str]:
    """The Python blocks of an issue, in order: fenced blocks in a Python-ish language (or
    none), interactive sessions (their prompts removed, their output dropped), then the inline
    code spans that call something (after `from PACKAGE import *` when a package is named:
    an inline span names no imports); only blocks that parse as Python, at most MAX_BLOCKS."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    found: list[str] = []
    fenced_spans: list[tuple[int, int]] = []
    for match in _FENCE.finditer(text):
        fenced_spans.append((match.start(), match.end()))
        if match.group(2).lower() not in _PYTHON_LANGS:
            continue
        found.append(_as_code(match.group(3)))
    rest = text
    for start, end in reversed(fenced_spans):
        rest = rest[:start] + "\n" + rest[end:]
    session = _session(rest)
    if session:
        found.append(session)
    calls = [span for span in _INLINE.findall(rest) if _is_call(span)]
    if calls:
        found.append("\n".join(([f"from {package} import *"] if package else []) + calls))
    blocks: list[str] = []
    for block in found:
        block = textwrap.dedent(block).strip("\n")
        if not block or len(block) > MAX_BLOCK_CHARS or not _parses(block):
            continue
        if not _does_something(block):
            if not _defines_tests(block):
                continue
            block = PYTEST_MARK + block
        if block + "\n" not in blocks:
            blocks.append(block + "\n")
    return blocks[:MAX_BLOCKS]


def probe_from_issue(text: str, package: str | None = None) -> str | None:
    """The probe script of an issue, or None when it shows no runnable Python; `package`: the
    repository's top-level package, imported before the inline spans."""
    blocks = issue_blocks(text, package)
    if not blocks:
        return None
    return DRIVER % {"blocks": blocks, "separator": SEPARATOR, "pytest_mark": PYTEST_MARK}


def issue_probe(statement: str, repo: Path) -> ReproTest | None:
    """The issue's own examples as a probe test (`PROBE_NAME`), when it has some."""
    source = probe_from_issue(statement, top_package(repo))
    return None if source is None else ReproTest(PROBE_NAME, source, required=False, probe=True)


def behaviour(output: str) -> list[str]:
    """One fingerprint per block the run reached, from its output (the text before the first
    separator, the interpreter's own noise, is left out)."""
    sections = output.split(SEPARATOR)[1:]
    prints = []
    for section in sections:
        body = section.split("\n", 1)[1] if "\n" in section else ""
        body = _WORKDIR.sub("<path>", _ADDRESS.sub("0x?", body))
        body = "\n".join(line.rstrip() for line in body.strip().splitlines())
        prints.append(hashlib.sha256(body.encode("utf-8", "replace")).hexdigest()[:16])
    return prints


def stable(runs: list[list[str]]) -> tuple[str, ...]:
    """Per block, its fingerprint when every run (two or more) reached it with the same one,
    else "" (not compared); () when fewer than two runs finished."""
    if len(runs) < 2:
        return ()
    width = max(len(r) for r in runs)
    out = []
    for index in range(width):
        seen = {r[index] if index < len(r) else "" for r in runs}
        out.append(seen.pop() if len(seen) == 1 else "")
    return tuple(out)


def top_package(repo: Path) -> str | None:
    """The repository's one top-level package (`src/` layouts too), or None when it has none
    or several (tests, docs and examples do not count)."""
    found = []
    for root in (repo, repo / "src"):
        try:
            entries = sorted(root.iterdir())
        except OSError:
            continue
        found += [p.name for p in entries if p.is_dir() and p.name.isidentifier()
                  and (p / "__init__.py").is_file()
                  and p.name not in ("tests", "test", "testing", "docs", "doc", "examples")]
    return found[0] if len(found) == 1 else None


def _as_code(block: str) -> str:
    """A fenced block as code: an interactive session's statements, or the block itself."""
    lines = textwrap.dedent(block).splitlines()
    if any(_PROMPT.match(line) or _IPYTHON_IN.match(line) for line in lines):
        return _session(block)
    return block


def _session(text: str) -> str:
    """The statements of the `>>>` and `In [n]:` lines of `text` (continuations kept)."""
    code: list[str] = []
    ipython = False
    for raw in textwrap.dedent(text).splitlines():
        line = raw.lstrip()
        if _PROMPT.match(line):
            code.append(line[4:] if len(line) > 3 else "")
            ipython = False
        elif _IPYTHON_IN.match(line):
            code.append(_IPYTHON_IN.sub("", line))
            ipython = True
        elif ipython and _IPYTHON_MORE.match(raw):
            code.append(_IPYTHON_MORE.sub("", raw))
        else:
            ipython = False
    return "\n".join(code)


def _is_call(span: str) -> bool:
    """An inline span that is one expression calling something (`f(x)`, `a.b(1)`)."""
    try:
        tree = ast.parse(span.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.Call) for node in ast.walk(tree))


def _parses(block: str) -> bool:
    try:
        ast.parse(block)
    except (SyntaxError, ValueError):
        return False
    return True


def _defines_tests(block: str) -> bool:
    """A block of test functions (or classes) for pytest to run."""
    return any(isinstance(node, ast.FunctionDef | ast.ClassDef)
               and node.name.lower().startswith("test") for node in ast.parse(block).body)


def _does_something(block: str) -> bool:
    """More than imports and definitions: a statement that runs something."""
    quiet = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)
    return any(not isinstance(node, quiet) for node in ast.parse(block).body)
