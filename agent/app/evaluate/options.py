"""What `ooda eval` is told (EvalOptions), the options that change results, and the
evaluation directory's file names and default id."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ooda.agent.contracts.errors import OptionError, UsageError

if TYPE_CHECKING:
    from ooda.agent.app.run import RunOptions


EVAL_FILE = "eval.json"


RESULTS_FILE = "results.jsonl"


SUMMARY_FILE = "summary.json"


PREDICTIONS_FILE = "predictions.jsonl"


TASKS_DIR = "tasks"


WORK_DIR = ".work"
"""Scratch space for repos exported from SWE-bench clones while their task runs."""


@dataclass
class EvalOptions:
    """Everything `ooda eval` is told."""

    taskset: Path
    """A directory of task directories, or a SWE-bench `.jsonl`."""
    run: RunOptions
    """Per-task options; `run.runs_dir` is where the evaluation directory goes."""
    concurrency: int = 1
    """Tasks run at once."""
    requests: int | None = None
    """Model requests in flight at once, across all tasks (None: samples x concurrency,
    at most 64)."""
    eval_id: str | None = None
    """Name of the evaluation directory (default: derived from the task set, model, options)."""
    resume: bool = False
    """Continue the evaluation in an existing directory."""
    retry_errors: bool = False
    """With resume: run the tasks that ended in an infrastructure error again."""
    repos_dir: Path | None = None
    """SWE-bench: directory of local clones named owner__name."""
    only: list[str] | None = None
    """Run only these task ids."""
    executor: str = "local"
    """Where tasks run: "local" (threads in this process) or "ray" (a Ray cluster)."""
    ray_address: str | None = None
    """--executor ray: the cluster's address (None: $RAY_ADDRESS, else a local one)."""

    def validate(self) -> None:
        """Reject impossible values with a one-line UsageError."""
        if self.concurrency < 1:
            raise OptionError("--concurrency",
                              f"--concurrency must be at least 1 (got {self.concurrency})")
        if self.requests is not None and self.requests < 1:
            raise OptionError("--requests", f"--requests must be at least 1 (got {self.requests})")
        if self.executor not in ("local", "ray"):
            raise UsageError(f"--executor {self.executor!r}: choose local or ray")
        if self.ray_address is not None and self.executor != "ray":
            raise UsageError("--ray-address only makes sense with --executor ray")
        if self.retry_errors and not self.resume:
            raise UsageError("--retry-errors only makes sense with --resume")
        if self.eval_id is not None and not _SAFE_ID.match(self.eval_id):
            raise UsageError(
                f"--eval-id {self.eval_id!r}: use letters, digits and . _ - "
                "(starting with a letter or digit)"
            )
        self.run.checked()

    def checked(self) -> EvalOptions:
        """These options checked (UsageError, one line), `--model FAST,STRONG` read as two."""
        self.validate()
        return dataclasses.replace(self, run=self.run.checked())

    def model_requests(self) -> int:
        if self.requests is not None:
            return self.requests
        return max(1, min(64, self.run.loop.samples * self.concurrency))


_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def result_options(run: RunOptions) -> dict[str, Any]:
    """The options that change results (declared so in agent/contracts/options.py), as plain
    JSON values: they go into the default eval id's hash and are checked when resuming."""
    return run.results()


def fingerprint(options: EvalOptions) -> dict[str, Any]:
    """What identifies an evaluation: the task set (absolute path), the task filter and the
    options that change results. Concurrency, sandbox and prices are left out."""
    return {
        "taskset": str(options.taskset.resolve()),
        "only": sorted(options.only) if options.only else None,
        **result_options(options.run),
    }


def default_eval_id(options: EvalOptions) -> str:
    """`<taskset name>-<model>-<8 hex digits>`: the same command gives the same id."""
    digest = hashlib.sha256(
        json.dumps(fingerprint(options), sort_keys=True).encode()
    ).hexdigest()[:8]
    name = options.taskset.name
    if name.endswith(".jsonl"):
        name = name[: -len(".jsonl")]
    return f"{_slug(name)}-{_slug(options.run.model.name or 'model')}-{digest}"


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:40]
    return slug or "x"

