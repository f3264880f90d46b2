"""Which tests run a candidate's changed code, on the unpatched code: the coverage a blind run
chooses its regression tests by (agent/verify/regression.py).

`changed_functions` reads a patch against the base: for each changed Python file, the line
ranges of the innermost functions (and methods) its hunks touch on the base side. `script`
is a standalone Python script (3.5 and later: SWE-bench's environments run old Pythons) that
runs given test files on the unpatched code with a profiler on (`sys.setprofile`: calls only,
cheap) and prints, per test, the functions of the changed files it called (their first lines),
so that one run serves every candidate changing those files: through pytest when the
environment has it (a plugin object around each test's call), else by importing each file and
calling its `test_*` functions, as sympy's own runner does. Test ids are pytest's node ids, or
`FILE::function` without pytest. `calls` reads the script's output, `covering` says which tests call a candidate's changed
functions. Nothing here judges a
candidate: the script runs the repository's tests on its own code, before any candidate.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

MARK = "ooda-coverage-result "
Ranges = dict[str, list[tuple[int, int]]]

SCRIPT = '''\
import json, os, sys, time
FILES = %(files)r
TARGETS = %(targets)r
MARK = %(mark)r
ROOT = os.getcwd()
sys.path.insert(0, ROOT)
wanted = {}
for rel in TARGETS:
    wanted[os.path.realpath(os.path.join(ROOT, rel))] = rel
hits = {}
current = [None]
paths = {}


def profile(frame, event, arg):
    if event != "call" or current[0] is None:
        return
    code = frame.f_code
    name = code.co_filename
    real = paths.get(name)
    if real is None:
        real = paths[name] = os.path.realpath(name) if not name.startswith("<") else ""
    rel = wanted.get(real)
    if rel is not None:
        hits[current[0]].setdefault(rel, set()).add(code.co_firstlineno)


def begin(test_id):
    current[0] = test_id
    hits.setdefault(test_id, {})
    sys.setprofile(profile)


def end():
    sys.setprofile(None)
    current[0] = None


started = time.time()
try:
    import pytest
except ImportError:
    pytest = None
if pytest is not None:
    class Tracer(object):
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            begin(item.nodeid)
            try:
                yield
            finally:
                end()
    pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts="] + list(FILES),
                plugins=[Tracer()])
else:
    import importlib.util
    for rel in FILES:
        spec = importlib.util.spec_from_file_location(
            "ooda_cov_" + rel.replace("/", "_").replace(".", "_"), os.path.join(ROOT, rel))
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except BaseException:
            continue
        for name in sorted(vars(module)):
            value = getattr(module, name)
            if name.startswith("test_") and callable(value):
                begin(rel + "::" + name)
                try:
                    value()
                except BaseException:
                    pass
                finally:
                    end()
result = dict((t, dict((f, sorted(lines)) for f, lines in files.items()))
              for t, files in hits.items())
sys.stdout.write("\\n" + MARK + json.dumps({"calls": result, "seconds": time.time() - started})
                 + "\\n")
sys.stdout.flush()
'''


def changed_functions(base: Path, patch_files: dict[str, list[int]]) -> Ranges:
    """For each changed file (repo-relative path -> base-side line numbers its hunks touch),
    the line ranges of the innermost functions holding those lines in `base` (a file or a line
    outside any function gives nothing: it is not a function a test calls)."""
    out: Ranges = {}
    for rel, lines in patch_files.items():
        if not rel.endswith(".py") or not lines:
            continue
        try:
            tree = ast.parse((base / rel).read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        spans = sorted(
            ((min([node.lineno] + [d.lineno for d in node.decorator_list]),
              node.end_lineno or node.lineno) for node in ast.walk(tree)
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)),
            key=lambda span: span[1] - span[0])
        found = []
        for line in sorted(set(lines)):
            span = next((s for s in spans if s[0] <= line <= s[1]), None)
            if span is not None and span not in found:
                found.append(span)
        if found:
            out[rel] = sorted(found)
    return out


def patch_lines(patch: str) -> dict[str, list[int]]:
    """Repo-relative path -> base-side line numbers a unified diff changes (a pure insertion
    counts the line before it)."""
    out: dict[str, list[int]] = {}
    current: list[int] | None = None
    old_line = 0
    for line in patch.splitlines():
        if line.startswith("--- "):
            current = None
        elif line.startswith("+++ "):
            path = line[4:].split("\t")[0].strip()
            path = path[2:] if path.startswith("b/") else path
            current = None if path == "/dev/null" else out.setdefault(path, [])
        elif line.startswith("@@") and current is not None:
            try:
                old_line = int(line.split()[1].lstrip("-").split(",")[0])
            except (IndexError, ValueError):
                old_line = 0
        elif current is None or not line:
            continue
        elif line[0] == "-":
            current.append(old_line)
            old_line += 1
        elif line[0] == "+":
            current.append(max(1, old_line - 1))
        elif line[0] == " ":
            old_line += 1
    return out


def script(files: list[str], target_files: list[str]) -> str:
    """The coverage script for `files` (repo-relative test files): per test, the first lines
    of the functions of `target_files` it called."""
    return SCRIPT % {"files": list(files), "targets": sorted(target_files), "mark": MARK}


Calls = dict[str, dict[str, list[int]]]
"""test id -> target file -> first lines of the functions of it the test called."""


def calls(output: str) -> Calls | None:
    """The script's result (None: it left none: it failed or ran out of time)."""
    index = output.rfind(MARK)
    if index < 0:
        return None
    line = output[index + len(MARK):].split("\n", 1)[0]
    try:
        found = json.loads(line).get("calls")
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    return {str(t): {str(f): [int(x) for x in lines] for f, lines in files.items()}
            for t, files in found.items() if isinstance(files, dict)}


def covering(found: Calls, targets: Ranges) -> dict[str, bool]:
    """test id -> whether it called one of `targets` (a function whose first line, its def or
    first decorator, lies in a target range)."""
    return {test: any(start <= line <= end for rel, lines in files.items()
                      for line in lines for start, end in targets.get(rel, ()))
            for test, files in found.items()}
