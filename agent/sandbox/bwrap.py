"""The `bwrap` backend: bubblewrap over the image's root filesystem, for hosts without Docker.

Each command gets fresh user, pid, network, ipc, uts and mount namespaces; `/` is the ooda
rootfs read-only, `/work` the workspace (the only writable place besides a private /tmp and
HOME), and the environment is an allow-list (agent/sandbox/fidelity.py, whose start-up hook is
bound read-only at /run/ooda-site); /dev/shm is a bounded tmpfs; umask 022. Memory is capped by
a cgroup the host makes per sandbox (agent/sandbox/cgroup.py; where none can be made, by
RLIMIT_AS, which otherwise stays unlimited as on a normal machine), the workspace's disk by agent/sandbox/limits.py's DiskWatch, file size and
processes by rlimits. RLIMIT_NPROC counts per real uid and is ignored for uid 0, so as root every
sandbox runs as its own unprivileged host uid (leased with a lock file) that appears as 1000
inside; paths under root-only directories (e.g. /root/.cache/ooda) are first bind-mounted to
/run/ooda-stage in a private mount namespace so that uid can reach them. Timeouts kill the
bwrap process; --die-with-parent and the pid namespace take every descendant down with it.
A command whose script sits beside a byte-identical copy of a package held warm (the pytest
guard) gets that package's bytecode, compiled once per interpreter and version, bound read-only
over the copy's `__pycache__` (agent/sandbox/bytecode.py; Docker's PID 1 imports it instead).
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import ExecResult
from ooda.agent.sandbox import fidelity, image, warm
from ooda.agent.sandbox.bytecode import COMPILE_TIMEOUT_S, Bytecode, Runner
from ooda.agent.sandbox.cgroup import MemoryCgroup
from ooda.agent.sandbox.limits import DiskWatch, Limits, configured, disk_note, memory_note
from ooda.agent.sandbox.output import DEFAULT_CAP_BYTES
from ooda.agent.sandbox.ownership import Lease
from ooda.agent.sandbox.process import run_process
from ooda.agent.support.env_numbers import positive_from_env

ADDRESS_SPACE_LIMIT = 3 << 30
"""RLIMIT_AS where no memory cgroup can be made: virtual memory, so more generous than
Docker's 2 GiB of resident memory (with a cgroup it is left unlimited: a threaded suite
reserves 8 MiB of stack per thread, an allocator arenas per thread, none of it resident)."""
FILE_SIZE_LIMIT = 1 << 30
COMPILE_CAP_BYTES = 8 << 20
"""Output kept of a bytecode compile run (its .pyc files, compressed, on one line)."""
UID_COUNT = 1024


def uid_base() -> int:
    """The first of the UID_COUNT host uids bwrap sandboxes run as: OODA_BWRAP_UID_BASE, else
    1700000 (a UsageError when not a positive whole number)."""
    return positive_from_env("OODA_BWRAP_UID_BASE", 1_700_000, int, "a positive whole number")


STAGE = Path("/run/ooda-stage")
HOST_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
INTERRUPTED = "[interrupted: the run was decided]"
"""The line a command interrupt() ended gets (its result is never a verdict)."""

STAGE_SCRIPT = """
mount --bind "$1" "$6/root"
mount --bind "$2" "$6/work"
if [ -n "$3" ]; then mount --bind "$3" "$6/reqs"; fi
mount --bind "$4" "$6/site"
if [ -n "$5" ]; then mount --bind "$5" "$6/bytecode"; fi
shift 6
exec "$@"
"""


def _tool(name: str) -> str:
    """The host tool `name`, found on the caller's PATH (the system one when PATH is unset)."""
    path = shutil.which(name, path=os.environ.get("PATH") or HOST_ENV["PATH"])
    if path is None:
        raise InfraError(f"{name} is missing: apt-get install bubblewrap util-linux")
    return path


def bwrap_problem() -> str | None:
    """None when bubblewrap can build a sandbox here (as the backend will), else why not."""
    try:
        argv = _launcher(os.geteuid() == 0, uid_base() + UID_COUNT - 1)
        probe = [*argv, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=20, check=False,
                              env=HOST_ENV, cwd="/")
    except InfraError as exc:
        return str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}"
    if proc.returncode != 0:
        return ("bubblewrap cannot create namespaces here: "
                f"{(proc.stderr or proc.stdout).strip()[:300]} (unprivileged user namespaces "
                "must be allowed: sysctl kernel.unprivileged_userns_clone=1)")
    return None


