"""`ooda eval TASKSET --predictions FILE`: another system's predictions judged as the
SWE-bench harness judges them, in ooda's environments.

Each prediction (`instance_id`, `model_name_or_path`, `model_patch`: the harness's format, a
`.jsonl` or a `.json` list) is verified once in its task's environment under the "harness"
rule (agent/verify/harness_apply.py: `git apply`, then `patch --fuzz=5`; edits to any file
applied; the test patch's files put back and the test patch laid over them), not the strict
edit policy of ooda's own loop. The evaluation directory holds ooda's records
(`results.jsonl`, one per instance, and `summary.json`) and the harness's report format beside
them (harness_report.py). Instances of the task set without a prediction are left out, as the
harness leaves them out; a prediction for an instance not in the task set is said and skipped.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ooda.agent.app.evaluate.harness_report import instance_report, run_report
from ooda.agent.app.evaluate.lock import evaluation_lock
from ooda.agent.app.evaluate.options import EvalOptions
from ooda.agent.app.evaluate.refs import TaskRef, load_refs
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import SandboxBackend, Verdict
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task
from ooda.verifiers.pytest_check import NodeIndex, match_id

Status = Literal["resolved", "unresolved", "empty_patch", "error"]
INFRA_RETRY_WAIT_S = 30.0
"""How long before a prediction whose sandbox or engine broke is verified once more."""


@dataclass(frozen=True)
class Prediction:
    """One line of a predictions file."""

    instance_id: str
    model: str
    patch: str | None


@dataclass
class Judgement:
    """ooda's record of one prediction (a line of results.jsonl)."""

    instance_id: str
    model: str
    status: Status
    reason: str = ""
    applied: str | None = None
    """"git apply" or "patch --fuzz=5"; None when it did not apply (or was empty)."""
    tests: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """FAIL_TO_PASS / PASS_TO_PASS -> success / failure: the listed ids, graded."""
    wall_s: float = 0.0


def read_predictions(path: Path) -> list[Prediction]:
    """The predictions of `path` (`.jsonl`, or `.json` holding a list or an object keyed by
    instance_id); UsageError naming the line of the first bad one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UsageError(f"--predictions {path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--predictions {path}: cannot read: {exc}") from exc
    rows: list[tuple[str, Any]] = []
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}: not JSON: {exc.msg}") from exc
        items = list(data.values()) if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise UsageError(f"{path}: expected a list of predictions")
        rows = [(f"{path}[{i}]", row) for i, row in enumerate(items)]
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((f"{path}:{lineno}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{path}:{lineno}: not JSON: {exc.msg}") from exc
    predictions: dict[str, Prediction] = {}
    for where, row in rows:
        prediction = _prediction(row, where)
        if prediction.instance_id in predictions:
            raise UsageError(f"{where}: a second prediction for {prediction.instance_id}")
        predictions[prediction.instance_id] = prediction
    if not predictions:
        raise UsageError(f"--predictions {path}: no predictions")
    return list(predictions.values())


def _prediction(row: object, where: str) -> Prediction:
    if not isinstance(row, dict):
        raise UsageError(f"{where}: expected an object with instance_id and model_patch")
    instance_id, patch = row.get("instance_id"), row.get("model_patch")
    if not isinstance(instance_id, str) or not instance_id:
        raise UsageError(f"{where}: 'instance_id' must be a non-empty string")
    if patch is not None and not isinstance(patch, str):
        raise UsageError(f"{where}: 'model_patch' must be a string (or null)")
    return Prediction(instance_id, str(row.get("model_name_or_path") or "model"), patch)


@dataclass
class PredictionsOutcome:
    """What the command prints: the summary and where the files are."""

    summary: dict[str, Any]
    eval_dir: Path
    not_in_taskset: list[str]


def judge_predictions(options: EvalOptions, predictions_file: Path,
                      backend_for: Callable[[], SandboxBackend],
                      report: Callable[[Judgement], None] = lambda _j: None,
                      ) -> PredictionsOutcome:
    """Judge every prediction of `predictions_file` whose instance is in the task set."""
    predictions = {p.instance_id: p for p in read_predictions(predictions_file)}
    eval_id = options.eval_id or f"{predictions_file.stem}-harness"
    eval_dir = options.run.runs_dir / eval_id
    with evaluation_lock(eval_dir, eval_id):
        return _judge_all(options, predictions, eval_id, eval_dir, backend_for, report)


def _judge_all(options: EvalOptions, predictions: dict[str, Prediction], eval_id: str,
               eval_dir: Path, backend_for: Callable[[], SandboxBackend],
               report: Callable[[Judgement], None]) -> PredictionsOutcome:
    """`judge_predictions` with the directory's lock held."""
    refs = load_refs(options, eval_dir / ".work")
    ids = {r.id for r in refs}
    chosen = [r for r in refs if r.id in predictions]
    outside = sorted(set(predictions) - ids) if not options.only else []
    results_path = eval_dir / "results.jsonl"
    results_path.write_text("", encoding="utf-8")
    lock = threading.Lock()
    judgements: list[Judgement] = []
    backend = backend_for()
    started = time.monotonic()

    def one(ref: TaskRef) -> None:
        judgement = judge_one(ref, predictions[ref.id], backend, eval_dir)
        with lock:
            judgements.append(judgement)
            with results_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(asdict(judgement)) + "\n")
            _write_instance_report(eval_dir, eval_id, judgement)
        report(judgement)

    try:
        with ThreadPoolExecutor(max_workers=options.concurrency) as pool:
            for future in [pool.submit(one, ref) for ref in chosen]:
                future.result()
    finally:
        backend.close()
    summary = _summary(judgements, len(refs), time.monotonic() - started)
    (eval_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n",
                                           encoding="utf-8")
    model = next(iter(predictions.values())).model
    harness = run_report([asdict(j) for j in judgements], [r.id for r in refs],
                         sorted(set(predictions) & ids))
    name = f"{model.replace('/', '__')}.{eval_id}.json"
    (eval_dir / name).write_text(json.dumps(harness, indent=4) + "\n", encoding="utf-8")
    return PredictionsOutcome(summary, eval_dir, outside)


