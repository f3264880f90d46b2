"""The pytest plugin the guard runs pytest with: the innermost wrappers around each test's
phases (what really raised), the reports as they are logged, and the tamper checks run after
collection, before and after every test and at the end of the session (the machinery's
functions against their snapshot, hook implementations from the candidate's files, toolchain
modules imported from the workspace, test code swapped or never entered, always-equal
operands, skips raised by the code under test).
"""

from __future__ import annotations

import inspect
import os
import sys
import time
import types
from collections.abc import Callable, Generator
from typing import Any

import pytest

from . import probes
from .records import Records
from .snapshot import Snapshot, changes, snapshot, watched

_realpath = os.path.realpath  # saved before the code under test could replace it
MAX_PROBLEMS = 20

NEW_WRAPPERS = "wrapper" in inspect.signature(type(pytest.hookimpl).__call__).parameters
"""pluggy >= 1.1 (new-style `wrapper=True` hooks); older pluggy (an environment's old pytest)
gets the same wrappers in the old `hookwrapper=True` style (legacy.LegacyGuard)."""


def _wrapper(**options: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A new-style hook wrapper, or (old pluggy) the plain method LegacyGuard overrides."""
    if NEW_WRAPPERS:
        return pytest.hookimpl(wrapper=True, **options)  # type: ignore[call-overload,no-any-return]
    return lambda function: function


STDLIB: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
SKIPS = (pytest.skip.Exception, pytest.xfail.Exception)
ITEM_METHODS = frozenset({"runtest", "setup", "teardown", "_getobj", "ihook"})
"""Names an item's instance dictionary must not hold (they would replace pytest's methods)."""


def _unbound(function: object) -> object:
    """The function behind a bound test method: pytest before 7 binds a test method anew to a
    fresh instance of its class at each test's setup, so only the function itself keeps its
    identity (a method swapped on the class still changes it)."""
    return getattr(function, "__func__", function)


def _codes(function: object) -> tuple[types.CodeType, ...]:
    """The code objects of a test function and of what it wraps (`__wrapped__`). Compared by
    identity: code objects are immutable, so a changed test has other ones (a hash of their
    marshalled form is no evidence: marshal's output depends on reference counts)."""
    codes: list[types.CodeType] = []
    current: object = getattr(function, "__func__", function)
    while current is not None and len(codes) < 8:
        code = getattr(current, "__code__", None)
        if isinstance(code, types.CodeType):
            codes.append(code)
        current = getattr(current, "__wrapped__", None)
        current = getattr(current, "__func__", current)
    return tuple(codes)


def _own_hook(impl: Any, hook_name: str) -> bool:
    """False when a hook implementation of pytest's own plugins no longer is the plugin's
    function of that name (its `function` swapped for another)."""
    plugin = impl.plugin
    owner = plugin.__name__ if isinstance(plugin, types.ModuleType) else type(plugin).__module__
    if not isinstance(owner, str) or not watched(owner):
        return True
    if impl.opts.get("specname"):  # registered under another attribute name: not checked
        return True
    return bool(getattr(plugin, hook_name, None) == impl.function)


class Guard:
    """The pytest plugin: raw phase outcomes, logged reports, tamper checks."""

    def __init__(self, changed_files: list[str], baseline: Snapshot) -> None:
        self.root = _realpath(os.getcwd())
        self.changed = {_realpath(os.path.join(self.root, p)) for p in changed_files}
        self.started = time.time()
        self.baseline = baseline
        self.reference = baseline
        """What check() compares with: the baseline, then pytest's configured state."""
        self.codes: dict[str, tuple[object, tuple[types.CodeType, ...]]] = {}
        """node id -> (test function, its code objects) at collection."""
        self._expected: types.CodeType | None = None
        self._entered = False
        self.records = Records()
        self.problems: list[str] = []
        self._seen_problems: set[str] = set()
        self._filenames: dict[str, bool] = {}
        self.runner_packages: set[str] = set()
        """pytest's own packages when the repository is pytest itself (their hooks are the
        repository's code, patched or not)."""
        self._config: pytest.Config | None = None
        self._modules: dict[str, object] = {}
        """sys.modules as _shadowed() last saw it."""
        self.toolchain: set[str] = set()
        """Top-level names that must come from the image (see preload)."""

    # ------------------------------------------------------------------ checks

    def problem(self, text: str, when: str = "") -> None:
        """Record `text` once (where it was first seen: `when`)."""
        if text not in self._seen_problems and len(self.problems) < MAX_PROBLEMS:
            self._seen_problems.add(text)
            self.problems.append(f"{text} ({when})" if when else text)

    def check(self, when: str) -> None:
        """Record any change to pytest's machinery and any hook from the candidate's files."""
        for name in changes(self.reference, self._suspect_value)[:5]:
            self.problem(f"{name} was replaced or changed at run time", when)
        for name in self._shadowed():
            self.problem(f"{name} was imported from the workspace, not from the image", when)
        while probes.flagged:
            kind = probes.flagged.pop()
            if self._candidate_type(kind):
                self.problem(
                    f"an assertion compared a {kind.__module__}.{kind.__qualname__} that equals "
                    "anything (its __eq__ does not compare values)",
                    when,
                )
        if self._config is None:
            return
        for hook_name, caller in list(vars(self._config.hook).items()):
            get = getattr(caller, "get_hookimpls", None)
            if get is None:
                continue
            for impl in get():
                if impl.plugin is self or self._runner_own(impl.function):
                    continue
                filename = self._source_of(impl.function)
                if filename is not None:
                    where = os.path.relpath(filename)
                    self.problem(f"{where} registers a pytest hook ({hook_name}) at run time", when)
                elif not _own_hook(impl, hook_name):
                    self.problem(f"pytest's own {hook_name} hook was replaced at run time", when)

    def _runner_own(self, function: object) -> bool:
        module = getattr(function, "__module__", None) or ""
        return module.split(".", 1)[0] in self.runner_packages

    def _shadowed(self) -> list[str]:
        """Toolchain modules imported from the workspace, and standard-library ones imported
        from a file the candidate wrote."""
        found = []
        for name, module in list(sys.modules.items()):
            if self._modules.get(name) is module:
                continue  # looked at already
            self._modules[name] = module
            top = name.split(".", 1)[0]
            toolchain = top in self.toolchain
            if not toolchain and top not in STDLIB:
                continue
            filename = getattr(module, "__file__", None)
            if not isinstance(filename, str):
                continue
            if not _realpath(filename).startswith(self.root + os.sep):
                continue
            if toolchain or self._suspect(filename):
                found.append(name)
        return found[:5]

    def _suspect_value(self, value: object) -> bool:
        """Whether a change in pytest's machinery may come from the code under test: anything
        but a function defined in one of the repository's own, unchanged conftest files (a
        deletion, a builtin, a function of pytest itself put in another's place, code from
        any other file)."""
        if isinstance(value, property):
            value = value.fget
        elif isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        filename = getattr(getattr(value, "__code__", None), "co_filename", None)
        if not isinstance(filename, str) or os.path.basename(filename) != "conftest.py":
            return True
        path = _realpath(os.path.abspath(filename))
        return not path.startswith(self.root + os.sep) or self._source_of(value) is not None

    def _candidate_type(self, kind: type) -> bool:
        """Whether a type comes from the candidate: its module or its __eq__/__ne__ is in a
        suspect file. (Wildcards of the tests' own, mock.ANY and the like, are not.)"""
        module = sys.modules.get(getattr(kind, "__module__", ""))
        files = [getattr(module, "__file__", None)]
        for name in ("__eq__", "__ne__"):
            function = getattr(kind, name, None)
            files.append(getattr(getattr(function, "__code__", None), "co_filename", None))
        return any(isinstance(f, str) and self._suspect(f) for f in files)

    # ------------------------------------------------------------------ the tests' own code

    def _remember_code(self, item: pytest.Item) -> None:
        if isinstance(item, pytest.Function):
            function = _unbound(getattr(item, "obj", None))
            self.codes[item.nodeid] = (function, _codes(function))

    def check_code(self, item: pytest.Item, when: str) -> None:
        """Record a test whose function or code changed since collection, or whose item got
        its own runtest/setup/teardown."""
        shadowing = sorted(set(vars(item)) & ITEM_METHODS)
        if shadowing:
            self.problem(f"{item.nodeid} had its {shadowing[0]} replaced at run time", when)
        known = self.codes.get(item.nodeid)
        if known is None:
            return
        function = _unbound(getattr(item, "obj", None))
        same_codes = [id(c) for c in _codes(function)] == [id(c) for c in known[1]]  # alive: held
        if function is not known[0] or not same_codes:
            self.problem(f"the code of {item.nodeid} was replaced at run time", when)

    def _skipped_by_candidate(self, nodeid: str, exc: BaseException) -> None:
        """Record a skip or xfail raised through a file the candidate wrote: code under test
        that skips the tests that check it."""
        if not isinstance(exc, SKIPS):
            return
        trace = exc.__traceback__
        while trace is not None:
            filename = trace.tb_frame.f_code.co_filename
            if self._suspect(filename):
                where = os.path.relpath(filename) if not filename.startswith("<") else filename
                self.problem(f"{nodeid} was skipped by the code under test ({where})")
                return
            trace = trace.tb_next

    def _profile(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is self._expected:
            self._entered = True
            sys.setprofile(None)

    def _source_of(self, function: object) -> str | None:
        """Where `function` comes from when that is suspect, else None: a file the candidate
        changed, a file in the workspace written since the run began, or no file at all
        (code compiled from a string)."""
        code = getattr(function, "__code__", None)
        filename = getattr(code, "co_filename", None)
        if not isinstance(filename, str):
            return None
        suspect = self._filenames.get(filename)
        if suspect is None:
            suspect = self._suspect(filename)
            self._filenames[filename] = suspect
        return filename if suspect else None

    def _suspect(self, filename: str) -> bool:
        if filename.startswith("<"):
            return True
        path = _realpath(os.path.abspath(filename))
        if path in self.changed:
            return True
        if not path.startswith(self.root + os.sep):
            return False
        try:
            return os.stat(path).st_ctime >= self.started  # ctime cannot be set back
        except OSError:
            return True

    # ------------------------------------------------------------------ hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self._config = config

    @pytest.hookimpl
    def pytest_load_initial_conftests(self) -> None:
        """After legacypath's own changes (tryfirst), before any conftest loads (trylast):
        those become the reference; any other change by then is flagged."""
        legacypath = sys.modules.get("_pytest.legacypath")
        own = getattr(legacypath, "__file__", None)

        def suspect(value: object) -> bool:
            value = value.fget if isinstance(value, property) else value
            return getattr(getattr(value, "__code__", None), "co_filename", None) != own

        for name in changes(self.baseline, suspect)[:5]:
            self.problem(f"{name} was replaced or changed at run time", "before conftest")
        self.reference = snapshot()

    @pytest.hookimpl(optionalhook=True)  # pytest < 5 has no such hook
    def pytest_assertion_pass(self) -> None:
        """Implemented so that passing asserts take pytest's pass path (see the probes)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self._remember_code(item)
        self.check("after collection")

    @_wrapper(trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        self.check(f"before {item.nodeid}")
        return (yield from self._observe(item, "setup"))

    @_wrapper(trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        self._begin_call(item)
        try:
            result = yield from self._observe(item, "call")
        finally:
            self._stop_profile()
        self._end_call(item)
        return result

    def _begin_call(self, item: pytest.Item) -> None:
        """Before a test's call phase: its code unchanged, and a profile hook that must see
        the test's own code run."""
        self.check_code(item, f"before {item.nodeid}")
        known = self.codes.get(item.nodeid)
        self._expected = known[1][0] if known is not None and known[1] else None
        self._entered = False
        if self._expected is not None:
            sys.setprofile(self._profile)

    def _stop_profile(self) -> None:
        if sys.getprofile() == self._profile:
            sys.setprofile(None)

    def _end_call(self, item: pytest.Item) -> None:
        """After a test's call phase: its code unchanged, and its function really ran."""
        self.check_code(item, f"after {item.nodeid}")
        if self._expected is not None and not self._entered:
            self.problem(
                f"{item.nodeid} went through its call phase but its test function never ran "
                "(pytest's runner was bypassed)",
                f"at {item.nodeid}",
            )

    @_wrapper(trylast=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        result = yield from self._observe(item, "teardown")
        self.check(f"after {item.nodeid}")
        return result

    def _observe(self, item: pytest.Item, phase: str) -> Generator[None, object, object]:
        try:
            result = yield
        except BaseException as exc:
            self.records.phase(item.nodeid, phase, True)
            self._skipped_by_candidate(item.nodeid, exc)
            raise
        self.records.phase(item.nodeid, phase, False)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.records.report(report.nodeid, str(report.outcome))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        longrepr = report.longrepr
        if report.outcome == "skipped" and isinstance(longrepr, tuple) and longrepr:
            if isinstance(longrepr[0], str) and self._suspect(longrepr[0]):
                where = os.path.relpath(longrepr[0])
                self.problem(f"{report.nodeid} was skipped by the code under test ({where})")
        if report.outcome != "passed":
            self.records.report(report.nodeid, str(report.outcome))

    @_wrapper(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        self.check("at the end of the session")
        result = yield
        self.check("after the reports were written")
        return result

