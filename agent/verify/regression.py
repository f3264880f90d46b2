"""A blind run's regression tests: the repository's own tests that exercise the code a
candidate changes, and that pass on the unpatched code, must keep passing.

Chosen per candidate from the files it changes, never from the task's judging lists (those
are hidden, tasks/hidden.py): for each changed source file, the repository's test modules (by
its own pytest patterns, testnames.py) named after it (`test_<name>.py`, `<name>_test.py`,
`unittest_<name>.py`, then `test_<prefix>_<name>.py`; a package's `__init__.py` by the
package's name), nearest first, then those that import it, nearest
and smallest first (when none does, those that import its nearest package that some test
imports). With the candidate's patch, what its changed code is run by decides first:
those files and the other test files beside them are run once on the unpatched code with a
profiler (verifiers/coverage_probe.py, within twice the budget below, once per changed files),
and the files whose tests
call a function the patch changes come first, most such tests first (a file that sees the
change beats one that is merely named after it). At most `max_files` in all, and no more base
run time than
`MAX_BASE_S` (or half the tests' timeout, when smaller): every candidate runs them again. Each
test file runs once on the unpatched code (whole, with the task's runner), within that budget
(a slower file is cut there and left out, bounded before it runs, not after the tests' timeout);
its passing tests are the ones a candidate must keep passing. A file that does not run there,
times out or has no passing test is left out. When that leaves a candidate no file at all and
the trace named tests of a slow file that call the changed functions, those tests alone (at
most MAX_COVERING_IDS) are run on the base within the budget and become its regression tests,
run by id rather than by file (requests' test_requests.py, pytest's testing/test_skipping.py:
one slow file held every test of the change).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ooda.agent.support import fstree
from ooda.agent.verify.testnames import collected_patterns, is_test_module, subject
from ooda.verifiers.coverage_probe import Calls, Ranges, changed_functions, covering, patch_lines

MAX_FILES = 3
"""Test files a candidate's regression run holds at most."""
MAX_BASE_S = 120.0
"""Seconds of base run time a candidate's regression files may add up to (a file slower than
that alone is left out): each candidate's own run costs about as much."""

SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "venv", "node_modules", ".tox",
                       ".mypy_cache", "build", "dist", ".eggs", ".ooda", ".ooda-repro"})
SOURCE_ROOTS = ("src/", "lib/")
"""Leading directories that are not part of a module's dotted name."""

MAX_COVERING_IDS = 200
"""Tests of a slow file, calling the change, run by id when no file fits the budget."""

COVERAGE_POOL = 3
"""Related test files traced for coverage (and as many more beside them)."""

Cover = Callable[[list[str], list[str], float], Calls | None]
"""Runs test files on the unpatched code with a profiler within a timeout: per test id
(pytest's, or FILE::function), the functions of the given source files it called; None: no
result."""

RunFile = Callable[[str, float], dict[str, str]]
"""Runs one test file whole on the unpatched code within a timeout: test id -> outcome;
raises on a run that left no result."""

RunIds = Callable[[tuple[str, ...], float], dict[str, str]]
"""Runs these test ids (not their files whole) on the unpatched code within a timeout."""


@dataclass(frozen=True)
class BaseRun:
    """One test file on the unpatched code."""

    passing: tuple[str, ...]
    seconds: float
    problem: str = ""
    """Why the file is left out ("" when it is not)."""


@dataclass(frozen=True)
class Regression:
    """The regression tests of one candidate."""

    files: tuple[str, ...]
    ids: tuple[str, ...]
    """Tests of those files that passed on the unpatched code."""
    whole_files: bool = True
    """The files run whole (False: only `ids`, the tests of a slow file that see the change)."""


