"""The warm `ooda` daemon (agent/startup/daemon.py, agent/startup/client.py, agent/startup/entry.py) from the
outside: the real console script in subprocesses, real Docker, the bundled endpoint.

Each test has its own daemon: OODA_DAEMON_DIR is a fresh private directory (short: it holds
the Unix socket), and every daemon a test started is stopped (killed if it must be) before the
next test. Only behaviour is checked, never timings: the daemon served the command (its
`served` count), the command saw the client's directory and environment, signals and a
vanished client reach the worker, and nothing (processes, containers) is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from sandbox_helpers import all_ooda_containers, backend_or_skip, containers_of, wait_for

from ooda.agent.models.server import ReplayServer
from ooda.agent.startup import client as daemon_client
from ooda.agent.startup import handoff

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "tasks" / "examples"
OODA = Path(sys.executable).parent / "ooda"
IDLE_S = "600"
"""Idle exit of the tests' daemons: a safety net should a test's teardown miss one. Longer than
any command a test runs beside a daemon it asks about afterwards: a status request is no
activity, so a daemon left idle through a slow unserved `ooda run` (another environment's) on a
loaded machine had exited by the time the test asked whether it served it (60 s before)."""


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    return parent_of(pid) is not None


def parent_of(pid: int) -> int | None:
    """The parent of a live process (None when it is gone or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]) if fields[0] != "Z" else None


def children_of(pid: int) -> list[int]:
    """A daemon's workers: the live processes whose parent is `pid` and that lead their own
    process group (as a worker does; not the short-lived process starting a warm container)."""
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and parent_of(int(entry.name)) == pid
        and leads_its_group(int(entry.name))
    ]


def leads_its_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def daemons_in(directory: Path) -> list[int]:
    """Daemon processes (and their workers) started with OODA_DAEMON_DIR=`directory`."""
    marker = f"OODA_DAEMON_DIR={directory}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"ooda.agent.startup.daemon" in cmdline and marker in environ and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


