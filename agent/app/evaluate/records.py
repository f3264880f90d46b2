"""The evaluation directory's files: results.jsonl records read and written, the summary,
SWE-bench predictions and the reports (also re-rendered by `ooda report`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ooda.agent.app import metrics, modelstats, report
from ooda.agent.app.evaluate.best import best_patch
from ooda.agent.app.evaluate.options import EVAL_FILE, PREDICTIONS_FILE, RESULTS_FILE, SUMMARY_FILE
from ooda.agent.contracts.errors import UsageError
from ooda.agent.core.records import AttemptRecord, RunSummary
from ooda.agent.core.runlog import read_attempts, read_summary, write_atomic, write_json_atomic
from ooda.agent.core.sources import source_kind
from ooda.agent.support import fstree


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a .jsonl file; a torn or corrupt line (a crash mid-write) is
    skipped, as is anything that is not an object with a task_id. Missing file: []."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("task_id"), str):
            records.append(record)
    return records


def latest_by_task(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One record per task id, the last one written winning (insertion order = first seen)."""
    by_task: dict[str, dict[str, Any]] = {}
    for record in records:
        by_task.pop(record["task_id"], None)
        by_task[record["task_id"]] = record
    return by_task


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class TaskResult:
    """One results.jsonl line: a task's outcome in an evaluation. A finished run's line and a
    task that could not be run (infrastructure, a bad task) have the same keys, the latter
    with empty values."""

    task_id: str
    status: str
    """resolved | unresolved | error."""
    reason: str
    last_reason: str = ""
    """The reason of the last candidate judged (what an unresolved task is shown with)."""
    attempts: int = 0
    rounds: int = 0
    n: int = 0
    c: int = 0
    time_to_first_pass_s: float | None = None
    tokens: dict[str, Any] = field(default_factory=lambda: {"prompt": 0, "completion": 0})
    last_failed_verifier: str | None = None
    edit_formats: dict[str, int] = field(default_factory=dict)
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    first_token_s: float = 0.0
    generation_s: float = 0.0
    verification_s: float = 0.0
    verifier_run_s: float = 0.0
    run_dir: str | None = None
    """The run's directory, relative to the evaluation's (None: none was made)."""
    models: dict[str, Any] = field(default_factory=dict)
    winner_model: str | None = None
    fail_to_pass_passing_before: list[str] = field(default_factory=list)
    protocol: str | None = None
    hidden_tests: bool = False
    oracle_coverage: bool = False
    submitted: str | None = None
    selection: str | None = None
    """Why the submitted candidate was chosen (a blind run)."""
    reproduction: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_record(task_id: str, status: str, summary: RunSummary, run_dir: Path,
               eval_dir: Path) -> dict[str, Any]:
    """The results.jsonl line of a finished run (status resolved | unresolved | error)."""
    attempts = read_attempts(run_dir)
    stats = metrics.attempt_stats(attempts)
    if summary.oracle is not None:  # blind: pass@k counts what the hidden tests said after
        stats.update(n=summary.oracle.n, c=summary.oracle.c)
    reproduction = summary.reproduction or {}
    return TaskResult(
        task_id=task_id,
        status={"passed": "resolved", "error": "error"}.get(status, "unresolved"),
        reason=summary.reason,
        last_reason=_last_reason(attempts),
        attempts=summary.attempts,
        rounds=summary.rounds_used,
        n=stats["n"],
        c=stats["c"],
        time_to_first_pass_s=summary.time_to_first_pass_s,
        tokens={**summary.tokens.to_json(),
                "estimated": summary.tokens.estimated or stats["tokens_estimated"]},
        last_failed_verifier=stats["last_failed_verifier"],
        edit_formats=stats["edit_formats"],
        invalid_reasons=stats["invalid_reasons"],
        wall_s=summary.wall_s,
        first_token_s=stats["first_token_s"],
        generation_s=stats["generation_s"],
        verification_s=stats["verification_s"],
        verifier_run_s=stats["verifier_run_s"],
        run_dir=_relative(run_dir, eval_dir),
        models=summary.models,
        winner_model=summary.winner_model,
        fail_to_pass_passing_before=list(summary.fail_to_pass_passing_before),
        protocol=summary.protocol,
        hidden_tests=summary.hidden_tests,
        oracle_coverage=summary.oracle_coverage,
        submitted=summary.submitted,
        selection=(summary.selection or {}).get("why"),
        reproduction={k: reproduction.get(k, 0) for k in ("requested", "kept", "required")}
        if reproduction else None,
    ).to_json()


