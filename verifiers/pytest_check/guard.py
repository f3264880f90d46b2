"""The launcher of every verification test run: pytest, plus a record of the run that the code
under test cannot fake by rewriting pytest's own reports.

It runs inside the sandbox, with the sandbox's Python (standard library and pytest only); the
host copies this file into the workspace's report directory and runs

    python3 -s -B GUARD.py RECORD.json CONFIG.json PYTEST_ARGS...

Everything below happens before any repository code is imported (pytest, the built-in plugins
and this plugin are loaded first, from the image, with the workspace not yet on sys.path):

- the toolchain's packages (pytest's own dependencies, read from its metadata) are imported
  too, so a module in the workspace named like one cannot replace it; any toolchain module
  found imported from the workspace (or a standard-library one from a file the candidate
  wrote) is tampering;
- the functions and methods of `pytest`, `_pytest`, `pluggy` and this guard are snapshotted
  (again once pytest's legacypath plugin made its own changes, before any conftest loads), and
  checked before and after every test and at the end: one replaced, added or removed is caught
  by name whatever file the replacement lives in (another pytest function put in its place
  too); only a replacement defined in one of the repository's own, unchanged conftest files is
  not held against it;
- each collected test's function and code objects (compared by identity) are
  recorded at collection and checked around its call, and the call phase must show the test's
  own code being entered (a profile hook, removed as soon as it has seen it): a bypassed
  runner, a `__code__` swapped for a no-op, an instance-level `runtest` are caught;
- every comparison in a passing rewritten `assert` is probed (pytest's assertion-pass path):
  an operand that is not a plain builtin value and compares equal to a fresh object, or to a
  different value of its own builtin base type (an `__eq__` that is always true), is tampering
  when its type or its `__eq__` comes from a file the candidate wrote (the tests' own
  wildcards, `mock.ANY` and the like, are not held against it);
- every hook implementation is checked to come from somewhere other than the files the
  candidate changed (a plugin registered at run time by the code under test);
- the innermost hook wrappers around each test's setup, call and teardown record whether the
  phase raised, beneath the report objects that junitxml and other plugins consume, and the
  reports themselves are recorded as they are logged; a test is "good" only when all three
  phases ran without raising and every report said passed;
- after pytest returns, the record is written (to a file created before the run) and the
  process ends with `os._exit`: atexit handlers of the code under test run no more.

The host (verifiers/pytest_check/integrity.py) cross-checks this record with the JUnit report and the exit
code. Code running inside the test process can in principle forge anything in it; this makes
the generic tricks fail loudly instead of passing quietly.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import operator
import os
import re
import sys
import time
import types
import warnings
import xml.sax.saxutils
from collections.abc import Callable, Generator, Sequence
from typing import Any, NoReturn

import pytest

_exit = os._exit  # saved before the code under test could replace them
_write = os.write
_realpath = os.path.realpath
_dumps = json.dumps

WATCHED_PACKAGES = ("pytest", "_pytest", "pluggy")
PHASES = ("setup", "call", "teardown")
MAX_PROBLEMS = 20
DESCRIPTORS = (types.FunctionType, staticmethod, classmethod, property)

REWRITE_NOTICE = "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning"
_XML_QUOTES = {"&quot;": '"', "&apos;": "'"}

NEW_WRAPPERS = "wrapper" in inspect.signature(type(pytest.hookimpl).__call__).parameters
"""pluggy >= 1.1 (new-style `wrapper=True` hooks); older pluggy (an environment's old pytest)
gets the same wrappers in the old `hookwrapper=True` style (LegacyGuard)."""


def _wrapper(**options: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A new-style hook wrapper, or (old pluggy) the plain method LegacyGuard overrides."""
    if NEW_WRAPPERS:
        return pytest.hookimpl(wrapper=True, **options)  # type: ignore[call-overload,no-any-return]
    return lambda function: function


Snapshot = dict[tuple[str, str], dict[str, object]]
"""(module, class name or "" for the module itself) -> member name -> the function or method;
for a class, the member "" holds the frozenset of its method names."""


def _watched(module_name: str) -> bool:
    """pytest, _pytest, pluggy, and this module itself (its Guard class and helpers)."""
    return module_name.split(".", 1)[0] in WATCHED_PACKAGES or module_name == __name__


def preload(toolchain: set[str], plugins: Sequence[str] = ()) -> None:
    """Import pytest's built-in plugins, the `toolchain` packages and the image's `plugins` now
    (from the image: the workspace is not on sys.path yet), so that the snapshot covers them
    (a plugin that patches pytest on import is not mistaken for tampering) and no module in
    the workspace can stand in for one that pytest would only import later."""
    import _pytest.config

    names = [*_pytest.config.essential_plugins, *_pytest.config.default_plugins]
    for name in names:
        try:
            importlib.import_module(f"_pytest.{name}")
        except Exception:  # a plugin this pytest lacks or cannot load: pytest will say
            continue
    for name in [*sorted(toolchain), *plugins]:
        try:
            importlib.import_module(name)
        except Exception:  # an optional dependency not installed (colorama, exceptiongroup)
            continue
    import _pytest.assertion.rewrite as rewrite

    rewrite._call_reprcompare = _probing_reprcompare(rewrite._call_reprcompare)


def image_plugins(names: Sequence[str]) -> list[str]:
    """The plugin modules among `names` that live in the image, not in the workspace (a
    repository's own plugin is candidate code: pytest loads it later, with `-p`)."""
    work = os.getcwd() + os.sep
    found = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name.split(".", 1)[0])
        except Exception:
            continue
        origin = getattr(spec, "origin", None) or ""
        locations = list(getattr(spec, "submodule_search_locations", None) or [])
        if spec is not None and not any(str(p).startswith(work) for p in [origin, *locations]):
            found.append(name)
    return found


_REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def toolchain_modules() -> set[str]:
    """Top-level module names of pytest, pluggy and the distributions pytest requires."""
    names = set(WATCHED_PACKAGES)
    try:
        requires = importlib.metadata.distribution("pytest").requires or []
        owners = importlib.metadata.packages_distributions()
    except Exception:
        return names
    wanted = {_canonical(m.group(0)) for r in requires if (m := _REQUIREMENT.match(r))}
    for module, dists in owners.items():
        if module.isidentifier() and any(_canonical(d) in wanted for d in dists):
            names.add(module)
    return names


def repository_own(names: set[str], changed: list[str]) -> set[str]:
    """The names that the repository itself provides at its top level (cwd), in files the
    candidate did not change: the repository *is* that package (pygments, say, or pytest
    itself, at the top or under src/), and its tests must import it, not the image's copy."""
    own = set()
    for name in names:
        for top in ("", "src"):
            for rel in (f"{name}.py", os.path.join(name, "__init__.py")):
                rel = os.path.join(top, rel)
                if os.path.isfile(rel) and os.path.normpath(rel) not in changed:
                    own.add(name)
    return own


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --------------------------------------------------------------------------- assert probes


class _Probe:
    """A fresh object that nothing honest compares equal to."""


_SCALARS = (int, float, complex, str, bytes, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset)
MAX_PROBED = 1000
_flagged: list[type] = []
"""Types caught comparing equal to anything since the last check (read by the Guard)."""