class Daemons:
    """The console script run in a private daemon directory; remembers every environment it
    ran with, so that teardown can stop each daemon those commands may have started."""

    def __init__(self, directory: Path, tmp_path: Path) -> None:
        self.dir = directory
        self.tmp = tmp_path
        base = {
            k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_DAEMON"))
        }
        self.env = {
            **base,
            "OODA_DAEMON": "1",
            "OODA_DAEMON_DIR": str(directory),
            "OODA_DAEMON_IDLE_S": IDLE_S,
        }
        self.envs: list[dict[str, str]] = []

    def environment(self, extra: dict[str, str] | None) -> dict[str, str]:
        env = {**self.env, **(extra or {})}
        if env not in self.envs:
            self.envs.append(env)
        return env

    def ooda(
        self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run the console script to completion (`env` adds to the test's environment)."""
        return subprocess.run(
            [str(OODA), *args], cwd=cwd or self.tmp, env=self.environment(env),
            capture_output=True, text=True, timeout=timeout, check=False,
        )

    def start_ooda(
        self, *args: str, out: IO[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """Start the console script; its stdout and stderr go to `out` (a file: a pipe would
        stay open as long as the worker holding its other end)."""
        return subprocess.Popen(
            [str(OODA), *args], cwd=self.tmp, env=self.environment(env),
            stdout=out, stderr=subprocess.STDOUT, text=True,
        )

    def start(self, env: dict[str, str] | None = None) -> dict[str, Any]:
        proc = self.ooda("daemon", "start", "--timeout", "60", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr + self.logs()
        status = self.status(env)
        assert status is not None
        return status

    def status(self, env: dict[str, str] | None = None) -> dict[str, Any] | None:
        proc = self.ooda("daemon", "status", "--json", env=env)
        status: dict[str, Any] | None = json.loads(proc.stdout)
        assert proc.returncode == (0 if status is not None else 1), proc.stderr
        return status

    def logs(self) -> str:
        return "".join(p.read_text() for p in sorted(self.dir.glob("*.log")))

    def files(self) -> list[str]:
        return sorted(p.name for p in self.dir.iterdir())

    def stop_all(self) -> None:
        """Stop every daemon the test's commands may have started: politely, then by force
        (one still running a command, or still starting, or unreachable)."""
        for env in self.envs:
            with contextlib.suppress(Exception):
                self.ooda("daemon", "stop", env=env, timeout=30)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not daemons_in(self.dir), 20, "the daemons to stop")
            return
        left = daemons_in(self.dir)
        for pid in left:  # a worker as by Ctrl-C, a daemon as by `kill`
            sig = signal.SIGINT if parent_of(pid) in left else signal.SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not daemons_in(self.dir), 20, "the daemons to exit")
            return
        for pid in daemons_in(self.dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not daemons_in(self.dir), 10, "the killed daemons to go")


@pytest.fixture(autouse=True)
def _docker() -> None:
    backend_or_skip("docker")


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[Daemons]:
    directory = Path(tempfile.mkdtemp(prefix="od-", dir="/tmp"))  # mode 0700
    d = Daemons(directory, tmp_path)
    try:
        yield d
    finally:
        try:
            d.stop_all()
        finally:
            shutil.rmtree(directory, ignore_errors=True)


def replay_run(task: str, runs: str) -> list[str]:
    """`ooda run` of `task` with the scripted offline model (median: solved in round 2)."""
    return ["run", task, "--model", "replay", "-n", "4", "--rounds", "3", "--runs-dir", runs,
            "--json"]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


# --------------------------------------------------------------------------- serving commands


def test_runs_are_served_by_the_daemon_with_its_warm_containers_given_back(
    daemons: Daemons, median: Path
) -> None:
    """A run is served by the started daemon, which had two containers waiting warm; the run
    takes both and gives them back reset: the next run gets the very same two, and the base
    check's facts the first run kept."""
    cache = {"OODA_BASE_CACHE": "1"}  # a variable the daemon is keyed by: all commands share it
    before = daemons.start(cache)
    assert before["served"] == 0 and before["running"] == 0
    pid = int(before["pid"])

    def warm_count(kind: str = "warm_containers") -> int:
        return int((daemons.status(cache) or {}).get(kind, 0))

    wait_for(lambda: warm_count("ready_containers") == 2, 60, "two warm containers ready")
    warm = set(containers_of(pid))
    assert len(warm) == 2
    runs = daemons.tmp / "runs"
    for served in (1, 2):
        proc = daemons.ooda(*replay_run(str(median), str(runs)), env=cache)
        assert proc.returncode == 0, proc.stderr
        summary = json.loads(proc.stdout)
        assert summary["status"] == "passed" and summary["rounds_used"] == 2
        run_dir = Path(summary["run_dir"])
        assert run_dir.parent == runs and (run_dir / "run.json").is_file()
        record = json.loads((run_dir / "run.json").read_text())
        assert record["status"] == "passed"
        # the base check's facts kept (agent/verify/basecache.py): the second run used them
        assert served == 1 or record.get("base_kept_from"), record
        # both went to the worker, were reset and came back warm: nothing new was started
        wait_for(lambda n=2 * served: int((daemons.status(cache) or {}).get("handed_back", 0)) == n,
                 30, "the run's containers handed back")
        after = daemons.status(cache)
        assert after is not None
        assert after["pid"] == pid and after["served"] == served and after["running"] == 0
        assert warm_count() == 2 and warm == set(containers_of(pid)), served


def test_relative_paths_resolve_against_the_clients_directory(
    daemons: Daemons, median: Path
) -> None:
    first = daemons.start()
    proc = daemons.ooda(*replay_run("median", "runs"), cwd=median.parent)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status"] == "passed"
    run_dir = Path(summary["run_dir"])  # as given: relative
    assert not run_dir.is_absolute() and run_dir.parent == Path("runs")
    assert (median.parent / run_dir / "run.json").is_file()
    status = daemons.status()
    assert status is not None and status["served"] == first["served"] + 1


def test_bad_input_is_one_error_line_and_exit_2(daemons: Daemons, tmp_path: Path) -> None:
    daemons.start()
    for served in (1, 2):  # (a worker interrupted after its exit line once shut the daemon down)
        proc = daemons.ooda(*replay_run(str(tmp_path / "no-such-task"), str(tmp_path / "runs")))
        assert proc.returncode == 2, proc.stderr
        lines = error_lines(proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("ooda: error:"), proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
        status = daemons.status()
        assert status is not None and status["served"] == served  # its worker said so


def test_the_worker_gets_the_clients_environment(daemons: Daemons, median: Path) -> None:
    """The daemon was started without OPENAI_*; each command's own endpoint and key (which
    are no part of the daemon's key) reach its worker."""
    daemons.start()
    runs = daemons.tmp / "runs"
    args = ["run", str(median), "--model", "m", "-n", "2", "--rounds", "3",
            "--runs-dir", str(runs), "--json"]
    with ReplayServer([EXAMPLES], api_key="s3cret") as server:
        endpoint = {"OPENAI_BASE_URL": server.start()}
        good = daemons.ooda(*args, env={**endpoint, "OPENAI_API_KEY": "s3cret"})
        bad = daemons.ooda(*args, env={**endpoint, "OPENAI_API_KEY": "wrong"})
        assert server.stats["chat_requests"] > 0
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["status"] == "passed"
    assert bad.returncode == 2, bad.stderr
    lines = error_lines(bad.stderr)
    assert len(lines) == 1 and "rejected the API key" in lines[0], bad.stderr
    status = daemons.status()
    assert status is not None and status["served"] == 2


# --------------------------------------------------------------------------- interrupted commands
#
# The model streams slowly (the first round takes a few seconds) rather than hanging: a run
# interrupted while a request hangs waits for it (the loop's threads are joined, and nothing
# stops a request that sends nothing), in-process as in a worker.

SLOW_TOKENS_PER_S = 15.0


def slow_run(
    daemons: Daemons, median: Path, server: ReplayServer, out: IO[str]
) -> tuple[subprocess.Popen[str], int, set[str]]:
    """Start a run on a slowly streaming model; once its worker is generating, the client, the
    worker's pid and the ids of the containers the worker uses."""
    daemon_pid = int(daemons.start()["pid"])
    proc = daemons.start_ooda(
        "run", str(median), "--model", "m", "--base-url", server.base_url, "-n", "2",
        "--rounds", "3", "--runs-dir", str(daemons.tmp / "runs"), "--json", out=out,
    )  # fmt: skip
    wait_for(lambda: server.stats["in_flight"] >= 1, 60, "the run to wait on the model")
    (worker,) = children_of(daemon_pid)
    status = daemons.status()
    assert status is not None and status["running"] == 1
    # The warm container is labelled with the daemon's pid: the worker's once handed over.
    handed_over = not status["warm_container"]

    def used() -> set[str]:
        own = set(containers_of(worker))
        return own | set(containers_of(daemon_pid)) if handed_over else own

    wait_for(used, 30, "the worker's containers")
    return proc, worker, used()


def assert_cut_short(runs: Path, output: str) -> None:
    """The run ended before its verdict (uninterrupted, it passes in round 2)."""
    assert "Traceback" not in output, output
    assert '"status"' not in output, output  # no JSON summary
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    # the partial run says so (issue 15.11): never a verdict
    assert json.loads((run_dir / "run.json").read_text())["reason"] == "interrupted (Ctrl-C)"


def assert_cleaned_up(daemons: Daemons, worker: int, used: set[str]) -> None:
    """The worker is gone and so are its containers, but for the daemon's it gave back
    (reset, warm again for the next command)."""
    assert not alive(worker)
    status = daemons.status()
    assert status is not None
    back = lambda: set(containers_of(int(status["pid"])))  # noqa: E731
    wait_for(lambda: not (used & all_ooda_containers(include_stopped=True)) - back(), 30,
             f"the worker's containers {used} to go")
    assert containers_of(worker, include_stopped=True) == []


def assert_still_serving(daemons: Daemons, median: Path, served: int) -> None:
    proc = daemons.ooda(*replay_run(str(median), str(daemons.tmp / "runs-after")))
    assert proc.returncode == 0, proc.stderr
    status = daemons.status()
    assert status is not None and status["served"] == served


def test_ctrl_c_reaches_the_worker(daemons: Daemons, median: Path, tmp_path: Path) -> None:
    with (
        ReplayServer([EXAMPLES], tokens_per_s=SLOW_TOKENS_PER_S) as server,
        (tmp_path / "client.out").open("w") as out,
    ):
        server.start()
        proc, worker, used = slow_run(daemons, median, server, out)
        try:
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    output = (tmp_path / "client.out").read_text()
    assert_cut_short(daemons.tmp / "runs", output)
    assert_cleaned_up(daemons, worker, used)
    assert_still_serving(daemons, median, served=2)
    assert code == 130, output
    # the last line says so; the one before says where the partial run is (issue 15.11)
    assert error_lines(output)[-1] == "ooda: error: interrupted", output
    assert error_lines(output)[0].startswith("The partial run"), output


def test_a_killed_client_gets_its_worker_interrupted(
    daemons: Daemons, median: Path, tmp_path: Path
) -> None:
    with (
        ReplayServer([EXAMPLES], tokens_per_s=SLOW_TOKENS_PER_S) as server,
        (tmp_path / "client.out").open("w") as out,
    ):
        server.start()
        proc, worker, used = slow_run(daemons, median, server, out)
        proc.kill()
        proc.wait()

        def idle() -> bool:
            status = daemons.status()
            return status is not None and status["running"] == 0

        wait_for(idle, 60, "the daemon to end the orphaned worker")
    assert_cut_short(daemons.tmp / "runs", (tmp_path / "client.out").read_text())
    assert_cleaned_up(daemons, worker, used)
    assert_still_serving(daemons, median, served=2)


# --------------------------------------------------------------------------- which daemon, when


def test_another_environment_does_not_use_the_running_daemon(
    daemons: Daemons, median: Path
) -> None:
    """A variable read at import time (here the sandbox start timeout) takes part in the key,
    as the package's source files do: a client with another value runs the command itself,
    then starts a daemon of its own."""
    first = daemons.start()
    other = {"OODA_SANDBOX_START_TIMEOUT": "119"}
    proc = daemons.ooda(*replay_run(str(median), str(daemons.tmp / "runs")), env=other)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "passed"
    status = daemons.status()
    assert status is not None and status["pid"] == first["pid"] and status["served"] == 0
    second = daemons.start(env=other)  # the one that client spawned (or a new one)
    assert second["pid"] != first["pid"] and second["key"] != first["key"]
    assert second["served"] == 0


def test_daemon_stop(daemons: Daemons) -> None:
    status = daemons.start()
    sock = daemons.dir / f"daemon-{status['key']}.sock"
    assert sock.exists()
    proc = daemons.ooda("daemon", "stop")
    assert proc.returncode == 0 and "stopped" in proc.stdout, proc.stderr
    wait_for(lambda: not alive(int(status["pid"])), 30, "the daemon to exit")
    assert not sock.exists()
    assert daemons.status() is None  # (exit 1, checked by status())
    assert daemons.ooda("daemon", "status").returncode == 1


def test_idle_daemon_exits_by_itself(daemons: Daemons) -> None:
    # The pid is the one `daemon start` printed: a status asked for after it raced with the
    # idle exit on a loaded machine (a second interpreter's start-up can take longer than the
    # idle time). 3 s: `daemon start` itself asks once the daemon listens, polling every 0.1 s.
    idle = {"OODA_DAEMON_IDLE_S": "3"}
    start = daemons.ooda("daemon", "start", "--timeout", "60", env=idle)
    assert start.returncode == 0, start.stdout + start.stderr + daemons.logs()
    said = re.fullmatch(r"ooda daemon pid (\d+) ready\n", start.stdout)
    assert said, start.stdout
    pid = int(said[1])
    wait_for(lambda: not alive(pid), 30, "the idle daemon to exit")
    assert not list(daemons.dir.glob("daemon-*.sock"))
    assert daemons.status(idle) is None
    assert re.search(r"idle for \d+ s: exiting", daemons.logs())


def test_a_command_without_a_daemon_runs_here_and_spawns_one(
    daemons: Daemons, median: Path, tmp_path: Path
) -> None:
    """A command that ran (here a passing run) starts a daemon for the next one; one that
    failed on bad input starts nothing (27.7: the user is still correcting the line)."""
    bad = daemons.ooda(*replay_run(str(tmp_path / "no-such-task"), str(tmp_path / "runs")))
    assert bad.returncode == 2 and bad.stderr.startswith("ooda: error:"), bad.stderr
    # the command itself opens a daemon's log and starts it before it exits (client.spawn):
    # no log now means none was started (no fixed wait for one to show up)
    assert not list(daemons.dir.glob("*.log")), daemons.files()
    assert daemons_in(daemons.dir) == [] and daemons.status() is None
    proc = daemons.ooda(*replay_run(str(median), str(tmp_path / "runs")))
    assert proc.returncode == 0, proc.stderr
    wait_for(daemons.status, 30, "the daemon spawned after the command")
    status = daemons.status()
    assert status is not None and status["served"] == 0


def test_status_names_the_daemons_of_another_environment(daemons: Daemons) -> None:
    """27.7: a daemon started from a shell with other OODA_ variables is not this shell's,
    and `ooda daemon status` says it runs, and why it is not used; `stop --all` ends it."""
    other = {"OODA_SAMPLES": "3"}
    theirs = daemons.start(env=other)
    here = daemons.ooda("daemon", "status")
    assert here.returncode == 1
    assert "no ooda daemon for this installation and environment" in here.stdout
    assert f"pid {theirs['pid']}: another environment: OODA_SAMPLES differs" in here.stdout
    assert "3" not in here.stdout.replace(str(theirs["pid"]), "")  # names, never values
    listed = json.loads(daemons.ooda("daemon", "status", "--all", "--json").stdout)
    assert [d["pid"] for d in listed] == [theirs["pid"]]
    stop = daemons.ooda("daemon", "stop", "--all")
    assert stop.returncode == 0 and "stopped" in stop.stdout
    wait_for(lambda: not alive(int(theirs["pid"])), 30, "the other daemon to exit")


def test_ooda_daemon_0_spawns_nothing(daemons: Daemons, tmp_path: Path) -> None:
    off = {"OODA_DAEMON": "0"}
    proc = daemons.ooda(*replay_run(str(tmp_path / "no-such-task"), str(tmp_path / "runs")),
                        env=off)
    assert proc.returncode == 2 and proc.stderr.startswith("ooda: error:"), proc.stderr
    assert daemons.files() == []  # a daemon's log is opened by the command that starts it
    assert daemons_in(daemons.dir) == []
    start = daemons.ooda("daemon", "start", env=off)
    assert start.returncode == 2 and "turned off" in start.stderr, start.stderr
    assert daemons.files() == []


# --------------------------------------------------------------------------- the client module


def test_routed_commands() -> None:
    assert handoff.routed(["run", "tasks/x"])
    assert handoff.routed(["verify", "t", "--patch", "p"])
    assert handoff.routed(["eval", "tasks"]) and handoff.routed(["ci"])
    assert not handoff.routed([])
    assert not handoff.routed(["run", "--help"]) and not handoff.routed(["ci", "-h"])
    assert not handoff.routed(["doctor"]) and not handoff.routed(["daemon", "stop"])
    assert not handoff.routed(["serve", "--replay", "run"])
    assert handoff.routed(["-q", "run", "t"]) and handoff.routed(["-vV", "eval"])
    assert not handoff.routed(["-q", "doctor"])


def test_enabled_unless_turned_off() -> None:
    assert handoff.enabled({})
    assert handoff.enabled({"CI": "true"})
    assert handoff.enabled({"OODA_DAEMON": "1"})
    assert not handoff.enabled({"OODA_DAEMON": "0"})
    assert not handoff.enabled({"OODA_DAEMON": "off"})
    assert not handoff.enabled({"CI": "true", "OODA_DAEMON": "no"})


def test_daemon_key_follows_the_variables_read_at_import() -> None:
    key = handoff.daemon_key
    base = {"HOME": "/root", "OODA_HOME": "/a"}
    assert len(key(base)) == 16 and key(base) == key(dict(base))
    assert key({**base, "OODA_HOME": "/b"}) != key(base)
    assert key({**base, "PYTHONHASHSEED": "1"}) != key(base)
    assert key({**base, "UNRELATED": "1"}) == key(base)
    assert key({**base, "OPENAI_API_KEY": "k"}) == key(base)  # a worker reads it itself
    assert key({**base, "OODA_DAEMON": "1", "OODA_DAEMON_IDLE_S": "5"}) == key(base)


def test_daemon_key_follows_the_package_source_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any .py file of the package added, removed, resized or touched makes another key (a
    daemon then serves only the code it imported); task data and caches do not."""
    for package in handoff.PACKAGES:
        (tmp_path / package / "sub").mkdir(parents=True)
        (tmp_path / package / "sub" / "mod.py").write_text("x = 1\n")
    monkeypatch.setattr(handoff, "PACKAGE_ROOT", str(tmp_path))
    env = {"HOME": "/root"}
    first = handoff.daemon_key(env)
    source = tmp_path / "verifiers" / "sub" / "mod.py"
    for harmless in ("tasks/examples/t/repo/a.py", "agent/sub/__pycache__/mod.py",
                     "agent/sub/notes.txt"):
        (tmp_path / harmless).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / harmless).write_text("y = 2\n")
    assert handoff.daemon_key(env) == first
    source.write_text("x = 22\n")
    resized = handoff.daemon_key(env)
    assert resized != first
    os.utime(source, ns=(1, 1))
    touched = handoff.daemon_key(env)
    assert touched != resized
    (tmp_path / "agent" / "sub" / "new.py").write_text("")
    assert handoff.daemon_key(env) not in (first, resized, touched)


def test_a_request_and_the_answers_cross_the_socket_as_sent() -> None:
    """The console script's side (handoff) and the daemon's (client) of one command: the
    request with its descriptors, then "pid" and "exit" answers; a body that is no request is
    refused."""
    near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with near, far, open(os.devnull) as null:
        request = {"argv": ["ooda", "run", "t\udcff"], "env": {"A": "1"}, "started": 1.5}
        handoff.send_request(near, request, [null.fileno()])
        received, fds = daemon_client.receive_request(far)
        assert received == request and len(fds) == 1
        os.close(fds[0])
        daemon_client.send_line(far, "pid", 42)
        daemon_client.send_line(far, "exit", 3)
        far.shutdown(socket.SHUT_WR)
        assert list(handoff._answers(near)) == [("pid", 42), ("exit", 3)]
    with pytest.raises(ValueError):
        handoff.decode_request(b"not marshal")


def test_a_client_that_hung_up_is_not_watched_while_its_worker_tidies_up() -> None:
    """Its connection reads EOF until the worker is reaped: the serving loop must not wait on
    it (select would return at once every turn: a busy loop)."""
    from ooda.agent.startup.daemon import Daemon

    listener, _peer = socket.socketpair()
    gone, gone_client = socket.socketpair()
    live, _live_client = socket.socketpair()
    daemon = Daemon(key="k", listener=listener, lock_fd=-1, files={},
                    workers={1: gone, 2: live})
    gone_client.close()
    daemon.interrupted.add(1)  # as client_gone() marks it (which also sends the worker SIGINT)
    assert daemon.watched() == [listener, live]
    assert select.select(daemon.watched(), [], [], 0)[0] == []
    for sock in (listener, _peer, gone, live, _live_client):
        sock.close()


def test_a_warm_container_is_started_by_another_process_while_the_daemon_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keep_warm() returns before the Docker API has started the container (a forked process
    starts it and says its id through a pipe): the serving loop is never held by a start
    (0.3-0.5 s), a command arriving meanwhile gets the containers that are ready. A start
    that fails is said, logged, and tried again later."""
    from ooda.agent.sandbox.docker.launch import Launched
    from ooda.agent.startup import daemon as daemon_mod

    go = tmp_path / "go"

    class Engine:  # in the forked process: waits for the test's go, as a slow start would
        def start(self, config: dict[str, Any]) -> str:
            deadline = time.monotonic() + 10
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            if config["fail"] or not go.exists():
                raise RuntimeError("no engine")
            return "c0ffee"

    def prepared(prefix: str) -> tuple[Path, Launched, dict[str, Any]]:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(tmp_path / f"pid1-{len(made)}.sock"))
        listener.listen(1)
        launched = Launched("", "tag", listener, None, tmp_path, {}, 0, 0)
        made.append(launched)
        return tmp_path / f"work{len(made)}", launched, {"fail": len(made) > 1}

    made: list[Launched] = []
    monkeypatch.setattr(daemon_mod, "prepare_on_last_image", prepared)
    monkeypatch.setattr(daemon_mod.SdkEngine, "connect", lambda timeout_s: Engine())
    monkeypatch.setattr(daemon_mod.image, "last_tag", lambda: "tag")
    monkeypatch.setattr(daemon_mod, "cleanup_leftovers", lambda: 0)
    listener, peer = socket.socketpair()
    daemon = daemon_mod.Daemon(key="k", listener=listener, lock_fd=-1, files={})
    try:
        daemon.keep_warm()  # returned while the start waits for `go`
        (warm,) = daemon.warm
        assert warm.starting is not None and not warm.ready() and daemon.starters
        assert not daemon.to_start()  # one start at a time
        pipe = warm.starting[1]
        go.touch()
        assert select.select([pipe], [], [], 10)[0] == [pipe]
        daemon.warm_started(pipe)
        assert warm.starting is None and warm.launched.container_id == "c0ffee"
        assert not warm.ready()  # its PID 1 has not connected yet
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as pid1:
            pid1.connect(str(tmp_path / "pid1-0.sock"))
            assert warm.ready()
            daemon.keep_warm()  # the second: its start fails
            failing = daemon.warm[1]
            assert failing.starting is not None
            assert select.select([failing.starting[1]], [], [], 10)[0]
            daemon.warm_started(failing.starting[1])
            assert daemon.warm == [warm] and not daemon.to_start()  # tried again in 30 s
        wait_for(lambda: (daemon.reap(), not daemon.starters)[1], 10, "the starters reaped")
    finally:
        for kept in daemon.warm:
            kept.give_away()
        listener.close()
        peer.close()


def test_the_console_script_hands_over_on_built_in_modules() -> None:
    """What importing the console script adds to a fresh interpreter: none of the standard
    library's heavier modules (each command the daemon serves pays for every import)."""
    code = ("import sys; before = set(sys.modules); import ooda.agent.startup.entry; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    added = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout.split())
    heavy = {"json", "socket", "signal", "hashlib", "_hashlib", "pathlib", "re", "contextlib",
             "typing", "enum", "subprocess", "collections"}
    assert not added & heavy, added & heavy


def test_start_up_threads_import_none_of_the_packages_the_command_imports() -> None:
    """prestart.begin()'s threads (the openai SDK's import, the backend, the first container)
    import no module of ooda's packages whose __init__ imports their own modules: two threads
    entering one such package by different modules can each hold the import lock the other
    waits for, and Python then hands one a half-made module (a cold `ooda run` failed with
    ImportError "partially initialized module 'ooda.agent.context.index'", exit 3)."""
    code = (
        "import sys, threading\n"
        "import ooda.agent.cli.app\n"
        "from ooda.agent.startup import prestart\n"
        "prestart.begin(['run', '/nonexistent', '--model', 'm', '--sandbox', 'local'])\n"
        "before = set(sys.modules)\n"
        "for t in threading.enumerate():\n"
        "    if t is not threading.main_thread(): t.join()\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    added = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.split()
    assert "openai" in added  # the thread ran
    packages = ("ooda.agent.core", "ooda.agent.context", "ooda.agent.models", "ooda.agent.edits",
                "ooda.verifiers", "ooda.tasks", "ooda.agent.app")
    assert not [name for name in added if name.startswith(packages)]


def test_runtime_dir_must_be_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = tmp_path / "fresh" / "dir"
    monkeypatch.setenv("OODA_DAEMON_DIR", str(fresh))
    assert daemon_client.runtime_dir() == fresh
    assert fresh.stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    for mode in (0o750, 0o705, 0o777):
        shared.chmod(mode)
        monkeypatch.setenv("OODA_DAEMON_DIR", str(shared))
        with pytest.raises(OSError, match="not a private directory"):
            daemon_client.runtime_dir()
    link = tmp_path / "link"
    link.symlink_to(fresh)
    monkeypatch.setenv("OODA_DAEMON_DIR", str(link))
    with pytest.raises(OSError, match="not a private directory"):
        daemon_client.runtime_dir()