def _last_reason(attempts: list[AttemptRecord]) -> str:
    """The reason of the last candidate that was judged (failed, invalid, timed out): what
    the report and the console show for an unresolved task."""
    judged = [a for a in attempts if a.status not in ("passed", "cancelled", "pending")]
    return judged[-1].reason if judged else ""


def error_record(task_id: str, reason: str, wall_s: float, run_dir: Path,
                 eval_dir: Path) -> dict[str, Any]:
    """The results.jsonl line of a task that could not be run (infrastructure, bad task)."""
    return TaskResult(
        task_id, "error", reason, wall_s=round(wall_s, 3),
        run_dir=_relative(run_dir, eval_dir) if run_dir.exists() else None,
    ).to_json()


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


def build_summary(config: dict[str, Any], results: Sequence[dict[str, Any]],
                  wall_s: float, phases: dict[str, float] | None = None) -> dict[str, Any]:
    """summary.json from eval.json's `config` and the result records (pure); `phases`: where
    the evaluation's wall time went (agent/support/phases.py), adding up to `wall_s`."""
    task_ids = list(config.get("task_ids", []))
    order = {t: i for i, t in enumerate(task_ids)}
    results = sorted((r for r in results if r["task_id"] in order),
                     key=lambda r: order[r["task_id"]])
    options = config.get("options", {})
    figures = metrics.summarize(
        results,
        total=len(task_ids),
        samples=int(options.get("samples", 1)),
        price_prompt=config.get("price_prompt"),
        price_completion=config.get("price_completion"),
    )
    protocol = eval_protocol(options)
    coverage = sum(1 for r in results if r.get("oracle_coverage")
                   or (r.get("oracle_coverage") is None and r["status"] == "resolved"))
    summary: dict[str, Any] = {
        "eval_id": config.get("eval_id"),
        "taskset": config.get("taskset"),
        "protocol": protocol,
        "model": options.get("model"),
        "base_url": options.get("base_url"),
        "samples": options.get("samples"),
        "rounds": options.get("rounds"),
        "time_budget_s": options.get("time_budget_s"),
        "concurrency": config.get("concurrency"),
        "complete": figures["finished"] == len(task_ids),
        "total": figures.pop("total"),
        "resolved": figures.pop("resolved"),
        "resolved_rate": figures.pop("resolved_rate"),
        "oracle_coverage": coverage,
        "oracle_coverage_rate": round(coverage / len(task_ids), 6) if task_ids else 0.0,
        "hidden_test_tasks": sum(1 for r in results if r.get("hidden_tests")),
        "pass_at_k": figures.pop("pass_at_k"),
        "pass_at_k_kind": "oracle_coverage",
        "wall_s": round(wall_s, 3),
        "tasks_per_min": round(figures["finished"] / wall_s * 60, 3) if wall_s > 0 else None,
        "tokens": figures.pop("tokens"),
        **figures,
        # tasks submitted again after their Ray node was lost (the local executor: 0)
        "resubmitted": sum(int(r.get("resubmitted") or 0) for r in results),
    }
    if phases:
        summary["phases"] = phases
    models = modelstats.totals(results)
    if len(models) > 1:  # escalation: solved, tokens and cost per model
        summary["models"] = models
    if source_kind(options.get("model")).oracle:  # the gold patch: a failure is the harness's
        summary["gold_failures"] = [
            {"task_id": r["task_id"], "status": r["status"], "reason": r.get("reason", ""),
             "last_failed_verifier": r.get("last_failed_verifier")}
            for r in results if r["status"] != "resolved"
        ]
        summary["gold_base_problems"] = [
            {"task_id": r["task_id"], "fail_to_pass_passing_before": passing}
            for r in results if (passing := r.get("fail_to_pass_passing_before"))
        ]
    return summary


def eval_protocol(options: dict[str, Any]) -> str:
    """The protocol of an evaluation from eval.json's options: oracle when asked for (or for
    the gold patch, or for an evaluation made before protocols existed: its loop saw the
    hidden tests), else blind."""
    if ("oracle" not in options or options.get("oracle")
            or source_kind(options.get("model")).oracle):
        return "oracle"
    return "blind"


