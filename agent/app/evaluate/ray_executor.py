"""`ooda eval --executor ray`: each task a Ray task on a node that has a sandbox backend.

Why: a task set that outgrows one machine runs on an existing Ray cluster rather than on a
scheduler of ooda's own. The driver (the `ooda eval` process) stays the single writer of the
evaluation directory; the nodes only run tasks:

- a task travels as bytes through Ray's object store (`pack_task`: the repository, the
  requirements and replay files in a tar, the Task with relative paths), so no shared
  filesystem is assumed; environment images are built on the node from the task's own files
  by the sandbox backend, never shipped;
- a node runs the task exactly as `ooda run` would (its own backend and model, the same
  options), then returns the run directory as a tar, which the driver unpacks into
  `tasks/<task_id>/` and scores (records.run_record) before appending its one line;
- a node that dies mid-task (the Ray error is not the task's own) is an infrastructure
  failure: one line says so ("node ... lost; task T submitted again, attempt 2 of 3") and the
  task is submitted again, on whatever node is left, up to `NODE_RETRIES` times, then
  recorded as status "error" (`--resume --retry-errors` runs it again). Only the final
  outcome is recorded, so a task is never counted twice; its record counts the times it was
  submitted again (`resubmitted`). The lost attempt's partial run directory stayed on the
  dead node and is never fetched: `tasks/<task_id>/` is the finishing attempt's, whole;
- a model endpoint that refuses every request (a wrong model name or key) stops the
  evaluation at the first task that meets it, as the local executor does;
- Ray's own output (its loggers, the error messages its control service sends drivers, its
  core worker's lines) goes to `ray.log` in the evaluation directory, never to the terminal.
- the model's concurrency limit is one for the whole cluster: a Ray actor (`_Permits`) hands
  out request permits; a dead node's permits are returned by the driver.

Ray is an optional extra (`pip install 'ooda[ray]'`) imported here only, inside functions.
Nodes take tasks when they offer the custom resource `SANDBOX_RESOURCE` (`ray start
--resources '{"ooda_sandbox": K}'`: K tasks at a time on that node); see docs/SCALE.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import logging
import os
import pickle
import re
import socket
import sys
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ooda.agent.app.evaluate.records import error_record, remove_path, run_record
from ooda.agent.app.evaluate.refs import TaskRef
from ooda.agent.app.run import RunOptions, run_task
from ooda.agent.app.source import open_source
from ooda.agent.contracts.errors import EndpointRefused, InfraError, UsageError
from ooda.agent.contracts.protocols import Completion, Model
from ooda.agent.core.records import RunSummary
from ooda.agent.core.sources import model_of
from ooda.agent.sandbox.registry import open_backend
from ooda.agent.support.phases import Timeline
from ooda.agent.support.tarsafe import extract_all
from ooda.agent.support.text import one_line
from ooda.tasks.loader import Task

SANDBOX_RESOURCE = "ooda_sandbox"
"""The custom Ray resource a node offers when it can run sandboxes (Docker or bwrap)."""

NODE_RETRIES = 2
"""Times a task cut off by a dead node is submitted again before it is recorded as an error."""

SLOTS_CHECK_S = 5.0
"""How often the driver asks, while tasks are pending, whether any node still offers the
sandbox resource."""

RAY_LOG_FILE = "ray.log"
"""Ray's own output during an evaluation, in the evaluation directory."""

EXTRA_HINT = "--executor ray needs the ray extra: pip install 'ooda[ray]'"


def _ray() -> Any:
    """The ray module, imported on first use (typed Any: the extra may be absent)."""
    return importlib.import_module("ray")