@functools.cache
def _default_signals() -> list[str]:
    """`env --default-signal --` where the host's env has it (GNU coreutils >= 8.31): the
    sandbox's command starts with every signal at its default disposition, as from a login
    shell, whatever ooda inherited (under nohup SIGHUP is ignored, and an ignored signal stays
    ignored across exec: sh's test that its child dies of SIGHUP failed); [] without it."""
    env = shutil.which("env", path=os.environ.get("PATH") or HOST_ENV["PATH"])
    if env is None:
        return []
    try:
        probe = subprocess.run([env, "--default-signal", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [env, "--default-signal", "--"] if probe.returncode == 0 else []


def _launcher(
    as_root: bool, uid: int, nproc: int | None = None, *, address_space: bool = True
) -> list[str]:
    """setpriv (as root) + prlimit + bwrap with the namespace options, up to the binds, after
    `env --default-signal` (_default_signals); `address_space`: bound virtual memory too (only
    where no cgroup bounds the memory)."""
    argv: list[str] = [*_default_signals()]
    if as_root:
        argv += [_tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--"]
    limit_as = [f"--as={ADDRESS_SPACE_LIMIT}"] if address_space else []
    argv += [_tool("prlimit"), f"--nproc={nproc or configured().pids}", *limit_as,
             f"--fsize={FILE_SIZE_LIMIT}", "--core=0", "--"]
    argv += [_tool("bwrap"), "--unshare-all", "--unshare-user", "--disable-userns",
             "--die-with-parent", "--new-session", "--clearenv", "--uid", str(image.SANDBOX_UID),
             "--gid", str(image.SANDBOX_UID), "--hostname", "sandbox"]
    return argv


def _user_process_count() -> int:
    """Processes this (unprivileged) user already runs: RLIMIT_NPROC counts them too."""
    uid, count = os.getuid(), 0
    for entry in Path("/proc").iterdir():
        try:
            count += entry.name.isdigit() and entry.stat().st_uid == uid
        except OSError:
            continue
    return count


def _processes_of(uid: int) -> list[int]:
    """Live (non-zombie) host processes whose real uid is `uid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)] and not fields.get(
            "State", ""
        ).strip().startswith("Z"):
            found.append(int(entry.name))
    return found


def _sweep_uid(uid: int, patience_s: float = 3.0) -> None:
    """SIGKILL whatever still runs as the sandbox's leased uid (the pid namespace normally
    takes everything down with bwrap; this makes it certain before the next command)."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        pids = _processes_of(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


class UidLease:
    """An unprivileged host uid that no other live sandbox uses (flock on a file per uid)."""

    def __init__(self) -> None:
        locks = image.ooda_home() / "locks" / "uids"
        locks.mkdir(parents=True, exist_ok=True)
        base = uid_base()
        for uid in range(base, base + UID_COUNT):
            handle: IO[str] = open(locks / str(uid), "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self.uid = uid
            self._handle: IO[str] | None = handle
            return
        raise InfraError(f"all {UID_COUNT} sandbox uids are in use")

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class BwrapBackend:
    """Opens BwrapSandboxes over the ooda rootfs (built on first use)."""

    name = "bwrap"
    reusable = False

    @property
    def workspace_owner(self) -> tuple[int, int] | None:
        """Whom a shared base is first mounted for (each sandbox then gets its own uid's view,
        agent/sandbox/pool.py); None when not root."""
        return (uid_base(), uid_base()) if os.geteuid() == 0 else None

    def __init__(self, *, log: image.Log = image.stderr_log) -> None:
        problem = bwrap_problem()
        if problem:
            raise InfraError(problem)
        self.log = log
        self.limits = configured()
        self.rootfs = image.build_rootfs(log=log)
        group, why = MemoryCgroup.create(self.limits.memory) if os.geteuid() == 0 else (
            None, "not root")
        if group is not None:
            group.remove()
        else:
            log(f"bwrap: no memory cgroup ({why}): memory is bounded by RLIMIT_AS only")

    def open(self, workspace: Path, *, requirements: Path | None = None) -> BwrapSandbox:
        reqs = image.requirements_site(requirements, self.log) if requirements else None
        return BwrapSandbox(self.rootfs, workspace, reqs, limits=self.limits)

    def open_rootfs(
        self, workspace: Path, rootfs: Path, env: dict[str, str] | None = None
    ) -> BwrapSandbox:
        """A sandbox over another root filesystem (a task environment's, exported from its
        image: agent/sandbox/environments/rootfs.py), with `env` added to its environment."""
        return BwrapSandbox(rootfs, workspace, limits=self.limits, env=env)

    def adopt(self, launched: object, *, requirements: Path | None = None) -> BwrapSandbox | None:
        return None  # each command gets a fresh sandbox: nothing is started ahead of need

    def close(self) -> None:
        pass


class BwrapSandbox:
    """Runs each command in a fresh bubblewrap sandbox; the workspace persists between them."""

    backend = "bwrap"
    workdir = "/work"

    def __init__(
        self,
        rootfs: Path,
        workspace: Path,
        requirements: Path | None = None,
        *,
        limits: Limits | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workspace = workspace
        self.limits = limits or configured()
        self._cgroup: MemoryCgroup | None = None
        self.rootfs = rootfs
        self.requirements = requirements
        self.as_root = os.geteuid() == 0
        self._uid: UidLease | None = None
        self._env = fidelity.base_env(env, requirements=requirements is not None)
        self._site = fidelity.site_dir()
        self._bytecode: Bytecode | None = None
        """Made at the first command naming a script (agent/sandbox/bytecode.py)."""
        if self.as_root:
            self._uid = UidLease()
            for sub in ("root", "work", "reqs", "site", "bytecode"):
                (STAGE / sub).mkdir(mode=0o755, parents=True, exist_ok=True)
            self._lease = Lease(workspace, self._uid.uid, self._uid.uid)
            self._cgroup = MemoryCgroup.create(self.limits.memory)[0]
        else:
            self._lease = Lease(workspace, os.getuid(), os.getgid())
        self._closed = False
        self._one_at_a_time = threading.Lock()  # each run ends by killing the uid's processes
        self._running: threading.Event | None = None
        """Set by interrupt() to end the command running now (None between commands)."""

    @property
    def workspace_owner(self) -> tuple[int, int] | None:
        """The uid:gid its commands run as when that is a leased one (as root), else None
        (agent/sandbox/overlay.py shares a repository only with a sandbox that names one)."""
        return (self._uid.uid, self._uid.uid) if self._uid is not None else None

    def _argv(self, argv: Sequence[str], env: Mapping[str, str],
              bytecode: Sequence[tuple[Path, str]] = ()) -> list[str]:
        """The host argv running `argv` in a fresh sandbox; `bytecode`: (a directory under the
        bytecode cache, where it is bound read-only)."""
        root, work = str(self.rootfs), str(self.workspace.resolve())
        reqs = str(self.requirements) if self.requirements else ""
        site = str(self._site)
        cache = str(self._bytecode.root) if bytecode and self._bytecode else ""
        sources = [str(path) for path, _ in bytecode]
        prefix: list[str] = self._cgroup.enter_argv() if self._cgroup else []
        bound_as = self._cgroup is None
        if self.as_root and self._uid is not None:
            stage = str(STAGE)
            prefix += [_tool("unshare"), "--mount", "--propagation", "private", "--", "/bin/sh",
                      "-ec", STAGE_SCRIPT, "ooda-stage", root, work, reqs, site, cache, stage]
            root, work, site = f"{stage}/root", f"{stage}/work", f"{stage}/site"
            reqs = f"{stage}/reqs" if reqs else ""
            sources = [f"{stage}/bytecode/{os.path.relpath(p, cache)}" for p in sources]
            launcher = _launcher(True, self._uid.uid, self.limits.pids, address_space=bound_as)
        else:
            launcher = _launcher(False, 0, _user_process_count() + self.limits.pids,
                                 address_space=bound_as)
        binds = ["--ro-bind", root, "/", "--proc", "/proc", "--dev", "/dev",
                 "--perms", "1777", "--size", str(self.limits.shm), "--tmpfs", "/dev/shm",
                 "--perms", "1777", "--size", str(self.limits.tmp), "--tmpfs", "/tmp",
                 "--perms", "0755", "--size", str(self.limits.tmp), "--tmpfs", "/home",
                 "--perms", "0755", "--dir", fidelity.HOME,
                 "--perms", "0755", "--tmpfs", "/run", "--ro-bind", site, fidelity.SITE_MOUNT,
                 "--bind", work, self.workdir]
        if reqs:
            binds += ["--ro-bind", reqs, image.REQS_MOUNT]
        for source, (_, target) in zip(sources, bytecode, strict=True):
            binds += ["--ro-bind", source, target]
        binds += ["--chdir", self.workdir]
        for key, value in {**self._env, **env}.items():
            binds += ["--setenv", key, value]
        return [*prefix, *launcher, *binds, "--", *argv]

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        cap_bytes: int = DEFAULT_CAP_BYTES,
    ) -> ExecResult:
        with self._one_at_a_time:
            if self._closed:
                return ExecResult(125, "sandbox unusable: it was closed", 0.0)
            interrupted = self._running = threading.Event()
            env = env or {}

            def compile_run(words: list[str]) -> ExecResult | None:
                result = self._run_now(words, env, COMPILE_TIMEOUT_S, COMPILE_CAP_BYTES, (),
                                       interrupted)
                return None if interrupted.is_set() else result

            try:
                bytecode = self._bytecode_binds(argv, env, compile_run)
                return self._run_now(argv, env, timeout_s, cap_bytes, bytecode, interrupted)
            finally:
                self._running = None

    def _bytecode_binds(self, argv: Sequence[str], env: Mapping[str, str],
                        compile_run: Runner) -> list[tuple[Path, str]]:
        """The read-only binds of precompiled bytecode for argv (agent/sandbox/bytecode.py);
        none when argv names no script or its PATH is not the sandbox's own."""
        if not any(word.endswith(".py") for word in argv):
            return []
        path = self._env.get("PATH", "")
        if env.get("PATH", path) != path:
            return []
        try:
            if self._bytecode is None:
                marker = self.rootfs / image.MARKER
                stamp = str(marker.stat().st_mtime_ns) if marker.is_file() else ""
                self._bytecode = Bytecode([str(self.rootfs.resolve()), stamp, path],
                                          warm.held(), self._site)
            return self._bytecode.binds(argv, self.workspace, self.workdir, compile_run)
        except OSError:
            return []  # the cache cannot be written: the command compiles as before

    def _run_now(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        timeout_s: float,
        cap_bytes: int,
        bytecode: Sequence[tuple[Path, str]],
        interrupted: threading.Event,
    ) -> ExecResult:
        """One command in a fresh sandbox (the lock held): limits watched, the uid swept."""
        disk = DiskWatch(self.workspace, self.limits.disk)
        ooms = self._cgroup.oom_kills() if self._cgroup else 0
        hit: list[str] = []

        def over_disk() -> str | None:
            if interrupted.is_set():
                return INTERRUPTED
            if disk.exceeded():
                hit.append(disk_note(disk.limit))
                return hit[-1]
            return None

        result = run_process(
            self._argv(argv, env, bytecode), cwd="/", env=HOST_ENV, timeout_s=timeout_s,
            cap_bytes=cap_bytes, check=over_disk, umask=fidelity.UMASK,
        )
        if hit and not result.timed_out:
            result = dataclasses.replace(result, limit=hit[0])
        if self._uid is not None:
            _sweep_uid(self._uid.uid)
        if self._cgroup and self._cgroup.oom_kills() > ooms and not result.timed_out:
            note = memory_note(self.limits.memory)
            code = result.exit_code if result.exit_code else 137
            result = ExecResult(code, f"{result.output.rstrip()}\n{note}\n".lstrip(),
                                result.duration_s, limit=result.limit or note)
        return result

    def interrupt(self) -> None:
        """End the command running now, if one is (another thread's call: the run it is part
        of was decided), within run_process's check interval; the sandbox stays usable."""
        running = self._running
        if running is not None:
            running.set()

    def close(self) -> None:
        self._closed = True
        if self._uid is not None:
            _sweep_uid(self._uid.uid)  # ends a command still running in another thread
        with self._one_at_a_time:
            self._lease.release()
            if self._uid is not None:
                self._uid.release()
                self._uid = None
            if self._cgroup is not None:
                self._cgroup.remove()
                self._cgroup = None
