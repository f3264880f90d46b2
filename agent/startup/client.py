"""Talk to a warm `ooda` daemon (agent/startup/daemon.py): its files, status and stop, the
index of every daemon of this user, spawning one, and both ends of the protocol.

Importing the `openai` and `docker` SDKs costs most of a second per invocation on a small
machine, more than one bare test run. The daemon keeps them imported (and one sandbox
container started) and forks a worker per command. What the console script needs to hand a
command over (the key, connecting, the request, the answers) is agent/startup/handoff.py, on
built-in modules only; this module re-exports it and adds what other commands need.

Anything that goes wrong before the daemon has forked a worker for the command means "no
daemon": the caller then runs the command itself.

Protocol (one Unix stream socket per command, in a 0700 directory of this user's):
client → daemon: a 4-byte length, then {argv, cwd, env, umask, started (when this client
process started, on the machine's monotonic clock: the command's phases count from there)} in
marshal's format; file descriptors 0, 1, 2 ride along in the first message (SCM_RIGHTS).
daemon → client: the line "pid N" once the worker is forked, then "exit CODE" when it has been
reaped. Control requests ({"control": "status" | "stop" | "adopt" | "tidied"}) are sent the
same way and answered with one JSON line.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import struct
import sys
from pathlib import Path

from ooda.agent.startup import handoff
from ooda.agent.startup.handoff import daemon_key, key_variables, send_request

TYPE_CHECKING = False
if TYPE_CHECKING:  # (`typing` costs every command a few ms of import; mypy reads these)
    from typing import Any

PACKAGE_ROOT = Path(handoff.PACKAGE_ROOT)
LOG_LIMIT_BYTES = 1 << 20


def runtime_dir() -> Path:
    """The directory holding the daemons' sockets, locks and logs (handoff.runtime_dir)."""
    return Path(handoff.runtime_dir())


def fingerprint(env: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, object]:
    """What a daemon's status says of its key, so that another shell can tell why it does not
    match: the interpreter, the installation, and each key variable's value as a short hash
    (the status file holds no value itself)."""
    return {
        "python": sys.executable, "package_root": str(PACKAGE_ROOT),
        "variables": {name: hashlib.sha256(value.encode()).hexdigest()[:12]
                      for name, value in key_variables(env).items()},
    }


def why_not_mine(status: dict[str, Any]) -> str:
    """How a daemon's key differs from this process's ("" when it is the same)."""
    mine = fingerprint()
    if status.get("python") != mine["python"]:
        return f"another Python ({status.get('python')})"
    if status.get("package_root") != mine["package_root"]:
        return f"another installation ({status.get('package_root')})"
    theirs: dict[str, str] = status.get("variables") or {}
    ours: dict[str, str] = mine["variables"]  # type: ignore[assignment]
    differ = sorted(n for n in set(theirs) | set(ours) if theirs.get(n) != ours.get(n))
    if differ:
        return "another environment: " + ", ".join(differ) + (" differs" if len(differ) == 1
                                                              else " differ")
    return "other source files (ooda changed since it started)" \
        if status.get("key") != daemon_key() else ""


def index_dir() -> Path | None:
    """The user's index of running daemons, whatever runtime directory each uses: a shell in a
    terminal multiplexer, or a login without a systemd session, has another $XDG_RUNTIME_DIR
    than the shell next to it, and each must see the other's daemons. None when
    $OODA_DAEMON_DIR names one directory (tests, a private setup): only that one then."""
    if os.environ.get("OODA_DAEMON_DIR"):
        return None
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(state) / "ooda" / "daemons"


def register(status_file: Path) -> bool:
    """Name this daemon's status file in the index (best effort); whether it was."""
    index = index_dir()
    if index is None:
        return False
    try:
        index.mkdir(mode=0o700, parents=True, exist_ok=True)
        (index / str(os.getpid())).write_text(str(status_file))
    except OSError:
        return False
    return True


