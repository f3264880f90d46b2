"""Talk to a warm `ooda` daemon (agent/startup/daemon.py): find it, hand it a command, relay signals.

Importing the `openai` and `docker` SDKs costs most of a second per invocation on a small
machine, more than one bare test run. The daemon keeps them imported (and one sandbox
container started) and forks a worker per command; this module is the light side that the
console script (agent/startup/entry.py) loads first. It imports nothing beyond the standard library.

A daemon serves only clients that would have run the same code the same way: its key hashes
the interpreter, the package's source files (path, size, mtime) and the few environment
variables read at import time. Anything that goes wrong before the daemon has forked a worker for the
command means "no daemon": the caller then runs the command itself.

Protocol (one Unix stream socket per command, in a 0700 directory of this user's):
client → daemon: a 4-byte length, then JSON {argv, cwd, env, umask, started (when this client
process started, on the machine's monotonic clock: the command's phases count from there)};
file descriptors 0, 1, 2
ride along in the first message (SCM_RIGHTS). daemon → client: JSON lines {"pid": N} once the
worker is forked, then {"exit": CODE} when it has been reaped.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from ooda.agent.support import phases

TYPE_CHECKING = False
if TYPE_CHECKING:  # (`typing` costs every command a few ms of import; mypy reads these)
    from collections.abc import Callable
    from types import FrameType
    from typing import Any, BinaryIO

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "verifiers", "tasks")
KEY_ENV_PREFIXES = ("OODA_", "PYTHON", "LC_")
KEY_ENV_NAMES = ("TMPDIR", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR")
"""Variables read when modules are imported, streams opened or TLS settings built (a worker
gets every other one of its client's variables as they are)."""
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
LOG_LIMIT_BYTES = 1 << 20
START_WAIT_S = 3.0
"""How long a client waits for a daemon that is starting (it is ready ~1.5 s after spawn)."""
ROUTED_COMMANDS = ("run", "verify", "eval", "ci")
"""Commands the daemon may serve (the ones that import the SDKs and start sandboxes)."""


def enabled(env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """On unless OODA_DAEMON is 0/false/no/off (a one-shot job, e.g. the GitHub Action's
    `ooda ci` step, turns it off: nothing would come back to use it)."""
    return env.get("OODA_DAEMON", "").strip().lower() not in ("0", "false", "no", "off")


def runtime_dir() -> Path:
    """The directory holding the daemons' sockets, locks and logs ($OODA_DAEMON_DIR, else
    $XDG_RUNTIME_DIR/ooda, else /tmp/ooda-UID); created 0700, refused unless it is ours."""
    env = os.environ.get("OODA_DAEMON_DIR")
    if env:
        path = Path(env)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "ooda"
    else:
        path = Path("/tmp") / f"ooda-{os.getuid()}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not path.is_dir():
        raise OSError(f"{path} is not a private directory of this user")
    return path


def daemon_key(env: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """What a daemon must share with a client to serve it (16 hex digits)."""
    digest = hashlib.sha256()
    digest.update(f"{sys.executable}\0{sys.version}\0{PACKAGE_ROOT}\0".encode())
    for package in PACKAGES:
        for path, size, mtime_ns in _python_files(os.path.join(PACKAGE_ROOT, package)):
            digest.update(f"{path}\0{size}\0{mtime_ns}\0".encode())
    for name, value in key_variables(env).items():
        digest.update(f"{name}={value}\0".encode())
    return digest.hexdigest()[:16]


def _python_files(top: str) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of every .py file under `top` (directories named `examples`,
    task data, and `__pycache__` left out; links to directories not followed), sorted by path.
    Each command computes it: one scandir walk (~1 ms), where pathlib's rglob took ~5 ms."""
    found: list[tuple[str, int, int]] = []
    pending = [top]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in ("examples", "__pycache__"):
                        pending.append(entry.path)
                elif entry.name.endswith(".py"):
                    info = entry.stat()
                    found.append((entry.path, info.st_size, info.st_mtime_ns))
    return sorted(found)


def key_variables(env: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, str]:
    """The variables that take part in the key, by name."""
    return {
        name: env[name] for name in sorted(env)
        if (name.startswith(KEY_ENV_PREFIXES) or name in KEY_ENV_NAMES)
        and name not in ("OODA_DAEMON", "OODA_DAEMON_IDLE_S")
    }


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
    base = runtime_dir()
    return {kind: base / f"daemon-{key}.{kind}" for kind in ("sock", "lock", "log", "json")}


GLOBAL_FLAG = re.compile(r"-[qvV]+|--quiet|--verbose|--version")
"""The global options, all flags (agent/cli/app.py moves those after the command before it)."""


def command_args(argv: list[str]) -> list[str]:
    """The command line from the command's name on (`ooda -q run X` → run X)."""
    start = 0
    while start < len(argv) and GLOBAL_FLAG.fullmatch(argv[start]):
        start += 1
    return argv[start:]


def routed(argv: list[str]) -> bool:
    """Whether this command line is one a daemon serves."""
    args = command_args(argv)
    return bool(args) and args[0] in ROUTED_COMMANDS and not {"-h", "--help"} & set(argv)


# --------------------------------------------------------------------------- messages


def send_request(sock: socket.socket, request: dict[str, object], fds: list[int]) -> None:
    body = json.dumps(request).encode()
    data = struct.pack("!I", len(body)) + body
    sent = socket.send_fds(sock, [data], fds)
    if sent < len(data):
        sock.sendall(data[sent:])


def receive_request(sock: socket.socket) -> tuple[dict[str, object], list[int]]:
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
    return json.loads(body[:size]), fds


def send_line(sock: socket.socket, message: dict[str, int]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


# --------------------------------------------------------------------------- the client


class NoDaemon(Exception):
    """No daemon took the command: run it in this process."""


def run_in_daemon(argv: list[str], wait_start_s: float = START_WAIT_S) -> int:
    """Hand `argv` to this key's daemon and wait for its exit code (NoDaemon when none runs,
    or it drops the command before starting it). A daemon still importing is waited for up
    to `wait_start_s`: sooner ready than this process would be on its own."""
    try:
        files = paths(daemon_key())
        sock = _connect(files, time.monotonic() + wait_start_s)
    except OSError as exc:
        raise NoDaemon(str(exc)) from None
    with sock:
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": _umask(),
                   "started": phases.command_start()}
        try:
            send_request(sock, request, [0, 1, 2])
        except OSError as exc:
            raise NoDaemon(str(exc)) from None
        return _wait_for_exit(sock.makefile("rb"))


def _wait_for_exit(reader: BinaryIO) -> int:
    """Relay signals to the worker once its pid is known; its exit code (sent by the worker
    itself, or by the daemon when it reaps a worker killed by a signal)."""
    previous: dict[int, Any] = {}
    started = False
    try:
        while line := reader.readline():
            message = json.loads(line)
            if "exit" in message:
                return int(message["exit"])
            if "pid" in message and not started:
                started = True
                forward = _forward_to(int(message["pid"]))
                previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    except OSError:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not started:
        raise NoDaemon("the daemon closed the connection before starting the command")
    print("ooda: error: the ooda daemon's worker ended without an exit status", file=sys.stderr)
    return 3


def _connect(files: dict[str, Path], deadline: float) -> socket.socket:
    """A connection to the daemon's socket, waiting while a daemon holds the lock but does not
    listen yet (it binds its socket only once ready)."""
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(files["sock"]))
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline or not _starting(files["lock"]):
                raise
        time.sleep(0.02)


def _starting(lock: Path) -> bool:
    """A daemon process holds this lock (it is starting or serving)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _forward_to(pid: int) -> Callable[[int, FrameType | None], None]:
    """A handler passing signals on as a terminal would have delivered them: Ctrl-C and
    hang-up to the worker's whole process group (it leads one), anything else to it alone."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum in (signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)
                return
        with contextlib.suppress(ProcessLookupError):  # (or its group did not exist yet)
            os.kill(pid, signum)

    return forward


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
