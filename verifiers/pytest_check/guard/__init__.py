"""The launcher of every verification test run: pytest, plus a record of the run that the code
under test cannot fake by rewriting pytest's own reports.

This package runs inside the sandbox, with the sandbox's Python (standard library and pytest
only); it is never imported on the host except by its unit tests. The host copies its modules
into the workspace's report directory as the package `_ooda_guard`, next to a launcher script
(verifiers/pytest_check/run.py, `install_guard`), and runs

    python3 -s -B .ooda/guard-NONCE.py RECORD.json CONFIG.json PYTEST_ARGS...

Everything below is set up before any repository code is imported (pytest, the built-in
plugins, unittest and this plugin are loaded first, from the image, with the workspace not yet
on sys.path). Trust is decided by identity and time, never by the names code carries
(`co_filename`, `__module__`): what existed before the workspace was importable is the
toolchain's, and everything after is judged by where it came from when it appeared.

- provenance (provenance.py, trust.py): an audit hook, which nothing can remove, records where
  every code object comes from as it appears (a module the import machinery loads from a file
  the candidate could not touch, or code made at run time by a stack of trusted code) and which
  classes the candidate's code created; the candidate's calls of `gc.get_objects` & co. are
  noted;
- the toolchain's packages (pytest's own dependencies, read from its metadata) are imported
  too, so a module in the workspace named like one cannot replace it; any toolchain module
  found imported from the workspace (or a standard-library one from a file the candidate
  wrote) is tampering (toolchain.py);
- the functions, methods and classes of pytest, `_pytest`, pluggy, unittest, the standard-library
  modules that assertions go through and this guard are snapshotted (again once pytest's
  legacypath plugin made its own changes, and once every plugin has configured itself, when
  anything watched changed or a watched module was imported or grew by then) and
  compared by identity before and after every test and at the end: one replaced, added or
  removed, or a watched module replaced in sys.modules, is caught whatever file the
  replacement claims to come from; only a replacement whose code really is one of the
  repository's own, unchanged conftest files is not held against it (snapshot.py);
- every plugin is judged as it is registered: approved only when the whole stack doing it is
  trusted code; each hook implementation pytest calls must be one recorded then, still calling
  the same function, whose code is trusted; pluggy's dispatch must be the objects it was at
  configure time (hooks.py);
- each collected test's function and code objects (compared by identity) are recorded at
  collection and checked around its call, and the call phase must show the test's own code
  being entered (a profile hook, removed as soon as it has seen it): a bypassed runner, a
  `__code__` swapped for a no-op, an instance-level `runtest` are caught (plugin.py);
- every comparison of a passing rewritten `assert`, and of unittest's `assertEqual`,
  `assertAlmostEqual` and `assertIn`, is probed by behaviour: an operand equal to a fresh
  object or to a different value of its partner's type is not comparing values, and is
  tampering unless its class existed before the run or was created by code the candidate could
  not touch (`mock.ANY`, the tests' own wildcards) (probes.py);
- a skip or xfail (pytest's or unittest's) that went through the candidate's code, by
  provenance, fails the run;
- the innermost hook wrappers around each test's setup, call and teardown record whether the
  phase raised, beneath the report objects that junitxml and other plugins consume, and the
  reports themselves are recorded as they are logged; a test is "good" only when all three
  phases ran without raising and every report said passed (plugin.py, records.py, legacy.py for
  pluggy before 1.1);
- after pytest returns, the record is written (to a file created before the run) and the
  process ends with `os._exit`: atexit handlers of the code under test run no more (main.py).

The host (verifiers/pytest_check/integrity.py) cross-checks this record with the JUnit report
and the exit code. Code running inside the test process can in principle forge anything in it
(docs/SECURITY.md says what the verdict guarantees and what is left); a static stage on the
host (verifiers/tamper_check.py) fails the patches that add the primitives such forging needs.

The modules import one another relatively (`from . import probes`), so they work both as
`_ooda_guard` in the sandbox and as `ooda.verifiers.pytest_check.guard` for type checking and
unit tests; main.py imports every one of them before the workspace joins sys.path.
In the Docker sandbox, the warm interpreter that forks each run imported the package already
(from sources the host gave it at launch, agent/sandbox/warm.py) and called `__warm__`; the
run uses that copy when the one in the report directory is byte-identical.
"""

from __future__ import annotations


def __warm__() -> None:
    """Called by the Docker sandbox's warm interpreter (agent/sandbox/docker/zygote.py) after it
    imported this package and after each later import, before it forks any run: the toolchain's
    code is recorded there once (provenance.prepare), the names of the toolchain's
    distributions found (toolchain.remember) and the watched namespaces snapshotted, not
    again in every run; pytest's configuration prepared before is let go (the interpreter
    freezes its heap next)."""
    from . import prepared, snapshot, toolchain
    from .provenance import prepare

    prepared.drop()
    prepare()
    toolchain.remember()
    snapshot.snapshot()  # the watched namespaces' Owners, reused by the runs while unchanged


def __fresh__() -> None:
    """Called by the warm interpreter after it froze its heap: pytest's get_config run once for
    the runs it forks (prepared.py), its objects left where a run's own garbage collector sees
    them."""
    from . import prepared

    prepared.prepare()