def check_available() -> None:
    """UsageError (exit 2) naming the extra when Ray is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise UsageError(EXTRA_HINT)


# --------------------------------------------------------------------------- task transport


def pack_task(task: Task) -> bytes:
    """The task as bytes: a tar of its files and the Task pickled with relative paths."""
    files = {"repo": task.repo, "requirements.txt": task.requirements,
             "replay.jsonl": task.replay}
    relative = dataclasses.replace(
        task, repo=Path("repo"), root=None,
        requirements=Path("requirements.txt") if task.requirements else None,
        replay=Path("replay.jsonl") if task.replay else None,
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for name, path in files.items():
            if path is not None:
                tar.add(str(path), arcname=name)
        data = pickle.dumps(relative)
        info = tarfile.TarInfo("task.pickle")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack_task(data: bytes, where: Path) -> Task:
    """The task `pack_task` packed, its files under `where`."""
    _extract(data, where)
    task: Task = pickle.loads((where / "task.pickle").read_bytes())
    return dataclasses.replace(
        task, repo=where / task.repo, root=where,
        requirements=where / task.requirements if task.requirements else None,
        replay=where / task.replay if task.replay else None,
    )


def tar_dir(path: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(str(path), arcname=".")
    return buffer.getvalue()


def _extract(data: bytes, where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        extract_all(tar, where)  # no absolute paths, links or devices out of it


# --------------------------------------------------------------------------- on a node


@dataclasses.dataclass
class NodeOutcome:
    """What a node sends back for one task."""

    status: str
    """The run's status, or "error" when it could not run."""
    summary: dict[str, Any]
    reason: str
    wall_s: float
    run_dir: bytes | None
    """The run directory as a gzipped tar (None when none was made)."""
    node: str
    refused: bool = False
    """The model's endpoint refused the task's requests (EndpointRefused): every task would
    meet it, so the evaluation stops."""


def run_on_node(task_data: bytes, options: RunOptions, run_id: str, permits: Any,
                events: Any, sandbox: str | None) -> NodeOutcome:
    """The body of the Ray task: run one task here, return its run directory as bytes."""
    ray = _ray()
    started = time.monotonic()
    node = ray.get_runtime_context().get_node_id()
    events.push.remote("started", run_id, node)
    with tempfile.TemporaryDirectory(prefix="ooda-ray-") as tmp:
        runs_dir = Path(tmp) / "runs"
        options = options.replace(runs_dir=runs_dir)
        try:
            task = unpack_task(task_data, Path(tmp) / "task")
            with contextlib.ExitStack() as stack:
                # another node's containers may share this engine: leave leftovers alone
                backend = open_backend(sandbox, clean_leftovers=False)
                stack.callback(backend.close)
                source = stack.enter_context(open_source(options.model, task))
                model = model_of(source)  # its requests hold the cluster's permits
                limited = source if model is None else _Limited(model, permits, run_id)
                result, log = run_task(task, options, console=None, show_progress=False,
                                       model=limited, backend=backend, run_id=run_id,
                                       timeline=Timeline(start=started))
            return NodeOutcome(str(result.status), result.summary.to_json(), "",
                               time.monotonic() - started, tar_dir(Path(log.dir)), node)
        except EndpointRefused as exc:
            return NodeOutcome("error", {}, one_line(exc), time.monotonic() - started, None,
                               node, refused=True)
        except (InfraError, UsageError) as exc:
            reason = one_line(exc)
        except Exception as exc:  # a bug in one task's run must not sink the evaluation
            reason = f"internal error: {type(exc).__name__}: {one_line(exc)}"
        run_dir = runs_dir / run_id
        return NodeOutcome("error", {}, reason, time.monotonic() - started,
                           tar_dir(run_dir) if run_dir.is_dir() else None, node)


class _Limited:
    """A model whose requests each hold one of the cluster's permits."""

    def __init__(self, model: Model, permits: Any, holder: str) -> None:
        self.name = model.name
        self._model = model
        self._permits = permits
        self._holder = holder

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        _ray().get(self._permits.acquire.remote(self._holder))
        try:
            return self._model.complete(messages, deadline=deadline, on_text=on_text)
        finally:
            self._permits.release.remote(self._holder)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class _Permits:
    """The model endpoint's concurrency limit for the whole cluster (a Ray actor)."""

    def __init__(self, limit: int) -> None:
        import asyncio

        self._free = asyncio.Semaphore(limit)
        self._held: dict[str, int] = {}

    async def acquire(self, holder: str) -> None:
        await self._free.acquire()
        self._held[holder] = self._held.get(holder, 0) + 1

    def release(self, holder: str) -> None:
        if self._held.get(holder, 0) > 0:
            self._held[holder] -= 1
            self._free.release()

    def release_all(self, holder: str) -> None:
        """Return the permits of a task whose node died holding them."""
        for _ in range(self._held.pop(holder, 0)):
            self._free.release()

    def in_use(self) -> int:
        return sum(self._held.values())