def unregister() -> None:
    index = index_dir()
    if index is not None:
        with contextlib.suppress(OSError):
            (index / str(os.getpid())).unlink()


def status_files() -> list[Path]:
    """Every status file of this user's daemons: this runtime directory's and, from the index,
    those of other runtime directories (stale index entries removed on the way)."""
    files = sorted(runtime_dir().glob("daemon-*.json"))
    index = index_dir()
    if index is not None and index.is_dir():
        for entry in sorted(index.iterdir()):
            try:
                os.kill(int(entry.name), 0)
                named = Path(entry.read_text().strip())
            except (OSError, ValueError):
                with contextlib.suppress(OSError):
                    entry.unlink()  # its daemon is gone
                continue
            if named.name.startswith("daemon-") and named not in files:
                files.append(named)
    return files


def all_daemons() -> list[dict[str, Any]]:
    """The statuses of this user's running daemons, every key and runtime directory (from
    their status files; each status names its socket as "socket")."""
    found: list[dict[str, Any]] = []
    for path in status_files():
        try:
            status = json.loads(path.read_text())
            os.kill(int(status["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # gone (killed before it could remove its file) or being written
        if isinstance(status, dict) and all(s.get("pid") != status["pid"] for s in found):
            status["socket"] = str(path.with_suffix(".sock"))
            found.append(status)
    return found


def same_installation(status: dict[str, Any]) -> bool:
    """Whether a daemon runs this installation of ooda with this Python (its environment
    variables may differ: another terminal's)."""
    mine = fingerprint()
    return (status.get("python") == mine["python"]
            and status.get("package_root") == mine["package_root"])


def paths(key: str) -> dict[str, Path]:
    """The socket, lock, log and status files of the daemon with this key."""
    base = handoff.runtime_dir()
    return {kind: Path(handoff.daemon_file(key, kind, base))
            for kind in ("sock", "lock", "log", "json")}


# --------------------------------------------------------------------------- messages


def receive_request(sock: socket.socket) -> tuple[dict[str, object], list[int]]:
    """A request as handoff.send_request sent it, and the descriptors that came with it."""
    data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
    if len(data) < 4:
        raise ConnectionError("short request")
    (size,) = struct.unpack("!I", data[:4])
    body = data[4:]
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            raise ConnectionError("request cut short")
        body += chunk
    return handoff.decode_request(body[:size]), fds


def send_line(sock: socket.socket, name: str, value: int) -> None:
    """One answer to a command: "pid" (its worker started) or "exit" (its code)."""
    sock.sendall(handoff.answer_line(name, value))


# --------------------------------------------------------------------------- the client


def spawn() -> None:
    """Start this key's daemon in the background (a second one for the same key exits at
    once: it cannot take the lock). Its output goes to its log; it holds none of our pipes."""
    key = daemon_key()
    log = paths(key)["log"]
    if log.exists() and log.stat().st_size > LOG_LIMIT_BYTES:
        log.unlink()  # one daemon's lines are a few hundred bytes; keep it from growing forever
    import subprocess  # (only here: it costs every other command its import)

    with open(log, "ab") as out:
        subprocess.Popen(  # noqa: S603 - our own interpreter and module
            # -P: the working directory (site-packages/ooda when installed) stays off sys.path,
            # else `agent`, `tasks` and `verifiers` would import there as top-level names
            [sys.executable, "-P", "-m", "ooda.agent.startup.daemon", key],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            cwd=PACKAGE_ROOT, start_new_session=True, close_fds=True,
        )


def control(command: str, key: str | None = None,
            socket_path: str | None = None) -> dict[str, object] | None:
    """Ask this key's daemon (or the one at `socket_path`) for its "status" or to "stop"; its
    status, None when none runs."""
    try:
        sock_path = socket_path or paths(key or daemon_key())["sock"]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5.0)
            sock.connect(str(sock_path))
            send_request(sock, {"control": command}, [])
            line = sock.makefile("rb").readline()
    except OSError:
        return None
    return json.loads(line) if line else None