def _different(value: object) -> object:
    """A value of `value`'s builtin base type that an honest subclass never equals."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return int(value) + 7919
    if isinstance(value, float):
        return float(value) * 2 + 7919.5 if float(value) == float(value) else 0.5
    if isinstance(value, complex):
        return complex(value) + 7919.5
    if isinstance(value, str):
        return str.__str__(value) + "\x00probe"
    if isinstance(value, bytes):
        return bytes(value) + b"\x00probe"
    return _Probe()


def _equal_to_anything(value: object, budget: list[int]) -> type | None:
    """The type of a value in `value` (builtin containers are searched) that says it equals a
    fresh object, or a different value of its builtin base type; else None."""
    kind = type(value)
    if kind in _SCALARS or budget[0] <= 0:
        return None
    budget[0] -= 1
    if isinstance(value, dict) and kind is dict:
        parts: list[object] = [p for pair in value.items() for p in pair]
    elif kind in _CONTAINERS:
        parts = list(value)  # type: ignore[call-overload]
    else:
        with warnings.catch_warnings():  # nothing from a probe reaches the test's warnings
            warnings.simplefilter("ignore")
            for probe in (_Probe(), _different(value)):
                try:
                    if bool(operator.eq(value, probe)) or not bool(operator.ne(value, probe)):
                        return kind
                except Exception:  # numpy arrays, strict __eq__s: no verdict, nothing held
                    continue
        return None
    for part in parts:
        found = _equal_to_anything(part, budget)
        if found is not None:
            return found
    return None


def _probing_reprcompare(original: Callable[..., str]) -> Callable[..., str]:
    def _call_reprcompare(ops: Any, results: Any, expls: Any, each_obj: Any) -> str:
        """pytest's explanation of a comparison; on the pass path (every result true) the
        operands are probed instead, and no diff is computed."""
        try:
            passed = all(bool(r) for r in results)
        except Exception:
            passed = False
        if not passed:
            return original(ops, results, expls, each_obj)
        budget = [MAX_PROBED]
        for operand in list(each_obj):
            found = _equal_to_anything(operand, budget)
            if found is not None and len(_flagged) < MAX_PROBLEMS:
                _flagged.append(found)
        return str(expls[-1]) if expls else ""

    return _call_reprcompare


def snapshot() -> Snapshot:
    """Every function of the watched modules and every method of their classes, by name; for
    each class also the names of its methods (a method added later overrides an inherited one)."""
    found: Snapshot = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not _watched(module_name):
            continue
        functions: dict[str, object] = {}
        for attr, value in list(vars(module).items()):
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
                functions[attr] = value
            elif isinstance(value, type) and value.__module__ == module_name:
                members = {k: v for k, v in vars(value).items() if isinstance(v, DESCRIPTORS)}
                found[(module_name, attr)] = {**members, "": frozenset(members)}
        found[(module_name, "")] = functions
    return found


def _same(now: object, before: object) -> bool:
    """Identical, or a property re-made from the same functions (pytester's inner sessions
    re-apply legacypath's properties)."""
    if now is before:
        return True
    if isinstance(now, property) and isinstance(before, property):
        return now.fget is before.fget and now.fset is before.fset and now.fdel is before.fdel
    return False


def changes(before: Snapshot, suspect: Callable[[object], bool]) -> list[str]:
    """Names of the snapshotted functions and methods that were replaced, removed or added,
    where `suspect(new value)` says the change may come from the code under test. (Run before
    and after every test: each owner's namespace is looked up once, names built only for a
    change.)"""
    changed: list[str] = []
    for (module_name, cls_name), members in before.items():
        module = sys.modules.get(module_name)
        owner: Any = module if not cls_name else getattr(module, cls_name, None)
        prefix = f"{module_name}.{cls_name}" if cls_name else module_name
        if owner is None:
            changed.append(f"{prefix} (removed)")
            continue
        try:
            namespace = vars(owner)
        except TypeError:
            changed.append(prefix)
            continue
        for name, value in members.items():
            if name:
                now = namespace.get(name)
                if not _same(now, value) and suspect(now):
                    changed.append(f"{prefix}.{name}")
                continue
            assert isinstance(value, frozenset)
            added = {
                k
                for k, v in namespace.items()
                if k not in value and isinstance(v, DESCRIPTORS) and suspect(v)
            }
            changed += [f"{prefix}.{k} (added)" for k in sorted(added)]
    return changed


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
    if not isinstance(owner, str) or not _watched(owner):
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
        self.raw: dict[str, dict[str, bool]] = {}
        """node id -> phase -> raised."""
        self.reports: dict[str, list[str]] = {}
        """node id -> the outcomes of its logged reports."""
        self.keys: dict[str, tuple[str, str]] = {}
        """node id -> (classname, name) as junitxml writes them."""
        self.problems: list[str] = []
        self._seen_problems: set[str] = set()
        self._filenames: dict[str, bool] = {}
        self.runner_packages: set[str] = set()
        """pytest's own packages when the repository is pytest itself (their hooks are the
        repository's code, patched or not)."""
        import _pytest.junitxml

        self._mangle = _pytest.junitxml.mangle_test_address
        self._escape = _pytest.junitxml.bin_xml_escape
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
        while _flagged:
            kind = _flagged.pop()
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

    # ------------------------------------------------------------------ records

    def _key(self, nodeid: str) -> None:
        if nodeid not in self.keys:
            names = self._mangle(nodeid)
            escaped = self._escape(names[-1])
            if hasattr(escaped, "uniobj"):  # pytest < 6: py.xml's raw text, XML-escaped
                escaped = xml.sax.saxutils.unescape(escaped.uniobj, _XML_QUOTES)
            self.keys[nodeid] = (".".join(names[:-1]), str(escaped))

    def _raw(self, item: pytest.Item, phase: str, raised: bool) -> None:
        self._key(item.nodeid)
        phases = self.raw.setdefault(item.nodeid, {})
        phases[phase] = phases.get(phase, False) or raised

    def good(self, nodeid: str) -> bool:
        phases = self.raw.get(nodeid, {})
        reports = self.reports.get(nodeid, [])
        return (
            all(phase in phases and not phases[phase] for phase in PHASES)
            and bool(reports)
            and all(outcome == "passed" for outcome in reports)
        )

    def record(self, exit_code: int) -> dict[str, Any]:
        nodes = list(dict.fromkeys([*self.keys, *self.reports]))
        tests = []
        for nodeid in nodes:
            self._key(nodeid)
            classname, name = self.keys[nodeid]
            tests.append(
                {"nodeid": nodeid, "classname": classname, "name": name, "good": self.good(nodeid)}
            )
        return {"exit_code": exit_code, "problems": self.problems, "tests": tests}

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
            self._raw(item, phase, True)
            self._skipped_by_candidate(item.nodeid, exc)
            raise
        self._raw(item, phase, False)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._key(report.nodeid)
        self.reports.setdefault(report.nodeid, []).append(str(report.outcome))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        longrepr = report.longrepr
        if report.outcome == "skipped" and isinstance(longrepr, tuple) and longrepr:
            if isinstance(longrepr[0], str) and self._suspect(longrepr[0]):
                where = os.path.relpath(longrepr[0])
                self.problem(f"{report.nodeid} was skipped by the code under test ({where})")
        if report.outcome != "passed":
            self._key(report.nodeid)
            self.reports.setdefault(report.nodeid, []).append(str(report.outcome))

    @_wrapper(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        self.check("at the end of the session")
        result = yield
        self.check("after the reports were written")
        return result


class LegacyGuard(Guard):
    """The guard for pluggy < 1.1 (no `wrapper=True`): the same innermost wrappers around each
    phase in the old `hookwrapper=True` style, seeing the phase's exception in its outcome."""

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, None]:
        self.check(f"before {item.nodeid}")
        outcome = yield
        self._outcome(item, "setup", outcome)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        self._begin_call(item)
        try:
            outcome = yield
        finally:
            self._stop_profile()
        self._outcome(item, "call", outcome)
        self._end_call(item)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, None]:
        outcome = yield
        self._outcome(item, "teardown", outcome)
        self.check(f"after {item.nodeid}")

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, Any, None]:
        self.check("at the end of the session")
        yield
        self.check("after the reports were written")

    def _outcome(self, item: pytest.Item, phase: str, outcome: Any) -> None:
        excinfo = outcome.excinfo
        self._raw(item, phase, excinfo is not None)
        if excinfo is not None:
            self._skipped_by_candidate(item.nodeid, excinfo[1])