def judge_one(ref: TaskRef, prediction: Prediction, backend: SandboxBackend,
              eval_dir: Path) -> Judgement:
    """One prediction, verified once in its task's environment under the harness rule."""
    started = time.monotonic()
    judgement = Judgement(ref.id, prediction.model, "empty_patch", "the prediction is empty")
    try:
        if prediction.patch and prediction.patch.strip():
            task = ref.load()
            try:
                judgement = _verify(task, prediction, backend, eval_dir / "logs" / ref.id)
            except (InfraError, OSError):  # the sandbox or the engine broke: once more
                time.sleep(INFRA_RETRY_WAIT_S)
                judgement = _verify(task, prediction, backend, eval_dir / "logs" / ref.id)
    except (InfraError, UsageError, OSError) as exc:
        judgement = Judgement(ref.id, prediction.model, "error", _line(exc))
    except Exception as exc:  # noqa: BLE001 -- one prediction's failure never sinks the run
        judgement = Judgement(ref.id, prediction.model, "error",
                              f"internal error: {type(exc).__name__}: {_line(exc)}")
    finally:
        ref.release()
    judgement.wall_s = round(time.monotonic() - started, 2)
    return judgement


def _verify(task: Task, prediction: Prediction, backend: SandboxBackend,
            log_dir: Path) -> Judgement:
    assert prediction.patch is not None
    with tempfile.TemporaryDirectory(prefix="ooda-predictions-") as work:
        verifier = TaskVerifier(task, backend, Path(work), concurrency=1, apply_rule="harness")
        try:
            verdict = verifier.verify(prediction.patch, log_dir=log_dir)
            applied = verifier.applied_by or None
        finally:
            verifier.close()
    status: Status = "resolved" if verdict.status == "passed" else "unresolved"
    if verdict.status == "error":
        status = "error"
    return Judgement(task.id, prediction.model, status,
                     "" if status == "resolved" else verdict.reason,
                     applied if verdict.status != "invalid_edit" else None,
                     graded_tests(task, verdict))


def graded_tests(task: Task, verdict: Verdict) -> dict[str, dict[str, list[str]]]:
    """FAIL_TO_PASS and PASS_TO_PASS split into the ids that passed and those that did not."""
    outcomes: dict[str, str] = {}
    for result in verdict.results:
        found = result.details.get("outcomes")
        if isinstance(found, dict):
            outcomes.update({str(k): str(v) for k, v in found.items()})
    graded: dict[str, dict[str, list[str]]] = {}
    for key, ids in (("FAIL_TO_PASS", task.fail_to_pass), ("PASS_TO_PASS", task.pass_to_pass)):
        listed = [*task.fail_to_pass, *task.pass_to_pass]
        run = NodeIndex(outcomes)
        passed = [i for i in ids if (nodes := match_id(i, run, listed))
                  and all(outcomes[n] == "passed" for n in nodes)]
        graded[key] = {"success": passed, "failure": [i for i in ids if i not in passed]}
    return graded


def _write_instance_report(eval_dir: Path, eval_id: str, judgement: Judgement) -> None:
    where = eval_dir / "logs" / judgement.instance_id
    where.mkdir(parents=True, exist_ok=True)
    (where / "report.json").write_text(
        json.dumps(instance_report(asdict(judgement)), indent=4) + "\n", encoding="utf-8")


def _summary(judgements: list[Judgement], total: int, wall_s: float) -> dict[str, Any]:
    count = {s: sum(1 for j in judgements if j.status == s)
             for s in ("resolved", "unresolved", "empty_patch", "error")}
    return {
        "rule": "harness",
        "instances": total,
        "predictions_judged": len(judgements),
        **count,
        "applied_with_fuzz": sum(1 for j in judgements if (j.applied or "").startswith("patch")),
        "not_applied": sum(1 for j in judgements if j.status == "unresolved" and not j.applied),
        "wall_s": round(wall_s, 1),
    }


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