class _Events:
    """Task events from the nodes for the driver's live display (a Ray actor)."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, str]] = []

    def push(self, kind: str, task_id: str, node: str) -> None:
        self._events.append((kind, task_id, node))

    def drain(self) -> list[tuple[str, str, str]]:
        events, self._events = self._events, []
        return events


def _node_in(message: str) -> tuple[str | None, str | None]:
    """The node ID and IP a Ray error names ("Node IP: 10.0.0.7, node ID: 1d2b..."), if any."""
    node_id = re.search(r"node ID: ([0-9a-f]{8,})", message)
    address = re.search(r"Node IP: ([^\s,]+)", message)
    return (node_id.group(1) if node_id else None, address.group(1) if address else None)


# --------------------------------------------------------------------------- the driver


@dataclasses.dataclass(frozen=True)
class _Pending:
    """A task submitted to the cluster and not finished yet."""

    ref: TaskRef
    data: Any
    """The packed task's object reference (kept for a retry)."""
    tries: int
    """Times it was submitted again after its node was lost."""
    started: float


class RayCluster:
    """A connection to a Ray cluster that runs an evaluation's tasks."""

    def __init__(self, ray: Any, concurrency: int, requests: int, sandbox: str | None) -> None:
        self._ray = ray
        self._concurrency = concurrency
        self._sandbox = sandbox
        self._node_of: dict[str, str] = {}
        """The node each task last started on (from the nodes' events)."""
        self._slots_gone = False
        """No node offers the sandbox resource now (said once, until one does again)."""
        self._next_slots_check = 0.0
        self._remote = ray.remote(run_on_node).options(
            num_cpus=0, resources={SANDBOX_RESOURCE: 1}, max_retries=0)
        strategies = importlib.import_module("ray.util.scheduling_strategies")
        # the permits and events live with the driver: a worker node's death must not take
        # them along (with soft affinity Ray may place them anywhere)
        here = ray.get_runtime_context().get_node_id()
        strategy = strategies.NodeAffinitySchedulingStrategy(here, soft=False)
        self.permits = ray.remote(_Permits).options(
            num_cpus=0, scheduling_strategy=strategy).remote(requests)
        self.events = ray.remote(_Events).options(
            num_cpus=0, scheduling_strategy=strategy).remote()

    def run(self, todo: Sequence[TaskRef], options: RunOptions, eval_dir: Path,
            record: Callable[[dict[str, Any]], None],
            on_start: Callable[[str], None] = lambda task_id: None,
            say: Callable[[str], None] = lambda line: None) -> None:
        """Run `todo` on the cluster, `concurrency` at a time; `record` gets each task's
        results.jsonl record, in the order they finish, `on_start` each task id as a node
        begins it (the live display) and `say` one line per task cut off by a lost node, all
        on this thread. Raises EndpointRefused when the model's endpoint refuses a task (the
        tasks still running are cancelled)."""
        queue = deque(todo)
        pending: dict[Any, _Pending] = {}
        try:
            while queue or pending:
                while queue and len(pending) < self._concurrency:
                    self._send(queue.popleft(), options, eval_dir, pending, record)
                if not pending:
                    continue
                done, _ = self._ray.wait(list(pending), num_returns=1, timeout=0.5)
                if not done:
                    self._watch_slots(len(pending) + len(queue), say)
                for kind, task_id, node in self._events():
                    if kind == "started":
                        self._node_of[task_id] = node
                        on_start(task_id)
                for future in done:
                    outcome = self._collect(future, pending, options, eval_dir, say)
                    if outcome is not None:
                        record(outcome)
        finally:
            for future in pending:  # stopped early: nothing more runs for this evaluation
                with contextlib.suppress(Exception):
                    self._ray.cancel(future)

    def _events(self) -> list[tuple[str, str, str]]:
        """The nodes' events since the last call (none when they cannot be had: they only
        feed the display)."""
        try:
            events: list[tuple[str, str, str]] = self._ray.get(self.events.drain.remote())
        except self._ray.exceptions.RayError:
            return []
        return events

    def _send(self, ref: TaskRef, options: RunOptions, eval_dir: Path,
              pending: dict[Any, _Pending], record: Callable[[dict[str, Any]], None]) -> None:
        """Pack the task into the object store and submit it (a task that cannot be loaded
        is recorded as an error at once)."""
        started = time.monotonic()
        try:
            data = self._ray.put(pack_task(ref.load()))
        except (InfraError, UsageError, OSError) as exc:
            record(error_record(ref.id, one_line(exc), time.monotonic() - started,
                                eval_dir / "tasks" / ref.id, eval_dir))
            return
        finally:
            with contextlib.suppress(Exception):
                ref.release()
        pending[self._submit(data, options, ref.id)] = _Pending(ref, data, 0, started)

    def _collect(self, future: Any, pending: dict[Any, _Pending], options: RunOptions,
                 eval_dir: Path, say: Callable[[str], None]) -> dict[str, Any] | None:
        """The record of a finished Ray task, or None when it was submitted again."""
        ray = self._ray
        job = pending.pop(future)
        task_id = job.ref.id
        try:
            outcome: NodeOutcome = ray.get(future)
        except ray.exceptions.RayTaskError as exc:  # run_on_node itself failed
            reason = f"internal error: {one_line(exc)[:300]}"
        except ray.exceptions.RayError as exc:  # the node (or its worker process) died
            self.permits.release_all.remote(task_id)
            lost = self._lost(task_id, exc)
            attempts = NODE_RETRIES + 1
            if job.tries < NODE_RETRIES:
                say(f"{lost}; task {task_id} submitted again, attempt {job.tries + 2} of "
                    f"{attempts}")
                retry = self._submit(job.data, options, task_id)
                pending[retry] = dataclasses.replace(job, tries=job.tries + 1)
                return None
            say(f"{lost}; task {task_id} recorded as an infrastructure error after "
                f"{attempts} attempts (--resume --retry-errors runs it again)")
            reason = (f"infrastructure: cut off by a lost Ray node at each of its {attempts} "
                      f"attempts, the last: {lost} ({type(exc).__name__}: "
                      f"{one_line(exc)[:200]})")
        else:
            if outcome.refused:  # a wrong model name or key: every task would meet it
                raise EndpointRefused(outcome.reason)
            return {**self._record(task_id, outcome, eval_dir), "resubmitted": job.tries}
        return {**error_record(task_id, reason, time.monotonic() - job.started,
                               eval_dir / "tasks" / task_id, eval_dir),
                "resubmitted": job.tries}

    def _watch_slots(self, waiting: int, say: Callable[[str], None]) -> None:
        """Say when the last node offering the sandbox resource is gone (the tasks wait for
        one: Ray schedules them when a node joins) and when one is back; asked every
        `SLOTS_CHECK_S` seconds while tasks are pending."""
        now = time.monotonic()
        if now < self._next_slots_check:
            return
        self._next_slots_check = now + SLOTS_CHECK_S
        try:
            offered = self._ray.cluster_resources().get(SANDBOX_RESOURCE, 0)
        except Exception:  # only for what is said
            return
        if not offered and not self._slots_gone:
            say(f"no node of the cluster offers the {SANDBOX_RESOURCE!r} resource now: "
                f"{waiting} task(s) wait for one (start a node with --resources "
                f"'{{\"{SANDBOX_RESOURCE}\": 1}}'; Ctrl-C stops, --resume continues)")
        elif offered and self._slots_gone:
            say(f"a node offers {SANDBOX_RESOURCE!r} again: the waiting tasks run")
        self._slots_gone = not offered

    def _lost(self, task_id: str, exc: Exception) -> str:
        """What cut the task off, said for one line: "node 1a2b3c4d at 10.0.0.7 lost"."""
        node_id, address = _node_in(str(exc))  # Ray's NodeDiedError names the node
        node = None
        node_id = node_id or self._node_of.get(task_id)  # else: the node it started on
        with contextlib.suppress(Exception):  # only for the wording
            node = next((n for n in self._ray.nodes() if n.get("NodeID") == node_id), None)
        address = address or (node or {}).get("NodeManagerAddress")
        name = f"node {node_id[:8]} at {address or '?'}" if node_id else "its node"
        if isinstance(exc, self._ray.exceptions.NodeDiedError) or (node and not node["Alive"]):
            return f"{name} lost"
        if isinstance(exc, self._ray.exceptions.OutOfMemoryError):
            return f"Ray stopped it on {name} for want of memory"
        return f"its Ray worker on {name} died ({type(exc).__name__})"

    def _submit(self, data: Any, options: RunOptions, run_id: str) -> Any:
        return self._remote.remote(data, options, run_id, self.permits, self.events,
                                   self._sandbox)

    @staticmethod
    def _record(task_id: str, outcome: NodeOutcome, eval_dir: Path) -> dict[str, Any]:
        run_dir = eval_dir / "tasks" / task_id
        remove_path(run_dir)
        if outcome.run_dir is not None:
            _extract(outcome.run_dir, run_dir)
        if outcome.status == "error" and outcome.reason:
            return error_record(task_id, outcome.reason, outcome.wall_s, run_dir, eval_dir)
        return run_record(task_id, outcome.status, RunSummary.from_json(outcome.summary),
                          run_dir, eval_dir)


