"""The console script's way to a warm daemon: find it, hand it the command, wait for its exit
code, relaying signals; on modules built into the interpreter or in its own lib-dynload only.

Every import here is paid by every command a daemon serves, before anything else. Through
`json`, `socket`, `signal`, `hashlib`, `pathlib`, `re` and `contextlib` the client took ~25 ms
of CPU more than the interpreter's own start-up on an installed wheel (a loaded machine);
with `marshal`, `_socket`, `_signal`, `_struct` and `_sha256` it takes a few. So the request
is marshal's format (the daemon runs the same interpreter: the key says so; it reads only
connections of its own user, SO_PEERCRED), and the daemon's answers to a command are plain
lines, "pid N" then "exit N". agent/startup/client.py holds the rest of the protocol (status,
stop, spawning, the index of daemons) for the commands that need it.

A daemon serves only clients that would have run the same code the same way: its key hashes
the interpreter, the package's source files (path, size, mtime) and the few environment
variables read at import time.
"""

from __future__ import annotations

import _socket
import _struct
import marshal
import os
import sys
import time

from ooda.agent.support.clock import command_start

TYPE_CHECKING = False
if TYPE_CHECKING:  # (the same functions, typed: mypy has no stubs for these built-in modules)
    import signal as _signal
    from collections.abc import Callable, Iterator, Mapping
    from hashlib import sha256
    from types import FrameType
    from typing import Any
else:
    import _signal

    try:
        from _sha256 import sha256  # (hashlib would load OpenSSL: ~5 ms)
    except ImportError:
        try:
            from _sha2 import sha256  # Python 3.12 on
        except ImportError:  # a Python built with OpenSSL's hashes only (Fedora's)
            from hashlib import sha256

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
PACKAGES = ("agent", "verifiers", "tasks")
KEY_ENV_PREFIXES = ("OODA_", "PYTHON", "LC_")
KEY_ENV_NAMES = ("TMPDIR", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR")
"""Variables read when modules are imported, streams opened or TLS settings built (a worker
gets every other one of its client's variables as they are)."""
FORWARDED_SIGNALS = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
START_WAIT_S = 3.0
"""How long a client waits for a daemon that is starting (it is ready ~1.5 s after spawn)."""
ROUTED_COMMANDS = ("run", "verify", "eval", "ci")
"""Commands the daemon may serve (the ones that import the SDKs and start sandboxes)."""
GLOBAL_FLAGS = ("--quiet", "--verbose", "--version")
"""The global options besides -q/-v/-V and their bundles (agent/cli/app.py moves them after
the command before it)."""


class NoDaemon(Exception):
    """No daemon took the command: run it in this process."""


def enabled(env: Mapping[str, str] = os.environ) -> bool:
    """On unless OODA_DAEMON is 0/false/no/off (a one-shot job, e.g. the GitHub Action's
    `ooda ci` step, turns it off: nothing would come back to use it)."""
    return env.get("OODA_DAEMON", "").strip().lower() not in ("0", "false", "no", "off")


def command_args(argv: list[str]) -> list[str]:
    """The command line from the command's name on (`ooda -q run X` → run X)."""
    start = 0
    while start < len(argv) and _global_flag(argv[start]):
        start += 1
    return argv[start:]


def _global_flag(arg: str) -> bool:
    return arg in GLOBAL_FLAGS or (len(arg) > 1 and arg[0] == "-" and set(arg[1:]) <= set("qvV"))


def routed(argv: list[str]) -> bool:
    """Whether this command line is one a daemon serves."""
    args = command_args(argv)
    return bool(args) and args[0] in ROUTED_COMMANDS and not {"-h", "--help"} & set(argv)


# --------------------------------------------------------------------------- the key


def daemon_key(env: Mapping[str, str] = os.environ) -> str:
    """What a daemon must share with a client to serve it (16 hex digits)."""
    digest = sha256()
    digest.update(f"{sys.executable}\0{sys.version}\0{PACKAGE_ROOT}\0".encode())
    for package in PACKAGES:
        for path, size, mtime_ns in python_files(os.path.join(PACKAGE_ROOT, package)):
            digest.update(f"{path}\0{size}\0{mtime_ns}\0".encode())
    for name, value in key_variables(env).items():
        digest.update(f"{name}={value}\0".encode())
    return str(digest.hexdigest()[:16])


def python_files(top: str) -> list[tuple[str, int, int]]:
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


def key_variables(env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables that take part in the key, by name."""
    return {
        name: env[name] for name in sorted(env)
        if (name.startswith(KEY_ENV_PREFIXES) or name in KEY_ENV_NAMES)
        and name not in ("OODA_DAEMON", "OODA_DAEMON_IDLE_S")
    }


def runtime_dir() -> str:
    """The directory holding the daemons' sockets, locks and logs ($OODA_DAEMON_DIR, else
    $XDG_RUNTIME_DIR/ooda, else /tmp/ooda-UID); created 0700, refused unless it is ours."""
    path = os.environ.get("OODA_DAEMON_DIR")
    if not path:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        path = os.path.join(runtime, "ooda") if runtime else f"/tmp/ooda-{os.getuid()}"
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not os.path.isdir(path):
        raise OSError(f"{path} is not a private directory of this user")
    return path


def daemon_file(key: str, kind: str, directory: str | None = None) -> str:
    """The daemon's "sock", "lock", "log" or "json" (status) file for this key, in `directory`
    (default: runtime_dir())."""
    return os.path.join(directory or runtime_dir(), f"daemon-{key}.{kind}")


# --------------------------------------------------------------------------- messages


def send_request(sock: _socket.socket, request: dict[str, object], fds: list[int]) -> None:
    """A 4-byte length and the request in marshal's format; `fds` ride along (SCM_RIGHTS)."""
    body = marshal.dumps(request)
    data = _struct.pack("!I", len(body)) + body
    rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _struct.pack(f"{len(fds)}i", *fds))]
    sent = sock.sendmsg([data], rights if fds else [])
    if sent < len(data):
        sock.sendall(data[sent:])


