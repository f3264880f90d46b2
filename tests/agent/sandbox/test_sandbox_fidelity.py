"""The sandbox looks like a normal checkout to the tests it runs (real Docker, real bwrap).

What a repository's own suite may rely on and a normal machine gives it: a rename between the
checkout and /tmp (environs renames a file of its checkout into tmp_path), a writable HOME of
its own, a UTF-8 locale, umask 022, a /dev/shm and a /tmp of useful size, a few hundred
threads, signals at their default dispositions even when ooda was started with one ignored
(nohup); the start-up hook that completes renames leaves no trace on sys.path and keeps the
distribution's own sitecustomize.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import open_sandbox, py

from ooda.agent.contracts.protocols import Sandbox
from ooda.agent.sandbox import bwrap


@pytest.fixture(params=["docker", "bwrap"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandbox]:
    yield from open_sandbox(request.param, tmp_path / "ws")


def test_rename_between_workspace_and_tmp(box: Sandbox) -> None:
    source = (
        "import os, pathlib, tempfile\n"
        "pathlib.Path('data.env').write_text('X=1\\n')\n"
        "os.mkdir('tree'); pathlib.Path('tree/leaf.txt').write_text('leaf')\n"
        "os.symlink('leaf.txt', 'tree/link')\n"
        "tmp = pathlib.Path(tempfile.mkdtemp())\n"
        "pathlib.Path('data.env').rename(tmp / 'data.env')\n"
        "assert not os.path.exists('data.env') and (tmp / 'data.env').read_text() == 'X=1\\n'\n"
        "(tmp / 'data.env').rename('data.env')\n"
        "os.replace('tree', tmp / 'tree')\n"
        "assert os.readlink(tmp / 'tree' / 'link') == 'leaf.txt'\n"
        "os.rename(tmp / 'tree', 'tree')\n"
        "(tmp / 'busy').mkdir(); (tmp / 'busy' / 'f').write_text('')\n"
        "try:\n"
        "    os.rename('tree', tmp / 'busy')\n"
        "except OSError as exc:\n"
        "    print('kernel error kept:', exc.errno)\n"
        "try:\n"
        "    os.rename('missing', tmp / 'x')\n"
        "except FileNotFoundError:\n"
        "    print('missing source kept')\n"
        "class Accessor:  # pathlib 3.8-3.10 keeps os.rename as a class attribute\n"
        "    rename, replace = os.rename, os.replace\n"
        "Accessor().rename('data.env', tmp / 'moved.env')\n"
        "Accessor().replace(tmp / 'moved.env', 'data.env')\n"
        "import pickle\n"
        "assert pickle.loads(pickle.dumps(os.rename)) is os.rename\n"
        "print('renamed', os.rename.__name__, os.replace.__module__)\n"
    )
    result = py(box, source)
    assert result.exit_code == 0, result.output
    assert "renamed rename os" in result.output
    assert "kernel error kept: 39" in result.output  # ENOTEMPTY, as on one filesystem
    assert "missing source kept" in result.output
    assert (box.workspace / "data.env").read_text() == "X=1\n"
    assert (box.workspace / "tree" / "leaf.txt").read_text() == "leaf"


def test_a_normal_machine_s_environment(box: Sandbox) -> None:
    source = (
        "import json, locale, os, signal, sys, tempfile, threading, time\n"
        "home = os.path.expanduser('~')\n"
        "open(os.path.join(home, '.probe'), 'w').write('x')\n"
        "shm, tmp = os.statvfs('/dev/shm'), os.statvfs(tempfile.gettempdir())\n"
        "threads = [threading.Thread(target=time.sleep, args=(0.3,)) for _ in range(300)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "site = sys.modules.get('sitecustomize')\n"
        "print(json.dumps({'home': home, 'umask': os.umask(0o022),\n"
        "    'encoding': locale.getpreferredencoding(), 'tz': time.tzname[0],\n"
        "    'shm_mib': shm.f_blocks * shm.f_frsize >> 20, 'tmp_mib': tmp.f_blocks * tmp.f_frsize >> 20,\n"
        "    'path': sys.path, 'site': getattr(site, '__file__', None), 'threads': len(threads),\n"
        "    'pythonpath': os.environ.get('PYTHONPATH', ''),\n"
        "    'hup': int(signal.getsignal(signal.SIGHUP))}))\n"
    )
    ignored = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        result = py(box, source)
    finally:
        signal.signal(signal.SIGHUP, ignored)
    assert result.exit_code == 0, result.output
    seen = json.loads(result.output.strip().splitlines()[-1])
    assert seen["home"] == "/home/ooda" and seen["umask"] == 0o022
    assert seen["encoding"] == "UTF-8" and seen["tz"] == "UTC"
    assert seen["shm_mib"] >= 256 and seen["tmp_mib"] >= 1024 and seen["threads"] == 300
    # bwrap resets dispositions through the host's GNU env (coreutils >= 8.31); without it, as said
    resets = not type(box).__module__.endswith("bwrap") or bool(bwrap._default_signals())
    assert seen["hup"] == int(signal.SIG_DFL) or not resets
    # every PYTHONPATH entry on sys.path, in order, as on a normal machine (pylint's
    # modify_sys_path reasons from one to the other; the hook's own entry had gone: pylint-7080)
    entries = [p for p in seen["pythonpath"].split(":") if p]
    assert entries and [p for p in seen["path"] if p in entries] == entries, seen
    assert seen["site"] is None or "/run/ooda" not in seen["site"]  # the image's own, if any
    assert not (box.workspace / ".probe").exists()


def test_a_hanging_test_run_ends_at_its_timeout_and_the_sandbox_stays(tmp_path: Path) -> None:
    """On a fresh Docker sandbox PID 1 may import pytest before a pytest command: that import
    counts in the command's time, and the host waits for it, so the hanging run ends timed out
    (its output kept the second time) instead of the host killing the container."""
    for box in open_sandbox("docker", tmp_path / "ws"):
        (box.workspace / "test_hang.py").write_text(
            "import time\n\n\ndef test_ok():\n    pass\n\n\ndef test_hang():\n    time.sleep(600)\n")
        argv = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_hang.py"]
        first = box.run(argv, timeout_s=3)
        assert first.timed_out and not first.output.startswith("sandbox unusable"), first
        second = box.run(argv, timeout_s=8)
        assert second.timed_out and second.output.startswith("."), second
        after = box.run(["echo", "alive"], timeout_s=30)
        assert after.exit_code == 0 and after.output == "alive\n", after