@contextlib.contextmanager
def connect(address: str | None, *, concurrency: int, requests: int,
            sandbox: str | None, log_dir: Path) -> Iterator[RayCluster]:
    """Connect to the cluster at `address` (None: $RAY_ADDRESS, else a running local one)
    for the `with` block, Ray's own output going to `log_dir`/ray.log. No cluster there:
    InfraError; no node with a sandbox: UsageError."""
    check_available()
    address = address or os.environ.get("RAY_ADDRESS") or "auto"
    _check_reachable(address)
    log_path = log_dir / RAY_LOG_FILE
    with ray_output_to(log_path):
        ray = _ray()
        try:
            ray.init(address=address, logging_level=logging.INFO, log_to_driver=False,
                     configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InfraError(f"--executor ray: no Ray cluster at {address}: "
                             f"{one_line(exc)[:200]} (start one with `ray start --head`; "
                             f"Ray's log: {log_path})") from exc
        try:
            offered = ray.cluster_resources().get(SANDBOX_RESOURCE, 0)
            if not offered:
                raise UsageError(
                    f"--executor ray: no node of the cluster offers the {SANDBOX_RESOURCE!r} "
                    f"resource (start nodes with --resources '{{\"{SANDBOX_RESOURCE}\": 1}}')")
            yield RayCluster(ray, concurrency, requests, sandbox)
        finally:
            ray.shutdown()


@contextlib.contextmanager
def ray_output_to(log_path: Path) -> Iterator[None]:
    """For the block, whatever Ray writes in this process goes to `log_path`, and ooda's own
    stderr (`sys.stderr`: the live display, its lines) still reaches the terminal.

    Ray writes from several places that `log_to_driver=False` does not cover: its Python
    loggers, a thread that prints the error messages its control service publishes to
    drivers ("node ... has been marked dead ...") on `sys.stdout`, and the core worker's C++
    code writing to file descriptor 2. So: the "ray" loggers get a handler on the log and
    stop propagating; file descriptors 1 and 2 point at the log; `sys.stderr` is a new
    stream on a copy of the original descriptor 2. ooda writes nothing on stdout until the
    evaluation has ended (its --json summary is printed after this block)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - closed below
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    terminal = open(saved[2], "w", buffering=1, encoding=encoding,  # noqa: SIM115
                    errors="backslashreplace", closefd=False)
    text = io.TextIOWrapper(log, encoding="utf-8", errors="backslashreplace",
                            line_buffering=True, write_through=True)
    handler = logging.StreamHandler(text)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in ("ray", "ray.data", "ray.tune",
                                                    "ray.rllib", "ray.train", "ray.serve")]
    before = [(lg.handlers[:], lg.propagate, lg.level) for lg in loggers]
    stderr = sys.stderr
    try:
        for lg in loggers:
            lg.handlers[:] = [handler]
            lg.propagate = False
        logging.getLogger("ray").setLevel(logging.INFO)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        sys.stderr = terminal
        yield
    finally:
        for stream in (sys.stdout, terminal):  # Ray's buffered text to the log, ours out
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stderr = stderr
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        for lg, (handlers, propagate, level) in zip(loggers, before, strict=True):
            lg.handlers[:] = handlers
            lg.propagate = propagate
            lg.setLevel(level)
        with contextlib.suppress(Exception):
            text.close()  # closes `log` too


def _check_reachable(address: str) -> None:
    """InfraError at once when a host:port address does not answer (ray.init would retry
    for minutes)."""
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return  # "auto", ray:// (Ray Client): left to ray.init
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise InfraError(f"--executor ray: no Ray cluster answers at {address} "
                         f"({exc.strerror or exc}); start one with `ray start --head`") from exc
