"""ooda's recording harness for the runners that write no report of their own (Django's
runtests.py, sympy's bin/test): it runs the runner's script in its own process and keeps, from
the runner's own calls, which tests passed, failed, errored or were skipped; at the end it writes
that record to a file whose name the code under test cannot know, and ends the process with the
runner's exit status. The host grades from the record, never from printed lines
(verifiers/runners/output.py).

    python3 HARNESS CONFIG KIND SCRIPT ARGS...

CONFIG (a JSON file, read and deleted before any repository code runs) names the record's path
and holds the key the record is signed with (HMAC-SHA256): a record written by anything else,
a daemon the code under test left running included, does not verify on the host.
KIND is `unittest` (the stdlib's TestResult, under Django's runner) or `sympy` (sympy's
reporter, wrapped as its module is imported). The record holds each test's worst outcome, the
exit status the runner ended with, and the runner functions found replaced at the end.

This file runs inside the sandbox on the environment's Python (3.5 and later: no f-strings, type
comments for mypy); the host only reads it as text.
"""

import hashlib
import hmac
import json
import os
import runpy
import sys
import traceback

try:  # the type comments below (a Python 3.5 file cannot hold variable annotations)
    from typing import Any, Callable, Dict, List  # noqa: F401
except ImportError:  # pragma: no cover
    pass

_open = os.open
_write = os.write
_exit = os._exit
_hmac = hmac.new
_sha256 = hashlib.sha256
RANK = {"passed": 0, "xfailed": 1, "skipped": 1, "failed": 2, "error": 3}
tests = {}  # type: Dict[str, str]
"""Test id -> its worst outcome so far."""
failures = [0]
"""Failures and errors the runner reported (each makes it exit non-zero)."""
watched = []  # type: List[Any]
"""(owner, name, value) of the runner's functions as they were once set up."""


def note(test_id, outcome):
    # type: (str, str) -> None
    known = tests.get(test_id)
    if known is None or RANK.get(outcome, 3) > RANK.get(known, 3):
        tests[test_id] = outcome


def watch(owner, names):
    # type: (Any, List[str]) -> None
    for name in names:
        if name in vars(owner):
            watched.append((owner, name, vars(owner)[name]))


# --------------------------------------------------------------------------- unittest (Django)


def unittest_id(test):
    # type: (Any) -> str
    """`test_name (module.Class)`, the id Django's runner ids have."""
    method = getattr(test, "_testMethodName", None)
    kind = type(test)
    if not isinstance(method, str):
        return str(test)
    return "%s (%s.%s)" % (method, kind.__module__, getattr(kind, "__qualname__", kind.__name__))


def _recording(original, outcome):
    # type: (Callable[..., Any], Any) -> Callable[..., Any]
    counted = original.__name__ in ("addFailure", "addError")

    def add(self, test, *args, **kwargs):
        # type: (Any, Any, *Any, **Any) -> Any
        said = outcome(args) if callable(outcome) else outcome
        if said is not None:
            note(unittest_id(test), said)
        if counted:
            failures[0] += 1
        return original(self, test, *args, **kwargs)

    add.__name__ = original.__name__
    add.__doc__ = original.__doc__
    return add


UNITTEST_OUTCOMES = {
    "addSuccess": "passed",
    "addFailure": "failed",
    "addError": "error",
    "addSkip": "skipped",
    "addExpectedFailure": "xfailed",
    "addUnexpectedSuccess": "failed",
    # a subtest that failed fails its test (args: subtest, err)
    "addSubTest": lambda args: "failed" if len(args) > 1 and args[1] is not None else None,
}  # type: Dict[str, Any]


class Recorder(object):
    """What unittest's own `TestCase.run` reports to: each outcome recorded here first, then
    handed to the runner's result object (whatever class the runner, or the code under test,
    made it): a result class that turns a failure into a success changes what it prints and
    counts, not the record."""

    def __init__(self, result):
        # type: (Any) -> None
        object.__setattr__(self, "_ooda_result", result)

    def __getattr__(self, name):
        # type: (str) -> Any
        value = getattr(object.__getattribute__(self, "_ooda_result"), name)
        outcome = UNITTEST_OUTCOMES.get(name)
        if outcome is None or not callable(value):
            return value

        def add(test, *args, **kwargs):
            # type: (Any, *Any, **Any) -> Any
            said = outcome(args) if callable(outcome) else outcome
            if said is not None:
                note(unittest_id(test), said)
            return value(test, *args, **kwargs)

        return add

    def __setattr__(self, name, value):
        # type: (str, Any) -> None
        setattr(object.__getattribute__(self, "_ooda_result"), name, value)


def _recorded_run(original):
    # type: (Callable[..., Any]) -> Callable[..., Any]
    def run(self, result=None):
        # type: (Any, Any) -> Any
        return original(self, Recorder(result) if result is not None else None)

    run.__name__ = "run"
    run.__doc__ = original.__doc__
    return run


