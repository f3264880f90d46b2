"""The launcher of every verification test run: pytest, plus a record of the run that the code
under test cannot fake by rewriting pytest's own reports.

It runs inside the sandbox, with the sandbox's Python (standard library and pytest only); the
host copies this file into the workspace's report directory and runs

    python3 -s -B GUARD.py RECORD.json CONFIG.json PYTEST_ARGS...

Everything below happens before any repository code is imported (pytest, the built-in plugins
and this plugin are loaded first, from the image, with the workspace not yet on sys.path):

- the functions and methods of `pytest`, `_pytest`, `pluggy` and this guard are snapshotted, and checked
  again before and after every test and at the end: one replaced, added or removed by code the
  candidate wrote (a monkeypatched JUnit writer, report class or runner) is caught by name,
  while replacements defined in trusted files (pytest's legacypath plugin, the repository's
  own conftest files) are not held against it;
- every hook implementation is checked to come from somewhere other than the files the
  candidate changed (a plugin registered at run time by the code under test);
- the innermost hook wrappers around each test's setup, call and teardown record whether the
  phase raised, beneath the report objects that junitxml and other plugins consume, and the
  reports themselves are recorded as they are logged; a test is "good" only when all three
  phases ran without raising and every report said passed;
- after pytest returns, the record is written (to a file created before the run) and the
  process ends with `os._exit`: atexit handlers of the code under test run no more.

The host (verifiers/integrity.py) cross-checks this record with the JUnit report and the exit
code. Code running inside the test process can in principle forge anything in it; this makes
the generic tricks fail loudly instead of passing quietly.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import types
from collections.abc import Callable, Generator
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

Snapshot = dict[tuple[str, str], dict[str, object]]
"""(module, class name or "" for the module itself) -> member name -> the function or method;
for a class, the member "" holds the frozenset of its method names."""


def _watched(module_name: str) -> bool:
    """pytest, _pytest, pluggy, and this module itself (its Guard class and helpers)."""
    return module_name.split(".", 1)[0] in WATCHED_PACKAGES or module_name == __name__


def preload() -> None:
    """Import pytest's built-in plugins now, so that the snapshot covers them."""
    import _pytest.config

    names = [*_pytest.config.essential_plugins, *_pytest.config.default_plugins]
    for name in names:
        try:
            importlib.import_module(f"_pytest.{name}")
        except Exception:  # a plugin this pytest lacks or cannot load: pytest will say
            continue


def snapshot() -> Snapshot:
    """Every function of the watched modules and every method of their classes, by name; for
    each class also the names of its methods (a method added later overrides an inherited one)."""
    found: Snapshot = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not _watched(module_name):
            continue
        functions: dict[str, object] = {}
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType | types.BuiltinFunctionType):
                functions[attr] = value
            elif isinstance(value, type) and value.__module__ == module_name:
                members = {k: v for k, v in vars(value).items() if isinstance(v, DESCRIPTORS)}
                found[(module_name, attr)] = {**members, "": frozenset(members)}
        found[(module_name, "")] = functions
    return found


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
                if now is not value and suspect(now):
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


class Guard:
    """The pytest plugin: raw phase outcomes, logged reports, tamper checks."""

    def __init__(self, changed_files: list[str], baseline: Snapshot) -> None:
        self.root = _realpath(os.getcwd())
        self.changed = {_realpath(os.path.join(self.root, p)) for p in changed_files}
        self.started = time.time()
        self.baseline = baseline
        self.raw: dict[str, dict[str, bool]] = {}
        """node id -> phase -> raised."""
        self.reports: dict[str, list[str]] = {}
        """node id -> the outcomes of its logged reports."""
        self.keys: dict[str, tuple[str, str]] = {}
        """node id -> (classname, name) as junitxml writes them."""
        self.problems: list[str] = []
        self._seen_problems: set[str] = set()
        self._filenames: dict[str, bool] = {}
        import _pytest.junitxml

        self._mangle = _pytest.junitxml.mangle_test_address
        self._escape = _pytest.junitxml.bin_xml_escape
        self._config: pytest.Config | None = None

    # ------------------------------------------------------------------ checks

    def problem(self, text: str, when: str = "") -> None:
        """Record `text` once (where it was first seen: `when`)."""
        if text not in self._seen_problems and len(self.problems) < MAX_PROBLEMS:
            self._seen_problems.add(text)
            self.problems.append(f"{text} ({when})" if when else text)

    def check(self, when: str) -> None:
        """Record any change to pytest's machinery and any hook from the candidate's files."""
        for name in changes(self.baseline, self._suspect_value)[:5]:
            self.problem(f"{name} was replaced or changed at run time", when)
        if self._config is None:
            return
        for hook_name, caller in list(vars(self._config.hook).items()):
            get = getattr(caller, "get_hookimpls", None)
            if get is None:
                continue
            for impl in get():
                if impl.plugin is self:
                    continue
                filename = self._source_of(impl.function)
                if filename is not None:
                    where = os.path.relpath(filename)
                    self.problem(f"{where} registers a pytest hook ({hook_name}) at run time", when)

    def _suspect_value(self, value: object) -> bool:
        """Whether a replacement in pytest's machinery may come from the code under test: its
        code is in a suspect file (see _source_of), or it has no code at all (a deletion, a
        builtin). Replacements defined in trusted files (pytest's own plugins, e.g.
        legacypath; the repository's conftest files) are not suspect."""
        if isinstance(value, property):
            value = value.fget
        elif isinstance(value, staticmethod | classmethod):
            value = value.__func__
        if not isinstance(getattr(getattr(value, "__code__", None), "co_filename", None), str):
            return True
        return self._source_of(value) is not None

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
            self.keys[nodeid] = (".".join(names[:-1]), str(self._escape(names[-1])))

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

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.check("after collection")

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        self.check(f"before {item.nodeid}")
        return (yield from self._observe(item, "setup"))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._observe(item, "call"))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        result = yield from self._observe(item, "teardown")
        self.check(f"after {item.nodeid}")
        return result

    def _observe(self, item: pytest.Item, phase: str) -> Generator[None, object, object]:
        try:
            result = yield
        except BaseException:
            self._raw(item, phase, True)
            raise
        self._raw(item, phase, False)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._key(report.nodeid)
        self.reports.setdefault(report.nodeid, []).append(str(report.outcome))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.outcome != "passed":
            self._key(report.nodeid)
            self.reports.setdefault(report.nodeid, []).append(str(report.outcome))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        self.check("at the end of the session")
        result = yield
        self.check("after the reports were written")
        return result


def main(argv: list[str]) -> NoReturn:
    """RECORD CONFIG PYTEST_ARGS...: run pytest, write the record, end the process."""
    record_path, config_path, *pytest_args = argv
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    fd = os.open(record_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    preload()
    guard = Guard(list(config.get("changed_files", [])), snapshot())
    sys.path[0] = os.getcwd()  # as `python -m pytest` has it (not this file's directory)
    try:
        exit_code = int(pytest.main(pytest_args, plugins=[guard]))
    except BaseException as exc:  # SystemExit & co. escaping pytest: the run did not finish
        guard.problem(f"the test run was ended by {type(exc).__name__} from the code under test")
        exit_code = 3
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
