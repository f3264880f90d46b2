"""The pytest plugin the guard runs pytest with: the innermost wrappers around each test's
phases (what really raised), the reports as they are logged, and the tamper checks run after
collection, before and after every test and at the end of the session: the watched functions
against their snapshot (snapshot.py), the hook implementations pytest calls (hooks.py),
toolchain modules imported from the workspace, test code swapped or never entered, always-equal
operands (probes.py), skips raised by the code under test. Who wrote what is decided by
provenance (provenance.py, trust.py), not by the names code carries.
"""

from __future__ import annotations

import inspect
import operator
import os
import sys
import types
import unittest
from collections.abc import Callable, Generator
from typing import Any

import pytest

from . import beforehand, doctests, probes, rebound, redecide
from .hooks import HookWatch
from .records import Records
from .snapshot import Fingerprint, Owner, Snapshot, changes, retaken
from .trust import Judge, code_of, where_code

_realpath = os.path.realpath  # saved before the code under test could replace them
_is = operator.is_
MAX_PROBLEMS = 20

NEW_WRAPPERS = "wrapper" in inspect.signature(type(pytest.hookimpl).__call__).parameters
"""pluggy >= 1.1 (new-style `wrapper=True` hooks); older pluggy (an environment's old pytest)
gets the same wrappers in the old `hookwrapper=True` style (legacy.LegacyGuard)."""


def _plugin_places(plugins: Any, root: str) -> tuple[str, ...]:
    """Where the registered plugins' code lives: a plugin module's file, or, for a module of an
    installed package, the package's directory (pytest_doctestplus.plugin's configure installs
    the package's own doctest.OutputChecker, defined in its output_checker.py: astropy 5.x's
    gold was judged tampering); a module of the repository (under `root`, a conftest) or of
    pytest itself stays its file alone."""
    places: list[str] = []
    for plugin in plugins:
        path = getattr(plugin, "__file__", None)
        if isinstance(path, str):
            path = _realpath(path)
            folder = os.path.dirname(path)
            installed = not path.startswith(root.rstrip(os.sep) + os.sep) and (
                os.path.basename(folder) not in ("_pytest", "pytest"))  # pytest's: each file
            package = os.path.basename(path) == "__init__.py" or (
                installed and os.path.isfile(os.path.join(folder, "__init__.py")))
            places.append(folder + os.sep if package else path)
    return tuple(places)


