"""The guard's entry point: RECORD CONFIG PYTEST_ARGS... Start recording provenance (the
audit hook), preload the toolchain, snapshot the watched functions, run pytest with the Guard
plugin, write the record, signed with a key read from the config file (deleted before any
repository code runs), to a file created before the run, and end the process with `os._exit`
(atexit handlers of the code under test never run).
"""

from __future__ import annotations

import gc
import hashlib
import hmac
import json
import os
import sys
import time
from typing import NoReturn

import pytest

from . import early, prepared, redecide, stores, toolchain
from .legacy import LegacyGuard
from .plugin import NEW_WRAPPERS, Guard
from .provenance import Provenance
from .snapshot import snapshot
from .trust import Judge

_exit = os._exit  # saved before the code under test could replace them
_write = os.write
_dumps = json.dumps
_hmac = hmac.new
_sha256 = hashlib.sha256

REWRITE_NOTICE = "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning"


def main(argv: list[str]) -> NoReturn:
    """RECORD CONFIG PYTEST_ARGS...: run pytest, write the record, end the process."""
    record_path, config_path, *pytest_args = argv
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    # the record's key: gone from the disk before any repository code runs, so that nothing
    # the code under test starts (a daemon that outlives the run) can sign a record
    key = bytes.fromhex(str(config.pop("key", "")))
    os.unlink(config_path)
    fd = os.open(record_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    changed = [os.path.normpath(p) for p in config.get("changed_files", [])]
    root = os.path.realpath(os.getcwd())
    changed_real = {os.path.realpath(os.path.join(root, p)) for p in changed}
    provenance = Provenance(root, changed_real, time.time())
    provenance.watch_reads(config.get("hidden_files", []))
    provenance.start()  # before anything of the workspace can be imported
    names = toolchain.toolchain_modules()
    # pytest-dev/pytest tests pytest: its own pytest runs them, as the harness runs them (the
    # runner is then the code under test; docs/SECURITY.md says what that leaves open)
    own = toolchain.repository_own(names, changed)
    names -= own
    # the plugins the task's environment names or has installed (the container's own
    # variable, set by the host at launch): loaded explicitly, as plugin autoload stays off
    plugins = [p for p in os.environ.get("OODA_PYTEST_PLUGINS", "").split(",") if p]
    preloaded = toolchain.image_plugins(plugins)
    toolchain.preload(names, preloaded, root)
    judge = Judge(root, changed_real, provenance.started, provenance)
    judge.changed_lines = {
        os.path.realpath(os.path.join(root, path)): [(int(a), int(b)) for a, b in spans]
        for path, spans in dict(config.get("changed_lines", {})).items()
    }
    redecide.candidate_override = judge.candidate_override  # before the snapshot holds it
    stores.trusted_store = judge.own_store
    guard = (Guard if NEW_WRAPPERS else LegacyGuard)(judge, snapshot())
    guard.toolchain = names
    guard.runner_packages = own & {"pytest", "_pytest"}
    sys.path[0] = os.getcwd()  # as `python -m pytest` has it (not the launcher's directory)
    pytest_args = [word for p in plugins for word in ("-p", p)] + pytest_args
    if preloaded and hasattr(pytest, "PytestAssertRewriteWarning"):
        # pytest says a preloaded plugin's asserts cannot be rewritten; a suite with
        # `filterwarnings = error` (astropy) would make that an error before any test
        pytest_args = ["-W", REWRITE_NOTICE, *pytest_args]
    # a verdict-only run (-x) may end at its first failure, unsigned: the host then always
    # judges it failed (early.py)
    registered: list[object] = [guard]
    if config.get("stop_at_failure"):
        registered.append(early.StopAtFailure(provenance.hidden_reads))
    if not gc.get_freeze_count():
        # a cold run (bwrap, local): what exists now (the standard library's, pytest's and this
        # guard's objects) is left out of the collector, as Docker's warm interpreter froze it
        # before forking; pytest 8.4+ collects at cleanup and at unconfigure, each collection
        # otherwise walking the guard's records of the whole toolchain (click: ~0.1 s a run)
        gc.freeze()
    try:
        exit_code = int(prepared.main(pytest_args, registered))
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
    record = guard.records.record(exit_code, guard.problems)
    record["hidden_reads"] = provenance.hidden_reads[:10]
    body = _dumps(record).encode("utf-8")
    data = _hmac(key, body, _sha256).hexdigest().encode("ascii") + b"\n" + body
    while data:
        data = data[_write(fd, data) :]
    _exit(exit_code)
