"""The launcher of every verification test run: pytest, plus a record of the run that the code
under test cannot fake by rewriting pytest's own reports.

This package runs inside the sandbox, with the sandbox's Python (standard library and pytest
only); it is never imported on the host except by its unit tests. The host copies its modules
into the workspace's report directory as the package `_ooda_guard`, next to a launcher script
(verifiers/pytest_check/run.py, `install_guard`), and runs

    python3 -s -B .ooda/guard-NONCE.py RECORD.json CONFIG.json PYTEST_ARGS...

Everything below happens before any repository code is imported (pytest, the built-in plugins
and this plugin are loaded first, from the image, with the workspace not yet on sys.path):

- the toolchain's packages (pytest's own dependencies, read from its metadata) are imported
  too, so a module in the workspace named like one cannot replace it; any toolchain module
  found imported from the workspace (or a standard-library one from a file the candidate
  wrote) is tampering (toolchain.py);
- the functions and methods of `pytest`, `_pytest`, `pluggy` and this guard are snapshotted
  (again once pytest's legacypath plugin made its own changes, before any conftest loads), and
  checked before and after every test and at the end: one replaced, added or removed is caught
  by name whatever file the replacement lives in (another pytest function put in its place
  too); only a replacement defined in one of the repository's own, unchanged conftest files is
  not held against it (snapshot.py);
- each collected test's function and code objects (compared by identity) are
  recorded at collection and checked around its call, and the call phase must show the test's
  own code being entered (a profile hook, removed as soon as it has seen it): a bypassed
  runner, a `__code__` swapped for a no-op, an instance-level `runtest` are caught (plugin.py);
- every comparison in a passing rewritten `assert` is probed (pytest's assertion-pass path):
  an operand that is not a plain builtin value and compares equal to a fresh object, or to a
  different value of its own builtin base type (an `__eq__` that is always true), is tampering
  when its type or its `__eq__` comes from a file the candidate wrote (the tests' own
  wildcards, `mock.ANY` and the like, are not held against it) (probes.py);
- every hook implementation is checked to come from somewhere other than the files the
  candidate changed (a plugin registered at run time by the code under test);
- the innermost hook wrappers around each test's setup, call and teardown record whether the
  phase raised, beneath the report objects that junitxml and other plugins consume, and the
  reports themselves are recorded as they are logged; a test is "good" only when all three
  phases ran without raising and every report said passed (plugin.py, legacy.py for pluggy
  before 1.1);
- after pytest returns, the record is written (to a file created before the run) and the
  process ends with `os._exit`: atexit handlers of the code under test run no more (main.py).

The host (verifiers/pytest_check/integrity.py) cross-checks this record with the JUnit report
and the exit code. Code running inside the test process can in principle forge anything in it;
this makes the generic tricks fail loudly instead of passing quietly.

The modules import one another relatively (`from . import probes`), so they work both as
`_ooda_guard` in the sandbox and as `ooda.verifiers.pytest_check.guard` for type checking and
unit tests; main.py imports every one of them before the workspace joins sys.path.
"""
