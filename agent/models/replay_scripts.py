"""The scripted answers the bundled endpoint replays: `replay.jsonl` files, one answer a line
(`{"answer": "...", "round": 1, "contains": "substr", "task": "id", "model": "strong",
"kind": "reproduction"}`, all but `answer` optional; `task` defaults to the id of the directory
the file is in; a line with a `model` is served only to requests for that model, one without to
any model; a line of `"kind": "reproduction"` answers only a blind run's reproduction-test
requests, and only such lines answer them; `"kind": "critic"` likewise for a blind run's critic
requests).

Read and checked here, once, with one clear line for each bad line (UsageError).
"""

from __future__ import annotations

import json
import sys
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.contracts.errors import UsageError


@dataclass(frozen=True)
class Script:
    """One scripted answer."""

    task: str
    """The task it answers."""
    answer: str
    """The completion text served."""
    round: int | None = None
    """Serve only in this round (number of user messages); None: any round."""
    contains: str | None = None
    """Serve only when the last user message contains this text; None: always."""
    model: str | None = None
    """Serve only to requests naming this model; None: to any."""
    kind: str | None = None
    """"reproduction" / "critic": serve only to reproduction-test (REPRO_REQUEST_LINE) / critic
    (CRITIC_REQUEST_LINE) requests; None: only to the others."""


def _dir_task_id(directory: Path) -> str:
    """The id of the task directory: `id` in its task.toml when there is one, else its name."""
    toml = directory / "task.toml"
    if toml.is_file():
        try:
            task_id = tomllib.loads(toml.read_text(encoding="utf-8")).get("id")
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            task_id = None
        if isinstance(task_id, str) and task_id:
            return task_id
    return directory.resolve().name


def _load_file(path: Path) -> list[Script]:
    default_task = _dir_task_id(path.parent)
    scripts: list[Script] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"{where}: not valid JSON ({err.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
            raise UsageError(f'{where}: each line must be an object with an "answer" string')
        round_ = data.get("round")
        if round_ is not None and (not isinstance(round_, int) or isinstance(round_, bool)):
            raise UsageError(f'{where}: "round" must be an integer')
        contains = data.get("contains")
        if contains is not None and not isinstance(contains, str):
            raise UsageError(f'{where}: "contains" must be a string')
        model = data.get("model")
        if model is not None and (not isinstance(model, str) or not model):
            raise UsageError(f'{where}: "model" must be a non-empty string')
        kind = data.get("kind")
        if kind not in (None, "reproduction", "critic"):
            raise UsageError(f'{where}: "kind" must be "reproduction" or "critic" when given')
        task = data.get("task", default_task)
        if not isinstance(task, str) or not task:
            raise UsageError(f'{where}: "task" must be a non-empty string')
        scripts.append(Script(task, data["answer"], round_, contains, model, kind))
    return scripts


def load_scripts(paths: list[Path]) -> dict[str, list[Script]]:
    """Scripts by task id, from `replay.jsonl` files and directories searched for them."""
    by_task: dict[str, list[Script]] = {}
    for path in paths:
        if path.is_dir():
            files = sorted(path.rglob("replay.jsonl"))
        elif path.is_file():
            files = [path]
        else:
            raise UsageError(f"replay script path {path} does not exist")
        for file in files:
            for script in _load_file(file):
                by_task.setdefault(script.task, []).append(script)
    return by_task


class ScriptFiles:
    """The scripts of `paths`, read again when a replay.jsonl among them changed, appeared or
    went away (`ooda serve` keeps serving what the files say now, as a dev server reloads). A
    file that no longer reads is said on stderr; the scripts read last stay served."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self._stamp = self._stamp_now()
        self.scripts = load_scripts(paths)
        self._lock = threading.Lock()

    def current(self) -> dict[str, list[Script]]:
        """The scripts as the files say now (a few stat calls when nothing changed)."""
        stamp = self._stamp_now()
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self.scripts = load_scripts(self.paths)
                except UsageError as exc:
                    print(f"ooda serve: {exc}; still serving the scripts read before",
                          file=sys.stderr, flush=True)
                else:
                    print("ooda serve: a replay script changed: read again", file=sys.stderr,
                          flush=True)
            return self.scripts

    def _stamp_now(self) -> list[tuple[str, int, int]]:
        files: list[Path] = []
        for path in self.paths:
            files += sorted(path.rglob("replay.jsonl")) if path.is_dir() else [path]
        stamp = []
        for file in files:
            try:
                info = file.stat()
            except OSError:
                stamp.append((str(file), -1, -1))
                continue
            stamp.append((str(file), info.st_mtime_ns, info.st_size))
        return stamp