def install_unittest():
    # type: () -> None
    """unittest's `TestCase.run` reports to a Recorder; the base `TestResult.add*` record too
    (outcomes reported outside `run`: Django's `_pre_setup` errors, a class set-up's errors);
    every function of the stdlib's unittest watched from now on."""
    import unittest.case
    import unittest.loader
    import unittest.main
    import unittest.result
    import unittest.runner
    import unittest.suite

    result = unittest.result.TestResult
    for name, outcome in UNITTEST_OUTCOMES.items():
        original = vars(result).get(name)
        if original is not None:
            setattr(result, name, _recording(original, outcome))
    case = unittest.case.TestCase
    case.run = _recorded_run(vars(case)["run"])  # type: ignore[method-assign]
    for module in (unittest.case, unittest.result, unittest.runner, unittest.suite,
                   unittest.loader, unittest.main):
        watch(module, sorted(n for n, v in vars(module).items() if callable(v)))
        for value in list(vars(module).values()):
            if isinstance(value, type) and getattr(value, "__module__", "") == module.__name__:
                watch(value, sorted(n for n, v in vars(value).items() if callable(v)))


# --------------------------------------------------------------------------- sympy

SYMPY_MODULES = ("sympy.testing.runtests", "sympy.utilities.runtests")
SYMPY_OUTCOMES = {
    "test_pass": "passed",
    "test_fail": "failed",
    "test_exception": "error",
    "test_skip": "skipped",
    "test_xfail": "xfailed",
    "test_xpass": "failed",
}
_active = [""]


def _sympy_entering(original):
    # type: (Callable[..., Any]) -> Callable[..., Any]
    def entering_test(self, f, *args, **kwargs):
        # type: (Any, Any, *Any, **Any) -> Any
        _active[0] = str(getattr(f, "__name__", ""))
        return original(self, f, *args, **kwargs)

    return entering_test


def _sympy_outcome(original, outcome):
    # type: (Callable[..., Any], str) -> Callable[..., Any]
    counted = outcome in ("failed", "error") and original.__name__ != "test_xpass"

    def report(self, *args, **kwargs):
        # type: (Any, *Any, **Any) -> Any
        if _active[0]:
            note(_active[0], outcome)
        if counted:
            failures[0] += 1
        return original(self, *args, **kwargs)

    report.__name__ = original.__name__
    return report


def wrap_sympy(module):
    # type: (Any) -> None
    """Once sympy's runner module is loaded: its reporter's outcome calls recorded, its runner
    classes' functions watched."""
    reporter = getattr(module, "PyTestReporter", None)
    if not isinstance(reporter, type):
        return
    for name, outcome in SYMPY_OUTCOMES.items():
        original = vars(reporter).get(name)
        if original is not None:
            setattr(reporter, name, _sympy_outcome(original, outcome))
    entering = vars(reporter).get("entering_test")
    if entering is not None:
        reporter.entering_test = _sympy_entering(entering)  # type: ignore[attr-defined]
    for cls_name in ("PyTestReporter", "Reporter", "SymPyTests"):
        cls = getattr(module, cls_name, None)
        if isinstance(cls, type):
            watch(cls, sorted(n for n, v in vars(cls).items() if callable(v)))


class SympyWatch(object):
    """A meta-path finder that wraps sympy's runner module right after it is executed."""

    def find_spec(self, name, path=None, target=None):
        # type: (str, Any, Any) -> Any
        if name not in SYMPY_MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                loader = spec.loader  # type: Any
                loader.exec_module = _wrapping(loader.exec_module)
                return spec
        return None


def _wrapping(original):
    # type: (Callable[[Any], None]) -> Callable[[Any], None]
    def exec_module(module):
        # type: (Any) -> None
        original(module)
        wrap_sympy(module)

    return exec_module


# --------------------------------------------------------------------------- the run


def exit_status(code):
    # type: (Any) -> int
    """What the interpreter would exit with for SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:
        pass
    return 1


def main(argv):
    # type: (List[str]) -> None
    config_path, kind, script = argv[0], argv[1], argv[2]
    with open(config_path) as handle:
        config = json.load(handle)
    os.unlink(config_path)
    record_path = config["record"]
    key = bytes.fromhex(config.get("key", ""))
    if kind == "sympy":
        sys.meta_path.insert(0, SympyWatch())
    else:
        install_unittest()
    sys.argv[:] = [script] + argv[3:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python3 SCRIPT` has it
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        status = exit_status(exc.code)
    except BaseException:
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    changed = ["%s.%s" % (getattr(owner, "__qualname__", getattr(owner, "__name__", owner)), name)
               for owner, name, value in watched if vars(owner).get(name) is not value]
    record = {"tests": tests, "exit_code": status, "failures": failures[0],
              "problems": changed[:5]}
    fd = _open(record_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    body = json.dumps(record).encode("utf-8")
    data = _hmac(key, body, _sha256).hexdigest().encode("ascii") + b"\n" + body
    while data:
        data = data[_write(fd, data):]
    _exit(status)


if __name__ == "__main__":
    main(sys.argv[1:])