def predictions(config: dict[str, Any], results: Sequence[dict[str, Any]],
                patch_of: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    """SWE-bench predictions for the finished tasks, in task-set order: the patch ooda
    submits (blind: the one its selection chose; else the winning patch, or for an unresolved
    task the best candidate's, best.py), with `ooda_resolved` (did the hidden tests pass it)
    and `ooda_protocol` (blind or oracle: which kind of number it is)."""
    by_task = {r["task_id"]: r for r in results}
    options = config.get("options", {})
    model = str(options.get("model") or "")
    protocol = eval_protocol(options)
    return [
        {
            "instance_id": task_id,
            "model_name_or_path": model,
            "model_patch": patch_of(by_task[task_id]),
            "ooda_resolved": by_task[task_id]["status"] == "resolved",
            "ooda_protocol": protocol,
        }
        for task_id in config.get("task_ids", [])
        if task_id in by_task
    ]


def patch_in(eval_dir: Path) -> Callable[[dict[str, Any]], str]:
    """Reads a result's final.diff from its run directory, else the patch a blind run
    submitted (submitted.diff), else (unresolved) its best candidate's patch ("" when there is
    none)."""

    def read(record: dict[str, Any]) -> str:
        run_dir = record.get("run_dir")
        if not isinstance(run_dir, str) or not run_dir:
            return ""
        for name in ("final.diff", "submitted.diff"):
            with contextlib.suppress(OSError, UnicodeDecodeError):
                return (eval_dir / run_dir / name).read_text(encoding="utf-8")
        return best_patch(eval_dir / run_dir)  # unresolved: the furthest candidate

    return read


def write_outputs(eval_dir: Path, config: dict[str, Any], results: Sequence[dict[str, Any]],
                  wall_s: float, patch_of: Callable[[dict[str, Any]], str] | None = None,
                  phases: dict[str, float] | None = None) -> dict[str, Any]:
    """Rewrite summary.json, predictions.jsonl, report.html and report.md atomically."""
    summary = build_summary(config, results, wall_s, phases)
    preds = predictions(config, results, patch_of or patch_in(eval_dir))
    write_json_atomic(eval_dir / SUMMARY_FILE, summary)
    write_atomic(eval_dir / PREDICTIONS_FILE, "".join(json.dumps(p) + "\n" for p in preds))
    ids = set(config.get("task_ids", []))  # once: per record it made each rewrite O(n^2)
    ordered = [r for r in results if r["task_id"] in ids]
    write_atomic(eval_dir / "report.html", report.eval_html(summary, ordered))
    write_atomic(eval_dir / "report.md", report.eval_markdown(summary, ordered))
    return summary


def rerender_report(path: Path) -> list[Path]:
    """`ooda report DIR`: write report.html and report.md again from the files in DIR, an
    evaluation directory (summary recomputed from results.jsonl when eval.json is there)
    or a single run directory (run.json, attempts.jsonl)."""
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    if (path / EVAL_FILE).is_file() or (path / RESULTS_FILE).is_file():
        config = read_json(path / EVAL_FILE)
        results = list(latest_by_task(read_records(path / RESULTS_FILE)).values())
        old = read_json(path / SUMMARY_FILE) or {}
        if config is None:
            if not old:
                raise UsageError(f"{path}: neither eval.json nor summary.json is readable")
            summary = old
            ordered = results
        else:
            summary = build_summary(config, results, float(old.get("wall_s") or 0.0),
                                    old.get("phases"))
            write_json_atomic(path / SUMMARY_FILE, summary)
            ids = set(config.get("task_ids", []))
            ordered = [r for r in results if r["task_id"] in ids]
        write_atomic(path / "report.html", report.eval_html(summary, ordered))
        write_atomic(path / "report.md", report.eval_markdown(summary, ordered))
        return [path / "report.html", path / "report.md"]
    if (path / "run.json").is_file() or (path / "attempts.jsonl").is_file():
        run = read_summary(path) or RunSummary(path.name, "", "unfinished")
        attempts = read_attempts(path)
        final = path / "final.diff"
        patch = final.read_text(encoding="utf-8", errors="replace") if final.is_file() else ""
        write_atomic(path / "report.html", report.run_html(run, attempts, patch))
        write_atomic(path / "report.md", report.run_markdown(run, attempts, patch))
        return [path / "report.html", path / "report.md"]
    raise UsageError(
        f"{path}: neither an evaluation directory (results.jsonl) nor a run directory (run.json)"
    )


def remove_path(path: Path) -> None:
    """Remove a file, link or directory tree if it exists (never following a link)."""
    if path.is_dir() and not path.is_symlink():
        fstree.remove_tree(path)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)