def _wrapper(**options: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A new-style hook wrapper, or (old pluggy) the plain method LegacyGuard overrides."""
    if NEW_WRAPPERS:
        return pytest.hookimpl(wrapper=True, **options)  # type: ignore[call-overload,no-any-return]
    return lambda function: function


STDLIB: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
SKIPS: tuple[type[BaseException], ...] = (
    pytest.skip.Exception,
    pytest.xfail.Exception,
    unittest.SkipTest,  # pytest skips a test that raises it, too
)
FUNCTION_RUNTEST = pytest.Function.runtest
"""pytest's own runtest, which calls the test function inside `pytest_pyfunc_call`."""
ITEM_METHODS = frozenset({"runtest", "setup", "teardown", "_getobj", "ihook"})
"""Names an item's instance dictionary must not hold (they would replace pytest's methods)."""


def _unbound(function: object) -> object:
    """The function behind a bound test method: pytest before 7 binds a test method anew to a
    fresh instance of its class at each test's setup, so only the function itself keeps its
    identity (a method swapped on the class still changes it)."""
    return getattr(function, "__func__", function)


_SKIP_WRAPPER = getattr(unittest.skip("")(lambda: None), "__code__", None)
"""The code of every function unittest.skip/skipIf/skipUnless wrap a test in (one code object,
made when unittest was imported, before any repository code)."""


def _skipped_by_unittest(item: pytest.Item, function: object) -> bool:
    """A unittest test that unittest skips without calling it: a method wrapped by unittest's
    own skip decorators (identified by their code object, not by the attribute alone), or a
    method of a class skipped as a whole. Writing `__unittest_skip__` from the code under test is
    a tampering primitive the static stage refuses."""
    cls = getattr(item, "cls", None)
    if cls is None or not isinstance(cls, type) or not issubclass(cls, unittest.TestCase):
        return False
    if getattr(cls, "__unittest_skip__", False) is True:
        return True
    return (
        getattr(function, "__code__", None) is _SKIP_WRAPPER
        and getattr(function, "__unittest_skip__", False) is True
    )


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


class Guard:
    """The pytest plugin: raw phase outcomes, logged reports, tamper checks."""

    plugin_places: tuple[str, ...] = ()
    """Where the registered plugins' code lives (set once they all configured)."""
    _plugins_accepted: dict[tuple[str, str], tuple[object, object]] = {}  # noqa: RUF012
    """(owner, name) -> (value, the class holding it) of the plugins' changes accepted then: the
    check after pytest returned compares with the state before pytest, and a plugin that does
    not undo its change (pytest-doctestplus) is not tampering there; during the tests nothing
    but that very value is accepted (a candidate storing a plugin's function is still judged)."""

    def __init__(self, judge: Judge, baseline: Snapshot) -> None:
        self.judge = judge
        self.root = judge.root
        self.provenance = judge.provenance
        self.baseline = baseline
        self._reference = baseline
        self._fingerprint = Fingerprint(baseline)
        self.hooks = HookWatch(judge, self)
        self.codes: dict[str, tuple[object, tuple[types.CodeType, ...]]] = {}
        self.bound = rebound.Watch(judge)
        """node id -> (test function, its code objects) at collection."""
        self.unittest_skips: set[str] = set()
        """node ids that unittest itself skips without calling them (see _skipped_by_unittest)."""
        self._expected: types.CodeType | None = None
        self._entered = False
        self._pending: pytest.Item | None = None
        """The item whose profile hook goes on in pytest_pyfunc_call."""
        self.records = Records()
        self.problems: list[str] = []
        self._seen_problems: set[str] = set()
        self._config: pytest.Config | None = None
        inside = self.root + os.sep
        self._modules: dict[str, object] = {
            name: module for name, (module, real) in self.provenance.warm_files.items()
            if not real.startswith(inside)
        }
        """sys.modules as _shadowed() last saw it; first, the modules the warm interpreter
        loaded from outside the workspace (provenance.prepare: their real paths taken then),
        which can only have come from the image."""
        self._module_items: tuple[object, ...] = ()
        """sys.modules's names and modules, in order, when _shadowed() last looked."""
        self.toolchain: set[str] = set()
        """Top-level names that must come from the image (see preload)."""

    @property
    def reference(self) -> Snapshot:
        """What check() compares with: the baseline, then pytest's configured state."""
        return self._reference

    @reference.setter
    def reference(self, taken: Snapshot) -> None:
        self._reference = taken
        self._fingerprint = Fingerprint(taken)

    @property
    def runner_packages(self) -> set[str]:
        """pytest's own packages when the repository is pytest itself (their hooks are the
        repository's code, patched or not)."""
        return self.hooks.runner_packages

    @runner_packages.setter
    def runner_packages(self, names: set[str]) -> None:
        self.hooks.runner_packages = names

    # ------------------------------------------------------------------ checks

    def problem(self, text: str, when: str = "") -> None:
        """Record `text` once (where it was first seen: `when`)."""
        if text not in self._seen_problems and len(self.problems) < MAX_PROBLEMS:
            self._seen_problems.add(text)
            self.problems.append(f"{text} ({when})" if when else text)

    def check(self, when: str, full: bool = True) -> None:
        """Record what the probes and the audit hook saw since the last check and, unless
        `full` is False (before a test: the check after the previous one has just run), any
        change to the watched functions, the hooks pytest calls and the modules it imported.
        The hidden test files' text pytest cached to report a failure is dropped each time."""
        self.provenance.forget_hidden_sources()
        if full:
            if not self._fingerprint.unchanged():
                for name in changes(self.reference, self._suspect_replacement)[:5]:
                    self.problem(f"{name} was replaced or changed at run time", when)
                if self._fingerprint.unchanged(sizes=False):  # only classes grew: looked at
                    self._fingerprint = Fingerprint(self.reference, grown=True)
            for name in self._shadowed():
                self.problem(f"{name} was imported from the workspace, not from the image", when)
            for text in self.hooks.check()[:5]:
                self.problem(text, when)
        while probes.flagged:
            kind = probes.flagged.pop()
            if self.judge.candidate_class(kind) or self.judge.comparison_swapped(kind):
                self.problem(
                    f"an assertion compared a {kind.__module__}.{kind.__qualname__} that equals "
                    "anything (its __eq__ does not compare values)",
                    when,
                )
        while beforehand.flagged:
            kind = beforehand.flagged.pop()
            self.problem(
                f"an assertion was about to compare a {kind.__module__}.{kind.__qualname__}, "
                "whose comparison was made by the code under test, and it said it equals a "
                "value it was never given, or is both at most and at least one (it decides by "
                "what it meets, not by its value)",
                when,
            )
        while probes.decided:
            kind = probes.decided.pop()
            base = redecide.builtin_base(kind)
            self.problem(
                f"an assertion compared a {kind.__module__}.{kind.__qualname__}, a subclass of "
                f"{getattr(base, '__name__', 'a builtin')} made by the code under test, whose own "
                f"methods decided it: with {getattr(base, '__name__', 'the builtin')}'s own "
                "comparison it fails",
                when,
            )
        while self.provenance.events:
            event, target = self.provenance.events.pop()
            if event == "search":
                self.problem(f"the code under test called {target} (searching the test run)", when)
                continue
            name = getattr(target, "__qualname__", type(target).__name__)
            self.problem(f"the code of {name} (the test machinery's) was replaced at run time", when)

    def _plugin_made(self, value: object) -> bool:
        """A function whose code, or a class whose body, is trusted code of a registered
        plugin (its file, or its installed package: _plugin_places)."""
        path: object = None
        if isinstance(value, type):
            if self.provenance.class_trusted(value) is True:
                path = getattr(sys.modules.get(value.__module__), "__file__", None)
        else:
            code = code_of(value)
            origin = self.provenance.origin(code) if code is not None else None
            if origin is not None and origin.trusted:
                path = origin.path
        if not isinstance(path, str) or not path:
            return False
        path = _realpath(path)
        return path in self.plugin_places or path.startswith(self.plugin_places)

    def _plugins_change(self, owner: Owner, name: str, value: object) -> bool | None:
        """True when a change is a registered plugin's doing: the new value is its code, or a
        member the plugin's subclass, put in a watched class's place, inherits unchanged
        (pytest-doctestplus sets doctest.OutputChecker to its own subclass at configure and
        never puts it back: astropy 5.x); False for a member such a subclass changed since;
        None when the plugins have nothing to do with it."""
        if not self.plugin_places:
            return None
        if self._plugin_made(value):
            return True
        holder = getattr(sys.modules.get(owner.module), owner.cls, None) if owner.cls else None
        if isinstance(holder, type) and name not in vars(holder) and self._plugin_made(holder):
            return inspect.getattr_static(holder, name, None) is owner.members.get(name)
        return None

    def _suspect_replacement(self, owner: Owner, name: str, value: object) -> bool:
        """The judge's rule, except that when the repository is pytest itself, a value whose
        code is one of its runner's own files is the runner's doing (pytest-dev__pytest-10081:
        the unittest plugin under test sets its fixtures on a TestCase class, unittest's own
        when a test module imports it)."""
        accepted = self._plugins_accepted and self._plugins_accepted.get((owner.prefix, name))
        if accepted and accepted[0] is value and accepted[1] is (
                getattr(sys.modules.get(owner.module), owner.cls, None) if owner.cls else None):
            return False  # a plugin's change judged once all plugins configured, still as it was
        if self.runner_packages:
            code = code_of(value)
            if code is not None:
                origin = self.provenance.origin(code)
                path = origin.path if origin is not None and origin.path else code.co_filename
                if self.hooks._runner_file(path):
                    return False
        return self.judge.suspect_replacement(owner, name, value)

    def _shadowed(self) -> list[str]:
        """Toolchain modules imported from the workspace, and standard-library ones imported
        from a file the candidate wrote."""
        modules = sys.modules
        items = (*modules, *modules.values())
        seen = self._module_items
        if len(items) == len(seen) and all(map(_is, items, seen)):
            return []  # the same names bound to the same modules: looked at already
        self._module_items = items
        found = []
        for name, module in list(modules.items()):
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
            if toolchain or self.judge.suspect_file(filename):
                found.append(name)
        return found[:5]

    # ------------------------------------------------------------------ the tests' own code

    def _remember_code(self, item: pytest.Item) -> None:
        if isinstance(item, pytest.Function):
            function = _unbound(getattr(item, "obj", None))
            self.codes[item.nodeid] = (function, _codes(function))
            self.bound.remember(item.nodeid, getattr(item, "module", None))
            if _skipped_by_unittest(item, function):
                self.unittest_skips.add(item.nodeid)

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
        codes = _codes(function)
        same_codes = len(codes) == len(known[1]) and all(map(_is, codes, known[1]))
        if function is not known[0] or not same_codes:
            self.problem(f"the code of {item.nodeid} was replaced at run time", when)
        for text in self.bound.rebound(item.nodeid)[:5]:
            self.problem(text, when)

    def _skipped_by_candidate(self, nodeid: str, exc: BaseException | None) -> None:
        """Record a skip or xfail raised through the candidate's code (any frame it went
        through, judged by provenance): code under test that skips the tests that check it."""
        if not isinstance(exc, SKIPS):
            return
        trace = exc.__traceback__
        while trace is not None:
            code = trace.tb_frame.f_code
            if self.judge.candidate_code(code):
                where = where_code(code)
                self.problem(f"{nodeid} was skipped by the code under test ({where})")
                return
            trace = trace.tb_next

    def _profile(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is self._expected:
            self._entered = True
            # through _stop_profile: sys.setprofile called straight from this callback would
            # have the profiled frame (a decorator of a changed file: freezegun's) as its
            # caller's caller, which the audit hook would take for the one setting a tracer
            self._stop_profile()

    # ------------------------------------------------------------------ hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self._config = config
        self.hooks.configure(config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Once every plugin has configured itself (pytest-mock wraps unittest.mock's
        asserts), before the session's own hooks run: the changes made by a registered
        plugin's own code or a conftest become the reference; any other change is flagged."""
        config = session.config
        self.plugin_places = _plugin_places(config.pluginmanager.get_plugins(), self.judge.root)
        self._plugins_accepted = {}

        def suspect(owner: Owner, name: str, value: object) -> bool:
            plugins = self._plugins_change(owner, name, value)
            if plugins:
                holder = getattr(sys.modules.get(owner.module), owner.cls, None) if (
                    owner.cls) else None
                self._plugins_accepted[(owner.prefix, name)] = (value, holder)
            return not plugins if plugins is not None else (
                self.judge.suspect_replacement(owner, name, value))

        unchanged = self._fingerprint.unchanged()
        for name in ([] if unchanged else changes(self.reference, suspect))[:5]:
            self.problem(f"{name} was replaced or changed at run time", "while pytest configured")
        self.reference = retaken(self.reference, unchanged)

    @pytest.hookimpl(tryfirst=True)
    def pytest_plugin_registered(self, plugin: object, manager: Any) -> None:
        """Every plugin, judged from within its registration (hooks.py)."""
        for text in self.hooks.registered(plugin, manager)[:5]:
            self.problem(text)

    @pytest.hookimpl
    def pytest_load_initial_conftests(self) -> None:
        """After legacypath's own changes (tryfirst), before any conftest loads (trylast):
        those become the reference; any other change by then is flagged."""
        legacypath = sys.modules.get("_pytest.legacypath")
        own = getattr(legacypath, "__file__", None)

        def suspect(owner: Owner, name: str, value: object) -> bool:
            code = code_of(value)
            return code is None or self.provenance.trusted(code) is False or (
                code.co_filename != own
            )

        unchanged = self._fingerprint.unchanged()  # (of the baseline still)
        for name in ([] if unchanged else changes(self.baseline, suspect))[:5]:
            self.problem(f"{name} was replaced or changed at run time", "before conftest")
        self.reference = retaken(self.baseline, unchanged)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self._remember_code(item)
            if self.judge.changed:
                said = doctests.rewritten(item, self.judge.changed)
                if said:
                    self.problem(said, "after collection")
        self.check("after collection")

    @_wrapper(trylast=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, Any, Any]:
        report = yield
        self._collect_skip(report)
        return report

    def _collect_skip(self, report: Any) -> None:
        """A collector skipped by the code under test (a module-level skip in code a test
        module imports): judged on the exception's frames while pytest still attaches it."""
        excinfo = getattr(getattr(report, "call", None), "excinfo", None)
        if getattr(report, "outcome", None) == "skipped" and excinfo is not None:
            self._skipped_by_candidate(report.nodeid, excinfo.value)

    @_wrapper(trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        self.check(f"before {item.nodeid}", full=False)
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
        self._pending = None
        if self._expected is None:
            return
        if type(item).runtest is FUNCTION_RUNTEST:
            # the function can only run inside pytest_pyfunc_call: the profile hook goes on
            # there, and sees a few calls instead of every hook wrapper's (a runner that
            # never gets there never sets it, and the function is never seen entered)
            self._pending = item
        else:
            sys.setprofile(self._profile)

    @_wrapper(trylast=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        self._watch_entry(pyfuncitem)
        return (yield)

    def _watch_entry(self, pyfuncitem: pytest.Function) -> None:
        """Innermost around pytest's own call of a test function: the profile hook goes on."""
        if pyfuncitem is self._pending:
            self._pending = None
            sys.setprofile(self._profile)

    def _stop_profile(self) -> None:
        self._pending = None
        if sys.getprofile() == self._profile:
            sys.setprofile(None)

    def _end_call(self, item: pytest.Item) -> None:
        """After a test's call phase: its code unchanged, and its function really ran."""
        self.check_code(item, f"after {item.nodeid}")
        skipped = item.nodeid in self.unittest_skips and _skipped_by_unittest(
            item, _unbound(getattr(item, "obj", None))
        )
        if self._expected is not None and not self._entered and not skipped:
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
            if isinstance(longrepr[0], str) and self.judge.suspect_file(longrepr[0]):
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