class RegressionTests:
    """Chooses and measures regression tests for the candidates of one task (thread-safe:
    each file runs on the base once, whoever asks first)."""

    def __init__(self, repo: Path, run_file: RunFile, timeout_s: float,
                 max_files: int = MAX_FILES, cover: Cover | None = None,
                 run_ids: RunIds | None = None) -> None:
        self.repo = repo
        self.run_file = run_file
        self.run_ids = run_ids
        self.timeout_s = timeout_s
        self.max_files = max_files
        self.cover = cover
        self._coverage: dict[tuple[tuple[str, ...], tuple[str, ...]], Calls | None] = {}
        self._coverage_locks: dict[tuple[tuple[str, ...], tuple[str, ...]], threading.Lock] = {}
        self._covering: list[dict[str, object]] = []
        self._index: list[str] | None = None
        self._traced: list[dict[str, object]] = []
        self._texts: dict[str, str] = {}
        self._runs: dict[str, BaseRun] = {}
        self._ids: dict[str, tuple[str, ...]] = {}
        self._file_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def budget_s(self) -> float:
        """Seconds of base run time a candidate's regression files may add up to: also the
        timeout of each file's base run, so that a slow file is cut there, not discarded after
        the whole tests' timeout."""
        return min(MAX_BASE_S, self.timeout_s / 2)

    def for_change(self, changed: Sequence[str], patch: str | None = None) -> Regression:
        """The regression tests of a candidate that changes `changed` (repo-relative paths);
        with its `patch` and a coverage runner, the files whose tests call the functions it
        changes first (see `by_coverage`)."""
        files: list[str] = []
        ids: list[str] = []
        spent = 0.0
        ordered = self.related(changed)
        seeing: dict[str, list[str]] = {}
        if self.cover is not None and patch:
            ordered, seeing = self._by_coverage(
                ordered, changed_functions(self.repo, patch_lines(patch)))
        for path in ordered:
            if len(files) >= self.max_files:
                break
            run = self.base_run(path)
            if run.problem or spent + run.seconds > self.budget_s():
                continue
            spent += run.seconds
            files.append(path)
            ids += run.passing
        if not files and self.run_ids is not None:
            return self._covering_only(ordered, seeing)
        return Regression(tuple(files), tuple(dict.fromkeys(ids)))

    def _covering_only(self, ordered: list[str], seeing: dict[str, list[str]]) -> Regression:
        """No file fits the budget: the tests of the first slow file that call the change,
        run by id (each such set once on the base)."""
        for path in ordered:
            wanted = tuple(seeing.get(path, ())[:MAX_COVERING_IDS])
            if not wanted or "slower than" not in self.base_run(path).problem:
                continue
            run = self.base_run(path, wanted)
            if not run.problem:
                return Regression((path,), run.passing, whole_files=False)
        return Regression((), ())

    def by_coverage(self, ordered: list[str], targets: Ranges) -> list[str]:
        """`ordered` with the files whose tests call one of `targets` (the changed functions,
        on the unpatched code) first, most such tests first. The pool traced is the first
        COVERAGE_POOL related files and test files beside them (2 x COVERAGE_POOL at most),
        once per pool and changed files (every candidate changing those files shares the
        trace), within twice the regression budget. Unchanged when nothing was traced."""
        return self._by_coverage(ordered, targets)[0]

    def _by_coverage(self, ordered: list[str], targets: Ranges
                     ) -> tuple[list[str], dict[str, list[str]]]:
        """`by_coverage`, and per file the ids of its tests that call `targets`."""
        if not targets or not ordered:
            return ordered, {}
        pool = self._pool(ordered)
        key = (tuple(pool), tuple(sorted(targets)))
        with self._lock:
            lock = self._coverage_locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                done = key in self._coverage
                found = self._coverage.get(key)
            if not done:
                found = self._trace(pool, sorted(targets))
                with self._lock:
                    self._coverage[key] = found
        if not found:
            return ordered, {}
        counts: dict[str, int] = {}
        seeing: dict[str, list[str]] = {}
        for test_id, hit in covering(found, targets).items():
            if hit:
                path = test_id.split("::", 1)[0]
                counts[path] = counts.get(path, 0) + 1
                seeing.setdefault(path, []).append(test_id)
        hit_files = sorted((f for f in pool if counts.get(f)), key=lambda f: -counts[f])
        with self._lock:
            self._covering.append({"targets": {k: [list(r) for r in v]
                                               for k, v in sorted(targets.items())},
                                   "covering": counts})
        return hit_files + [f for f in ordered if f not in hit_files], seeing

    def _pool(self, ordered: list[str]) -> list[str]:
        pool = ordered[:COVERAGE_POOL]
        beside = {str(PurePosixPath(f).parent) for f in pool}
        for test in self._test_files():
            if len(pool) >= 2 * COVERAGE_POOL:
                break
            if str(PurePosixPath(test).parent) in beside and test not in pool:
                pool.append(test)
        return pool

    def _trace(self, pool: list[str], files: list[str]) -> Calls | None:
        assert self.cover is not None
        started = time.monotonic()
        try:
            found = self.cover(pool, files, 2 * self.budget_s())
        except Exception:  # no coverage: the files stay in their order
            found = None
        with self._lock:
            self._traced.append({"files": pool, "changed": files,
                                 "seconds": round(time.monotonic() - started, 3),
                                 "tests": len(found) if found is not None else "no result"})
        return found

    def related(self, changed: Sequence[str]) -> list[str]:
        """Test files that exercise the changed source files, best first (round robin over
        the changed files)."""
        tests = set(self._test_files())
        per_file = [self._related_one(path) for path in changed
                    if path.endswith(".py") and path not in tests]
        ordered: list[str] = []
        for rank in range(max((len(r) for r in per_file), default=0)):
            for related in per_file:
                if rank < len(related) and related[rank] not in ordered:
                    ordered.append(related[rank])
        return ordered

    def base_run(self, path: str, ids: tuple[str, ...] = ()) -> BaseRun:
        """`path` on the unpatched code, whole, or only its tests `ids` (each run once; later
        calls read the record)."""
        key = f"{path} ({len(ids)} tests calling the change, by id)" if ids else path
        with self._lock:
            done = self._runs.get(key)
            if done is not None and (not ids or self._ids.get(key) == ids):
                return done
            lock = self._file_locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                done = self._runs.get(key)
            if done is not None and (not ids or self._ids.get(key) == ids):
                return done
            started = time.monotonic()
            limit = self.budget_s()
            try:
                if ids:
                    assert self.run_ids is not None
                    outcomes = self.run_ids(ids, limit)
                else:
                    outcomes = self.run_file(path, limit)
                passing = tuple(t for t, o in outcomes.items() if o == "passed")
                run = BaseRun(passing, time.monotonic() - started,
                              "" if passing else "no test passes on the unpatched code")
            except Exception as exc:  # a file that cannot run on the base says nothing
                seconds = time.monotonic() - started
                why = str(exc).split("\n", 1)[0]
                if seconds >= limit * 0.95 or "timed out" in why or "timeout" in why.lower():
                    why = (f"slower than the regression tests' budget ({limit:.0f} s) on the "
                           f"unpatched code: {why}")
                run = BaseRun((), seconds, why)
            with self._lock:
                self._runs[key] = run
                if ids:
                    self._ids[key] = ids
            return run

    def record(self) -> dict[str, dict[str, object]]:
        """Each test file run on the base: passing tests, seconds, why it was left out."""
        with self._lock:
            runs = dict(self._runs)
        return {path: {"passing": len(r.passing), "seconds": round(r.seconds, 3),
                       **({"left_out": r.problem} if r.problem else {})}
                for path, r in runs.items()}

    def coverage_record(self) -> dict[str, list[dict[str, object]]]:
        """Each coverage run (files traced, changed files, seconds, tests traced) and each
        candidate's changed functions with the tests per file that call them."""
        with self._lock:
            return {"runs": list(self._traced), "candidates": list(self._covering)}

    # ------------------------------------------------------------------ choosing files

    def _related_one(self, changed: str) -> list[str]:
        tests = self._test_files()
        stem = PurePosixPath(changed).stem
        module = module_name(changed)
        if stem == "__init__":  # a package's own code: tests named after the package
            stem = PurePosixPath(changed).parent.name
        named = [t for t in tests if subject(t) == stem]
        # then those named after it with a prefix (sphinx's test_ext_autodoc.py)
        named += [t for t in tests if t not in named and subject(t).endswith("_" + stem)]
        named.sort(key=lambda t: (subject(t) != stem, -_shared(t, changed)))
        if module is None or not stem:
            return named
        pattern = import_pattern(module)
        importers = [t for t in tests if t not in named and pattern.search(self._text(t))]
        importers.sort(key=lambda t: (-_shared(t, changed), self._size(t)))
        found = named + importers
        parent = module
        while not found and "." in parent:
            # nothing names or imports the module itself: the tests that import its nearest
            # package reach it through the package (`from astropy.io import fits` for
            # astropy.io.fits.fitsrec, `import requests` for requests.sessions)
            parent = parent.rsplit(".", 1)[0]
            package = import_pattern(parent)
            found = [t for t in tests if package.search(self._text(t))]
            found.sort(key=lambda t: (-_shared(t, changed), self._size(t)))
        return found

    def _test_files(self) -> list[str]:
        with self._lock:
            if self._index is not None:
                return self._index
        found: list[str] = []
        patterns = collected_patterns(self.repo)
        for dirpath, dirnames, filenames in fstree.walk(self.repo):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            rel = os.path.relpath(dirpath, self.repo)
            for name in sorted(filenames):
                path = name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")
                if is_test_module(path, patterns):
                    found.append(path)
        with self._lock:
            self._index = found
        return found

    def _text(self, path: str) -> str:
        text = self._texts.get(path)
        if text is None:
            try:
                text = (self.repo / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            self._texts[path] = text
        return text

    def _size(self, path: str) -> int:
        return len(self._text(path))


def module_name(path: str) -> str | None:
    """`src/pkg/sub/mod.py` -> `pkg.sub.mod`; `pkg/__init__.py` -> `pkg`; None for a path
    that is no module name."""
    for root in SOURCE_ROOTS:
        if path.startswith(root):
            path = path[len(root):]
            break
    parts = list(PurePosixPath(path.removesuffix(".py")).parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def import_pattern(module: str) -> re.Pattern[str]:
    """Matches an import of `module` (or of it from its package) at the start of a line."""
    parent, _, last = module.rpartition(".")
    escaped = re.escape(module)
    alternatives = [rf"from\s+{escaped}\s+import\b", rf"import\s+{escaped}\b"]
    if parent:
        alternatives.append(rf"from\s+{re.escape(parent)}\s+import\s+[^\n]*\b{re.escape(last)}\b")
    return re.compile(r"^\s*(?:" + "|".join(alternatives) + ")", re.M)


def _shared(a: str, b: str) -> int:
    """Leading directories two paths share."""
    count = 0
    for x, y in zip(PurePosixPath(a).parts[:-1], PurePosixPath(b).parts[:-1], strict=False):
        if x != y:
            break
        count += 1
    return count