def decode_request(body: bytes) -> dict[str, object]:
    """A request's body as sent by send_request (ValueError when it is not one)."""
    try:
        request = marshal.loads(body)
    except (EOFError, TypeError) as exc:
        raise ValueError(f"not a request: {exc}") from None
    if not isinstance(request, dict):
        raise ValueError("not a request")
    return request


def answer_line(name: str, value: int) -> bytes:
    """One of the daemon's answers to a command: "pid N" (the worker started), "exit N"."""
    return f"{name} {value}\n".encode()


# --------------------------------------------------------------------------- the client


def run_in_daemon(argv: list[str], wait_start_s: float = START_WAIT_S) -> int:
    """Hand `argv` to this key's daemon and wait for its exit code (NoDaemon when none runs,
    or it drops the command before starting it). A daemon still importing is waited for up
    to `wait_start_s`: sooner ready than this process would be on its own."""
    try:
        key, directory = daemon_key(), runtime_dir()
        sock = _connect(daemon_file(key, "sock", directory), daemon_file(key, "lock", directory),
                        time.monotonic() + wait_start_s)
    except OSError as exc:
        raise NoDaemon(str(exc)) from None
    try:
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": _umask(),
                   "started": command_start()}
        try:
            send_request(sock, request, [0, 1, 2])
        except OSError as exc:
            raise NoDaemon(str(exc)) from None
        return _wait_for_exit(sock)
    finally:
        sock.close()


def _answers(sock: _socket.socket) -> Iterator[tuple[str, int]]:
    """The daemon's answer lines, parsed, until it closes the connection."""
    pending = b""
    while chunk := sock.recv(4096):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            name, _, value = line.decode().partition(" ")
            yield name, int(value)


def _wait_for_exit(sock: _socket.socket) -> int:
    """Relay signals to the worker once its pid is known; its exit code (sent by the worker
    itself, or by the daemon when it reaps a worker killed by a signal)."""
    previous: dict[int, Any] = {}
    started = False
    try:
        for name, value in _answers(sock):
            if name == "exit":
                return value
            if name == "pid" and not started:
                started = True
                forward = _forward_to(value)
                previous = {sig: _signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    except (OSError, ValueError):
        pass
    finally:
        for sig, handler in previous.items():
            if handler is not None:
                _signal.signal(sig, handler)
    if not started:
        raise NoDaemon("the daemon closed the connection before starting the command")
    print("ooda: error: the ooda daemon's worker ended without an exit status", file=sys.stderr)
    return 3


def _connect(sock_path: str, lock: str, deadline: float) -> _socket.socket:
    """A connection to the daemon's socket, waiting while a daemon holds the lock but does not
    listen yet (it binds its socket only once ready)."""
    while True:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.connect(sock_path)
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline or not starting(lock):
                raise
        time.sleep(0.02)


def starting(lock: str) -> bool:
    """A daemon process holds this lock (it is starting or serving)."""
    import fcntl  # (only when no daemon answered)

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
        if signum in (_signal.SIGINT, _signal.SIGHUP):
            try:
                os.killpg(pid, signum)
                return
            except (ProcessLookupError, PermissionError):
                pass
        try:  # (or its group did not exist yet)
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    return forward


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
