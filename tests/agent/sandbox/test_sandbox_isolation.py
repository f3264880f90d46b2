"""Each isolation property, shown by a candidate trying to break it (real Docker, real bwrap).

No network, no host environment, no writes outside the workspace, bounded processes and
memory, nothing outliving its command, capped output.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip, host_processes_with, open_sandbox, py

from ooda.agent.contracts.protocols import Sandbox
from ooda.agent.sandbox.limits import configured
from ooda.agent.sandbox.output import DEFAULT_CAP_BYTES


@pytest.fixture(params=["docker", "bwrap"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandbox]:
    yield from open_sandbox(request.param, tmp_path / "ws")


def _host_addresses() -> list[str]:
    addresses = ["127.0.0.1"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("1.1.1.1", 53))  # no packet is sent; picks the outgoing address
            addresses.append(probe.getsockname()[0])
        except OSError:
            pass
    return addresses


def _only_in_box(box: Sandbox) -> list[str]:
    """Processes still running in the sandbox (Docker: `docker top`, minus the reaper)."""
    if box.backend != "docker":
        return []
    api = backend_or_skip("docker").client.api  # type: ignore[attr-defined]
    top = api.top(box.container_id)["Processes"]  # type: ignore[attr-defined]
    return [" ".join(row) for row in top if "ooda-init" not in row[-1]]


def test_no_network(box: Sandbox) -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen()
    server.settimeout(0)
    port = server.getsockname()[1]
    targets = [("1.1.1.1", 53), *[(address, port) for address in _host_addresses()]]
    source = (
        "import socket\n"
        f"for host, port in {targets!r}:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=3).close()\n"
        "        print('CONNECTED', host, port)\n"
        "    except OSError as exc:\n"
        "        print('refused', host, port, type(exc).__name__)\n"
    )
    try:
        result = py(box, source)
        assert result.exit_code == 0, result.output
        assert "CONNECTED" not in result.output
        assert result.output.count("refused") == len(targets)
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


def test_host_environment_is_not_visible(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
    result = box.run(["python3", "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                     timeout_s=30, env={"GIVEN": "1"})
    assert result.exit_code == 0, result.output
    seen = json.loads(result.output)
    assert "must-not-leak" not in result.output
    assert seen["GIVEN"] == "1" and seen["HOME"] == "/home/ooda"
    allowed = {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "GIVEN",
               "HOSTNAME", "PWD", "LC_CTYPE"}
    assert set(seen) <= allowed, set(seen) - allowed


def test_cannot_write_or_read_outside_workspace(box: Sandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    (tmp_path / "secret.txt").write_text("host secret")
    tmp_name = f"ooda-probe-{uuid.uuid4().hex}"
    targets = ["/probe", "/usr/probe", "/etc/probe", "/root/probe", "/opt/ooda-reqs/probe",
               str(outside / "probe"), "/work/../probe", "/proc/sys/kernel/hostname"]
    source = (
        "import sys\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print('WROTE', path)\n"
        "    except OSError as exc:\n"
        "        print('denied', path, type(exc).__name__)\n"
        "try:\n"
        f"    print('READ', open({str(tmp_path / 'secret.txt')!r}).read())\n"
        "except OSError:\n"
        "    print('unreadable')\n"
        f"open('/tmp/{tmp_name}', 'w').write('private')\n"
        f"print(open('/tmp/{tmp_name}').read())\n"
        "open('inside.txt', 'w').write('ok')\n"
    )
    result = py(box, source)
    assert result.exit_code == 0, result.output
    assert "WROTE" not in result.output and "READ" not in result.output
    assert result.output.count("denied") == len(targets) and "unreadable" in result.output
    assert "private" in result.output  # /tmp works inside...
    assert not Path("/tmp", tmp_name).exists()  # ...but it is not the host's /tmp
    assert list(outside.iterdir()) == [] and not Path("/probe").exists()
    assert (box.workspace / "inside.txt").read_text() == "ok"


@pytest.fixture(params=["docker", "bwrap"])
def few_pids_box(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Sandbox]:
    """A sandbox whose process limit is 200 (OODA_SANDBOX_PIDS; the default, 1024, is more
    than this test should start on a shared machine)."""
    monkeypatch.setenv("OODA_SANDBOX_PIDS", "200")
    backend = backend_or_skip(request.param)
    if hasattr(backend, "limits"):  # bwrap reads the limits once, when the backend opens
        monkeypatch.setattr(backend, "limits", configured())
    yield from open_sandbox(request.param, tmp_path / "ws")


def test_process_count_is_limited(few_pids_box: Sandbox) -> None:
    box = few_pids_box
    source = (
        "import subprocess\n"
        "children = []\n"
        "try:\n"
        "    for _ in range(600):\n"
        "        children.append(subprocess.Popen(['sleep', '30']))\n"
        "except OSError as exc:\n"
        "    print('limit hit:', type(exc).__name__)\n"
        "print('started', len(children))\n"
        "for child in children:\n"
        "    child.kill()\n"
    )
    result = py(box, source, timeout_s=60)
    assert result.exit_code == 0, result.output
    assert "limit hit" in result.output
    started = int(result.output.rsplit("started", 1)[1].split()[0])
    assert 10 < started < 200


def test_fork_bomb_ends_and_host_survives(box: Sandbox) -> None:
    marker = f"ooda-forkbomb-{uuid.uuid4().hex[:8]}"
    bomb = ("import os\n"
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        pass\n")
    result = box.run(["python3", "-c", bomb, marker], timeout_s=2)
    assert result.timed_out or result.exit_code != 0
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still fork
    assert host_processes_with(marker) == []
    after = box.run(["echo", "alive"], timeout_s=30)
    if after.output.startswith("sandbox unusable: "):
        # PID 1, starved by the bomb, did not answer within the host's grace (a loaded
        # machine): the host killed the whole container, by design, and says so
        assert after.exit_code == 125 and "container killed" in after.output, after
        return
    assert _only_in_box(box) == []
    assert after.exit_code == 0 and after.output == "alive\n"


def test_memory_is_limited(box: Sandbox) -> None:
    grab = "chunks = [bytearray(64 << 20) for _ in range(64)]\nprint('ALLOCATED', len(chunks))"
    result = py(box, grab, timeout_s=60)  # 4 GiB, 64 MiB at a time
    assert not result.timed_out
    assert "ALLOCATED" not in result.output
    assert result.exit_code == 137 or "MemoryError" in result.output, result


def test_nothing_outlives_its_command(box: Sandbox) -> None:
    tag = str(1000 + uuid.uuid4().int % 1000)
    marker = f"sleep {tag}"
    escapee = (
        "import os, subprocess\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '{tag}'])\n"
        "    os._exit(0)\n"
    )
    started = time.monotonic()
    result = box.run(["sh", "-c", f"sleep {tag} & python3 -c \"{escapee}\"; sleep {tag}"],
                     timeout_s=2)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 10
    assert host_processes_with(marker) == [] and _only_in_box(box) == []
    # A daemon left behind by a command that exits normally is gone too.
    result = box.run(["sh", "-c", f"setsid sleep {tag} & echo done"], timeout_s=30)
    assert result.exit_code == 0 and result.output == "done\n"
    assert host_processes_with(marker) == [] and _only_in_box(box) == []


def test_huge_output_is_capped(box: Sandbox) -> None:
    source = ("import sys\n"
              "block = b'x' * (1 << 20)\n"
              "print('HEAD', flush=True)\n"
              "for _ in range(1024):\n"
              "    sys.stdout.buffer.write(block)\n"
              "print('TAIL')\n")
    started = time.monotonic()
    result = py(box, source, timeout_s=60)
    assert result.exit_code == 0
    assert len(result.output) <= DEFAULT_CAP_BYTES + 200
    assert result.output.startswith("HEAD\n") and result.output.endswith("TAIL\n")
    assert "elided" in result.output
    assert time.monotonic() - started < 30


def test_runs_as_unprivileged_user(box: Sandbox) -> None:
    result = box.run(["python3", "-c", "import os; print(os.getuid(), os.getgid())"],
                     timeout_s=30)
    assert result.output.split() == (["1000", "1000"] if os.geteuid() == 0 else
                                     [str(os.getuid()), str(os.getgid())])