def main(argv: list[str]) -> NoReturn:
    """RECORD CONFIG PYTEST_ARGS...: run pytest, write the record, end the process."""
    record_path, config_path, *pytest_args = argv
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    fd = os.open(record_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    changed = [os.path.normpath(p) for p in config.get("changed_files", [])]
    toolchain = toolchain_modules()
    # pytest-dev/pytest tests pytest: its own pytest runs them, as the harness runs them (the
    # runner is then the code under test; docs/SECURITY.md says what that leaves open)
    own = repository_own(toolchain, changed)
    toolchain -= own
    # the plugins the task's environment names or has installed (the container's own
    # variable, set by the host at launch): loaded explicitly, as plugin autoload stays off
    plugins = [p for p in os.environ.get("OODA_PYTEST_PLUGINS", "").split(",") if p]
    preloaded = image_plugins(plugins)
    preload(toolchain, preloaded)
    guard = (Guard if NEW_WRAPPERS else LegacyGuard)(changed, snapshot())
    guard.toolchain = toolchain
    guard.runner_packages = own & {"pytest", "_pytest"}
    sys.path[0] = os.getcwd()  # as `python -m pytest` has it (not this file's directory)
    pytest_args = [word for p in plugins for word in ("-p", p)] + pytest_args
    if preloaded and hasattr(pytest, "PytestAssertRewriteWarning"):
        # pytest says a preloaded plugin's asserts cannot be rewritten; a suite with
        # `filterwarnings = error` (astropy) would make that an error before any test
        pytest_args = ["-W", REWRITE_NOTICE, *pytest_args]
    try:
        exit_code = int(pytest.main(pytest_args, plugins=[guard]))
    except BaseException as exc:  # SystemExit & co. escaping pytest: the run did not finish
        guard.problem(f"the test run was ended by {type(exc).__name__} from the code under test")
        exit_code = 3
    guard.reference = guard.baseline  # pytest undid its own changes when it unconfigured
    guard.check("after pytest returned")
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    data = _dumps(guard.record(exit_code)).encode("utf-8")
    while data:
        data = data[_write(fd, data) :]
    _exit(exit_code)


if __name__ == "__main__":
    main(sys.argv[1:])
