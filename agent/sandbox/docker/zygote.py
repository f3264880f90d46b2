"""PID 1 of a Docker sandbox: a warm command server (runs inside the container; stdlib only).

The container starts `python3 -c <this file's source> ooda-init SOCKET`. This process connects
once to the host's one-shot unix socket (the host stops listening right after, so nothing that
starts later can connect), makes itself non-dumpable (no ptrace, no /proc/1/fd or /proc/1/mem
for candidate code) and, whenever no request is waiting, imports the verifier toolchain (mypy,
pytest) ahead of need, then the packages the host holds warm (agent/sandbox/warm.py: the pytest
guard), whose sources it read from the read-only control directory before connecting; a warm
package's `__warm__()` is called after it is imported and after every later import, before any
fork (the guard records the toolchain's code there once, instead of in every run), and its
`__fresh__()` after the heap is frozen (objects each forked run takes as its own: the guard's
prepared pytest configuration). When the host closes the socket, it kills everything and exits (the
container is then removed by Docker). Being
PID 1 of its pid namespace, it cannot be signalled from inside the container (it installs no
handlers). Then it serves one request at a time:

- `run`: fork a child with the given argv, cwd and environment. `python3 [-s] [-B] [-P] -m
  pytest|mypy|ruff` and `python3 [-s] [-B] [-P] SCRIPT` (the pytest guard) run in the forked
  child with the toolchain already imported, as a fresh interpreter would run them (same
  sys.path, argv and environment; `-P`: nothing prepended to sys.path); it falls back to exec
  whenever that could differ (other PYTHON* variables, a workspace module shadowing a loaded
  one, a user site, other interpreter options); a warm package beside the script shadows
  nothing when its folder holds exactly the warm copy's files, byte for byte (the script then
  uses the copy PID 1 imported); any other argv is exec'd. stdout and stderr are merged and capped (head and tail kept). When
  the child exits, or at the timeout, every other process in the container is SIGKILLed, so
  nothing outlives a command. A `cancel` frame from the host while it runs (the command broke
  a limit the host watches: the workspace's disk) ends it the same way; one that arrives too
  late is ignored. The header says when the container's memory cgroup OOM-killed a process.
- `reset`: kill everything, empty /tmp, /dev/shm and /dev/mqueue and remove SysV IPC objects,
  so the next candidate finds the container as fresh as a new one (the host empties /work).

Frames both ways: a 4-byte big-endian length, then the payload (JSON, or raw output bytes).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

MARKER = "ooda-init"
"""Second argument of PID 1 (also how tests tell it from leftover processes)."""
SWEEP_S = 20.0
"""How long PID 1 keeps killing what a command left (a fork bomb's thousand processes)."""
WIPED = ("/tmp", "/home/ooda", "/dev/shm", "/dev/mqueue")
"""Emptied between candidates; /home/ooda is HOME (agent/sandbox/fidelity.py)."""
TOOLS = ("pytest", "mypy", "ruff")
"""Imported while idle, in this order (verify runs pytest before mypy)."""
WITH_PYTEST = ("faulthandler", "pdb", "unittest.mock", "importlib.metadata", "email.parser",
               "xml.sax.saxutils", "readline")
"""Standard library modules a guarded pytest run imports before any test whatever the
repository (the faulthandler and debugging plugins, the guard's toolchain check and its
`mock.ANY`, the capture plugin's readline, loaded before any conftest file: ~1.4 ms of a
shared library and its set-up), imported with pytest so that each run does not (module
objects of the image, loaded before any workspace code, exactly as the run itself would load
them)."""
IDLE_S = 0.05
"""Quiet time before a tool is imported ahead of need: the host's next command usually follows
within milliseconds, and an import (~0.1 s) cannot be interrupted for it."""
WARM_NAME = "warm.json"
"""The file beside the control socket that holds the warm packages' sources ({package: {module
file: source}}), written by the host (agent/sandbox/docker/launch.py): one file, so that the
host removes the control directory in a few system calls once PID 1 has connected."""
WARM_ORIGIN = "warm"
"""The folder (beside the control socket; it does not exist) the warm modules' __file__ name."""
WARM_PREFIX = "warm:"
IPC_RMID = 0
PR_SET_DUMPABLE = 4
_HEADER = struct.Struct(">I")
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


# --------------------------------------------------------------------------- frames


def send(sock: socket.socket, payload: bytes) -> None:
    """Send one frame."""
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def receive(sock: socket.socket) -> bytes | None:
    """One frame's payload; None when the peer has gone."""
    head = _exactly(sock, _HEADER.size)
    if head is None:
        return None
    return _exactly(sock, _HEADER.unpack(head)[0])


# --------------------------------------------------------------------------- processes


def _set_dumpable(flag: bool) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def _others() -> list[int]:
    """Live processes of the container other than this one (zombies excluded)."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.append(int(name))
    return found


def _reap() -> dict[int, int]:
    """Collect every exited child; pid -> wait status."""
    done: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done[pid] = status


def oom_kills() -> int:
    """Processes the container's memory cgroup killed so far (cgroup v2 or v1; 0: unknown)."""
    for path in OOM_COUNTERS:
        try:
            with open(path) as counters:
                for line in counters:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit():
                        return int(value)
        except OSError:
            continue
    return 0


def sweep() -> dict[int, int]:
    """SIGKILL every other process in the container until none is left; the statuses reaped."""
    reaped = _reap()
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        if not _others():
            break
        try:
            os.kill(-1, signal.SIGKILL)  # from PID 1: every process of the namespace but itself
        except OSError:
            pass
        time.sleep(0.002)
        reaped.update(_reap())
    reaped.update(_reap())
    return reaped


# --------------------------------------------------------------------------- the child


def preload(tool: str) -> bool:
    """Import one tool now, so forked runs skip it; False when it does not import."""
    import importlib

    try:
        if tool == "pytest":
            import _pytest.config

            for plugin in _pytest.config.default_plugins:
                try:
                    importlib.import_module(f"_pytest.{plugin}")
                except ImportError:
                    pass
            for name in WITH_PYTEST:
                try:
                    importlib.import_module(name)
                except ImportError:
                    pass
            _compile_junit_pattern()
        elif tool == "mypy":
            importlib.import_module("mypy.main")
            importlib.import_module("mypy.build")
        importlib.import_module(tool)
    except Exception:  # a tool that does not import is simply exec'd
        return False
    return True


def _compile_junit_pattern() -> None:
    """Put JUnit's illegal-character class in the regular expression cache: every JUnit report
    (each guarded run writes one) escapes its text with it, and compiling it takes ~8 ms (its
    astral ranges), every run again. The cache entry is what the run's own `re.sub` would make."""
    try:
        from _pytest import junitxml

        junitxml.bin_xml_escape("")
    except Exception:  # another pytest: the run compiles its own
        pass


def settle(warm: dict[str, dict[str, bytes]], loaded: list[str]) -> None:
    """After an import: each loaded warm package's `__warm__()` (one that fails is dropped, so
    that commands import their own copy), then the heap frozen, so that forked children leave
    the warm interpreter's pages shared, then each one's `__fresh__()`: objects a forked run
    takes as its own, made after the freeze so that the run's garbage collector sees them as
    it sees those a fresh run makes (`gc.get_objects` lists no frozen object)."""
    import gc

    for package in [p for p in warm if WARM_PREFIX + p in loaded]:
        hook = getattr(sys.modules.get(package), "__warm__", None)
        try:
            if callable(hook):
                hook()
        except Exception:
            loaded.remove(WARM_PREFIX + package)
            _forget(package)
    inspect = sys.modules.get("inspect")
    if inspect is not None:
        # the file of every loaded module (realpath: an lstat per path part, ~500 modules),
        # which a failing test's traceback looks up first (pytest's cut of it): once, here,
        # not in every failing run; the child adds the modules it imports, as a fresh one would
        try:
            inspect.getmodule(settle.__code__)
        except Exception:  # a module whose file cannot be looked up: the child does it
            pass
    gc.collect()
    gc.freeze()
    for package in [p for p in warm if WARM_PREFIX + p in loaded]:
        fresh = getattr(sys.modules.get(package), "__fresh__", None)
        try:
            if callable(fresh):
                fresh()
        except Exception:  # the runs make their own
            pass


# --------------------------------------------------------------------------- warm packages


def read_warm(path: str) -> dict[str, dict[str, bytes]]:
    """The warm packages' sources in the file at `path`: package -> module file -> bytes (none
    when it is missing or unreadable: PID 1 goes on without, commands import their own)."""
    packages: dict[str, dict[str, bytes]] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return packages
    for package, files in (found.items() if isinstance(found, dict) else ()):
        if not isinstance(package, str) or not package.isidentifier():
            continue
        if not isinstance(files, dict) or not isinstance(files.get("__init__.py"), str):
            continue
        packages[package] = {
            name: text.encode("utf-8") for name, text in sorted(files.items())
            if isinstance(name, str) and isinstance(text, str) and name.endswith(".py")
            and name[:-3].isidentifier()
        }
    return packages


class _InMemory:
    """An import finder and loader for one warm package, from the sources held in memory (on
    sys.meta_path only while the package is imported)."""

    def __init__(self, package: str, files: dict[str, bytes], origin: str) -> None:
        self.package, self.files, self.origin = package, files, origin

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> Any:
        import importlib.util

        if fullname == self.package:
            name = "__init__.py"
        elif fullname.startswith(self.package + ".") and fullname.count(".") == 1:
            name = fullname.partition(".")[2] + ".py"
        else:
            return None
        if name not in self.files:
            return None
        loader: Any = self  # a finder and loader in one (importlib's protocols are loose)
        spec = importlib.util.spec_from_loader(
            fullname, loader, origin=os.path.join(self.origin, self.package, name),
            is_package=name == "__init__.py")
        if spec is not None:
            spec.has_location = True  # __file__ names the warm copy
        return spec

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        name = os.path.basename(module.__spec__.origin)
        code = compile(self.files[name], module.__spec__.origin, "exec", dont_inherit=True)
        exec(code, module.__dict__)


def import_warm(package: str, files: dict[str, bytes], origin: str) -> bool:
    """Import a warm package and all its modules from memory; False (and nothing of it left
    in sys.modules) when that fails."""
    import importlib

    finder = _InMemory(package, files, origin)
    sys.meta_path.insert(0, finder)
    try:
        for name in sorted(files):
            stem = name[:-3]
            importlib.import_module(package if stem == "__init__" else f"{package}.{stem}")
    except Exception:
        _forget(package)
        return False
    finally:
        sys.meta_path.remove(finder)
    return True


def _forget(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


def same_package(folder: str, files: dict[str, bytes]) -> bool:
    """Whether `folder` holds exactly `files` (the same names, byte for byte, nothing else)."""
    try:
        if sorted(os.listdir(folder)) != sorted(files):
            return False
        for name, data in files.items():
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                return False
            with open(path, "rb") as handle:
                if handle.read() != data:
                    return False
    except OSError:
        return False
    return True


def wanted_tools(argv: list[str], pending: list[str]) -> list[str]:
    """The not-yet-imported tools a command will need: `-m TOOL`, or for a script pytest and
    the warm packages (a script run here is the pytest guard)."""
    rest = argv[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        rest = rest[1:]  # interpreter options (-s -B -P)
    if rest[:1] == ["-m"]:
        return [rest[1]] if len(rest) > 1 and rest[1] in pending else []
    if rest and rest[0].endswith(".py"):
        return [t for t in pending if t == "pytest" or t.startswith(WARM_PREFIX)]
    return []


def fast_target(
    argv: list[str], env: dict[str, str], base_env: dict[str, str], loaded: list[str], cwd: str,
    warm: dict[str, dict[str, bytes]],
) -> tuple[str, str, list[str], bool, bool, list[str]] | None:
    """How to run argv in-process: (kind "module"|"script", the module or script, its
    arguments, no_user_site (-s), safe_path (-P: nothing prepended to sys.path), the warm
    packages found beside it), or None when only exec gives the same result. Served:
    `python3 [-s] [-B] [-P] -m TOOL ARGS` for a pre-imported tool and `python3 [-s] [-B] [-P]
    SCRIPT ARGS` (e.g. the pytest guard). A folder of a loaded warm package (`warm`: their
    sources) shadows nothing when it holds exactly the warm copy's files."""
    import shutil

    found = shutil.which(argv[0], path=env.get("PATH", "")) if argv else None
    if found is None or os.path.realpath(found) != os.path.realpath(sys.executable):
        return None
    flags = _interpreter_flags(argv[1:])
    if flags is None:
        return None
    no_user_site, safe_path, rest = flags
    if rest[0] == "-m":
        if len(rest) < 2 or rest[1] not in loaded:
            return None
        kind, target, args, first = "module", rest[1], rest[2:], cwd
    else:
        script = os.path.join(cwd, rest[0])
        if not os.path.isfile(script):
            return None
        kind, target, args = "script", script, rest[1:]
        first = os.path.dirname(os.path.realpath(script))
    python_vars = {k for k in (*env, *base_env) if k.startswith("PYTHON")}
    if any(env.get(k) != base_env.get(k) for k in python_vars):
        return None
    import site

    if not no_user_site and site.ENABLE_USER_SITE:
        if os.path.isdir(site.getusersitepackages()):
            return None
    # -P: a fresh interpreter puts neither the cwd (-m) nor the script's directory first
    prepended = [] if safe_path and kind == "module" else [cwd] if safe_path else [first, cwd]
    beside = _warm_beside(list(dict.fromkeys(prepended)), loaded, warm)
    if beside is None:
        return None
    return kind, target, args, no_user_site, safe_path, beside


def _interpreter_flags(args: list[str]) -> tuple[bool, bool, list[str]] | None:
    """The interpreter options before `-m` or the script: (-s given, -P given, what follows
    them), or None when there is nothing to run or an option a fork cannot apply."""
    no_user_site = safe_path = False
    rest = args
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        if set(rest[0][1:]) - {"s", "B", "P"} or rest[0] == "-":
            return None  # an interpreter option a fork cannot apply
        no_user_site = no_user_site or "s" in rest[0]
        safe_path = safe_path or "P" in rest[0]
        rest = rest[1:]
    if not rest:
        return None
    return no_user_site, safe_path, rest


def _warm_beside(directories: list[str], loaded: list[str],
                 warm: dict[str, dict[str, bytes]]) -> list[str] | None:
    """The loaded warm packages whose folders lie in `directories` (put first on sys.path),
    or None when one of their modules would shadow a module already loaded."""
    beside = []
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            return None
        for name in names:
            module = _module_name(directory, name)
            if module is None or module not in sys.modules:
                continue
            held = warm.get(module) if WARM_PREFIX + module in loaded else None
            if held is None or not same_package(os.path.join(directory, name), held):
                return None  # a workspace module would shadow one already loaded
            beside.append(module)
    return beside


def _late_pth_paths(site: Any) -> None:
    """Add the directories that .pth files of the site directories name and that exist only
    now (an editable install's /work/src: the workspace was empty when PID 1 started), as a
    fresh interpreter would; their `import` lines ran at start-up already."""
    for directory in site.getsitepackages():
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(directory, name), encoding="utf-8") as handle:
                    lines = handle.read().splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                path = os.path.normpath(os.path.join(directory, line))
                if path not in sys.path and os.path.isdir(path):
                    sys.path.append(path)


def _module_name(directory: str, name: str) -> str | None:
    """The top-level module an entry of a sys.path directory provides (None: none)."""
    stem, _, suffix = name.partition(".")
    if suffix:
        return stem if name.endswith((".py", ".pyc", ".so")) else None
    for init in ("__init__.py", "__init__.pyc"):
        if os.path.isfile(os.path.join(directory, name, init)):
            return name
    return None  # a plain directory is at most a namespace package, which never shadows


def child(
    sock: socket.socket, request: dict[str, Any], out: int, loaded: list[str],
    base_env: dict[str, str], warm: dict[str, dict[str, bytes]],
) -> None:
    """In the forked child: become the command. Never returns (exec, or SystemExit)."""
    os.close(sock.detach())
    os.dup2(out, 1)
    os.dup2(out, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.closerange(3, 1 << 16)
    _set_dumpable(True)
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")  # under memory pressure the command goes, not PID 1
    except OSError:
        pass
    argv = [str(a) for a in request["argv"]]
    env = {**base_env, **{str(k): str(v) for k, v in request.get("env", {}).items()}}
    cwd = str(request.get("cwd", "/work"))
    try:
        os.chdir(cwd)
    except OSError as exc:
        os.write(2, f"cannot enter {cwd}: {exc.strerror}\n".encode())
        os._exit(126)
    target = fast_target(argv, env, base_env, loaded, cwd, warm)
    if target is None:
        try:
            os.execvpe(argv[0], argv, env)
        except FileNotFoundError:
            os.write(2, f"{argv[0]}: command not found\n".encode())
            os._exit(127)
        except OSError as exc:
            os.write(2, f"{argv[0]}: {exc.strerror}\n".encode())
            os._exit(126)
    import importlib
    import runpy
    import site

    kind, name, args, no_user_site, safe_path, beside = target
    for package in warm:
        if package not in beside:
            _forget(package)  # not importable here, as in a fresh interpreter
    os.environ.clear()
    os.environ.update(env)
    if no_user_site:
        site.ENABLE_USER_SITE = False
    _late_pth_paths(site)
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    if kind == "module":
        sys.argv = [argv[0], *args]
        if not safe_path:
            sys.path.insert(0, os.getcwd())
        runpy.run_module(name, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [name, *args]
        if not safe_path:
            sys.path.insert(0, os.path.dirname(os.path.realpath(name)))
        runpy.run_path(name, run_name="__main__")
    sys.exit(0)  # the program returned instead of exiting: like falling off the end of a script


# --------------------------------------------------------------------------- requests


class Capped:
    """Head and tail of a byte stream, the middle counted and dropped."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def write(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > self.half:
            extra = len(self.tail) - self.half
            self.dropped += extra
            del self.tail[:extra]

    def value(self) -> bytes:
        if not self.dropped:
            return bytes(self.head + self.tail)
        note = f"\n[... {self.dropped} bytes of output elided ...]\n".encode()
        return bytes(self.head) + note + bytes(self.tail)


def run(
    sock: socket.socket, request: dict[str, Any], loaded: list[str], base_env: dict[str, str],
    warm: dict[str, dict[str, bytes]], received: float | None = None,
) -> tuple[dict[str, Any], bytes]:
    """Run one command (see the module docstring); its header and output. If the host goes
    away meanwhile, kill everything and exit. The timeout counts from `received`, when the
    request arrived: importing a tool the command needs is part of its time, as in a fresh
    interpreter (and the host, which counts from sending it, gets its answer within its grace)."""
    sweep()
    ooms = oom_kills()
    cancelled = False
    started = time.monotonic() if received is None else received
    deadline = started + max(float(request.get("timeout", 60.0)), 0.0)
    output = Capped(int(request.get("cap", 256 * 1024)))
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        child(sock, request, write_end, loaded, base_env, warm)
    os.close(write_end)
    pidfd = os.pidfd_open(pid)
    status: int | None = None
    watched = [read_end, pidfd]
    try:
        while status is None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([*watched, sock.fileno()], [], [], left)
            if sock.fileno() in ready:
                if not sock.recv(1, socket.MSG_PEEK) or receive(sock) is None:
                    sweep()  # the host closed the sandbox: nothing may outlive it
                    os._exit(0)
                cancelled = True  # the only frame the host sends meanwhile
                break
            if read_end in ready:
                chunk = os.read(read_end, 1 << 16)
                if chunk:
                    output.write(chunk)
                else:
                    watched.remove(read_end)
            if pidfd in ready:
                status = os.waitpid(pid, 0)[1]
        timed_out = status is None and not cancelled
        reaped = sweep()
        if status is None:
            status = reaped.get(pid)
        if read_end in watched:
            while select.select([read_end], [], [], 5.0)[0]:
                chunk = os.read(read_end, 1 << 16)
                if not chunk:
                    break
                output.write(chunk)
    finally:
        os.close(read_end)
        os.close(pidfd)
    if timed_out:
        code = 124
    elif status is None:
        code = 137 if cancelled else 125
    else:
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code
    header = {"exit": code, "timed_out": timed_out, "duration": time.monotonic() - started,
              "cancelled": cancelled, "oom": oom_kills() > ooms}
    return header, output.value()


def _empty(path: str) -> None:
    """Remove everything below `path` (not path itself), fixing permissions on the way."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                _empty(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def _remove_ipc() -> list[str]:
    """Remove every SysV shared memory segment, message queue and semaphore set; the ones left."""
    left = []
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return ["ctypes unavailable"]
    for kind, call in (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl")):
        try:
            with open(f"/proc/sysvipc/{kind}") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            ident = int(row.split()[1])
            if kind == "sem":
                failed = libc.semctl(ident, 0, IPC_RMID) != 0
            else:
                failed = getattr(libc, call)(ident, IPC_RMID, None) != 0
            if failed:
                left.append(f"{kind} {ident}")
    return left


def reset() -> dict[str, Any]:
    """Make the container fresh for the next candidate; ok False when something stayed."""
    sweep()
    left = _remove_ipc()
    for path in WIPED:
        _empty(path)
        try:
            left += [f"{path}/{name}" for name in os.listdir(path)]
        except OSError:
            pass
    left += [str(pid) for pid in _others()]
    return {"ok": not left, "left": left[:20]}


# --------------------------------------------------------------------------- main


def main(args: list[str]) -> None:
    """Connect, then serve requests until the host goes away; import the tools while idle."""
    os.chdir("/")
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    _set_dumpable(False)
    os.umask(0o022)  # a normal login's, whatever the engine gave PID 1
    origin = os.path.join(os.path.dirname(args[-1]), WARM_ORIGIN)
    warm = read_warm(os.path.join(os.path.dirname(args[-1]), WARM_NAME))  # before connecting
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args[-1])
    base_env = dict(os.environ)
    loaded: list[str] = []
    pending = [TOOLS[0], *(WARM_PREFIX + p for p in warm), *TOOLS[1:]]

    def load(tool: str) -> None:
        pending.remove(tool)
        if tool.startswith(WARM_PREFIX):
            package = tool[len(WARM_PREFIX):]
            done = "pytest" in loaded and import_warm(package, warm[package], origin)
        else:
            done = preload(tool)
        if done:
            loaded.append(tool)
        settle(warm, loaded)

    send(sock, json.dumps({"ready": True}).encode())
    while True:
        if pending and not select.select([sock], [], [], IDLE_S)[0]:
            load(pending[0])
            continue
        message = receive(sock)
        if message is None:
            os._exit(0)
        request = json.loads(message)
        if request.get("op") == "run":
            received = time.monotonic()
            for needed in wanted_tools([str(a) for a in request.get("argv", [])], pending):
                load(needed)
            header, output = run(sock, request, loaded, base_env, warm, received)
            send(sock, json.dumps(header).encode())
            send(sock, output)
        elif request.get("op") == "cancel":
            continue  # for a command that had ended already
        elif request.get("op") == "reset":
            send(sock, json.dumps(reset()).encode())
        else:
            send(sock, json.dumps({"error": f"unknown op {request.get('op')!r}"}).encode())


if __name__ == "__main__":
    main(sys.argv)
