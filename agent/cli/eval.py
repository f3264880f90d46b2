"""`ooda eval`: a task set, K tasks at a time, scored in an evaluation directory; prints the
summary. Registered on the app in agent/cli/app.py; shared options from agent/cli/options.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ooda.agent.cli.options import grouped, is_quiet
from ooda.agent.contracts.errors import OptionError, UsageError
from ooda.agent.contracts.options import (
    EscalationOptions,
    LoopOptions,
    ModelOptions,
    SandboxOptions,
)
from ooda.agent.support.textsafe import printable


@grouped("eval")
def eval_command(
    ctx: typer.Context,
    taskset: Annotated[
        Path, typer.Argument(help="A directory of task directories, or a SWE-bench .jsonl.")
    ],
    model: ModelOptions,
    loop: LoopOptions,
    escalation: EscalationOptions,
    sandbox: SandboxOptions,
    runs_dir: Annotated[
        Path, typer.Option("--runs-dir", help="Where the evaluation directory goes.")
    ] = Path("runs"),
    json_out: Annotated[
        bool, typer.Option("--json", help="No progress bar; print summary.json on stdout.")
    ] = False,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Tasks run at once (model requests: --requests).")
    ] = 1,
    requests: Annotated[
        int | None,
        typer.Option("--requests", help="Model requests in flight at once across all tasks "
                     "(default: samples x concurrency, at most 64)."),
    ] = None,
    eval_id: Annotated[
        str | None,
        typer.Option("--eval-id", help="Name of the evaluation directory (default: task set "
                     "name, model and a hash of the options that change results)."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Finish an interrupted evaluation: skip the "
                           "tasks already done, run the rest.")
    ] = False,
    retry_errors: Annotated[
        bool, typer.Option("--retry-errors", help="With --resume: run the tasks that ended "
                           "in an infrastructure error again.")
    ] = False,
    repos_dir: Annotated[
        Path | None,
        typer.Option("--repos-dir", help="SWE-bench: directory of local clones named "
                     "owner__name."),
    ] = None,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only this task id (repeat).")
    ] = None,
    executor: Annotated[
        str, typer.Option("--executor", help="Where tasks run: 'local' (this process) or "
                          "'ray' (a Ray cluster; pip install 'ooda[ray]'; docs/SCALE.md).")
    ] = "local",
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="--executor ray: the cluster "
                                 "(default: $RAY_ADDRESS, else the one running here).")
    ] = None,
    predictions: Annotated[
        Path | None,
        typer.Option("--predictions", help="Judge another system's predictions (the SWE-bench "
                     "harness's .jsonl/.json: instance_id, model_patch) as the harness does: "
                     "git apply, then patch --fuzz=5, any file may change, the test patch laid "
                     "over; no model. Writes the harness's report format beside ooda's."),
    ] = None,
    compare: Annotated[
        bool, typer.Option("--compare", help="With a model to escalate to: evaluate fast-only, "
                           "strong-only and the cascade, and compare them in one report.")
    ] = False,
) -> None:
    """Evaluate on many tasks, K at a time: resolved rate, pass@k, a report, predictions."""
    from ooda.agent.app.evaluate import EvalOptions, evaluate
    from ooda.agent.app.evaluate.records import latest_by_task, read_records
    from ooda.agent.app.run import RunOptions
    from ooda.agent.cli.console import make_console
    from ooda.agent.support.phases import Timeline

    timeline = Timeline()  # summary.json's phases: from this process's (or its client's) start
    timeline.until_now("startup")
    run_options = RunOptions(model=model, loop=loop, escalation=escalation, sandbox=sandbox,
                             runs_dir=runs_dir)
    options = EvalOptions(
        taskset=taskset,
        run=run_options,
        concurrency=concurrency,
        requests=requests,
        eval_id=eval_id,
        resume=resume,
        retry_errors=retry_errors,
        repos_dir=repos_dir,
        only=list(only) if only else None,
        executor=executor,
        ray_address=ray_address,
    )
    console = make_console()
    if predictions is not None:
        if model.name or compare or resume:
            raise UsageError("--predictions judges a file of patches: it takes no --model, "
                             "--compare or --resume")
        _judge(options, predictions, sandbox.sandbox, json_out)
    if compare:
        from ooda.agent.app.evaluate.compare import compare as compare_variants

        table, where = compare_variants(
            options, lambda o: evaluate(o, console=console, show_progress=not json_out)
        )
        print(json.dumps(table, indent=2) if json_out else where.read_text(encoding="utf-8"))
        raise SystemExit(0)
    try:
        outcome = evaluate(options, console=console,
                           show_progress=not (json_out or is_quiet(ctx)), prestarted=ctx.obj,
                           timeline=timeline)
    except KeyboardInterrupt as exc:
        if exc.args:
            console.print(f"The finished tasks are kept in {exc.args[0]}: run the same command "
                          "with --resume to finish the evaluation.", markup=False,
                          highlight=False)
        raise
    if json_out:
        print(json.dumps(outcome.summary, indent=2))
    else:
        print_summary(outcome.summary, outcome.eval_dir, outcome.skipped,
                      list(latest_by_task(read_records(outcome.eval_dir / "results.jsonl"))
                           .values()))
    raise SystemExit(0)


def _judge(options: Any, predictions: Path, sandbox: str | None, json_out: bool) -> None:
    from ooda.agent.app.evaluate.predictions import judge_predictions
    from ooda.agent.sandbox.registry import open_backend

    if options.concurrency < 1:
        raise OptionError("--concurrency",
                          f"--concurrency must be at least 1 (got {options.concurrency})")
    outcome = judge_predictions(
        options, predictions, lambda: open_backend(sandbox),
        report=(lambda _j: None) if json_out else lambda j: print(printable(
            f"{j.status.upper():11} {j.instance_id}" + (f" [{j.applied}]" if j.applied else "")
            + (f": {j.reason}" if j.reason else "")), flush=True))
    for instance_id in outcome.not_in_taskset:
        print(f"skipped {instance_id}: not in the task set", file=sys.stderr)
    summary = outcome.summary
    if json_out:
        print(json.dumps(summary, indent=2))
    else:
        print(f"resolved {summary['resolved']} of {summary['predictions_judged']} predictions "
              f"({summary['instances']} instances in the task set); unresolved "
              f"{summary['unresolved']}, empty {summary['empty_patch']}, errors "
              f"{summary['error']}; applied with fuzz {summary['applied_with_fuzz']}")
        print(f"results: {outcome.eval_dir}")
    raise SystemExit(3 if summary["error"] else 0)


def print_summary(summary: dict[str, Any], eval_dir: Path, skipped: int,
                  records: list[dict[str, Any]] | None = None) -> None:
    """A few lines for a person: resolved, pass@k, errors, time, the tasks that did not
    resolve and why, where the report is."""
    from ooda.agent.app.charts import money

    total = summary["total"]
    line = (f"resolved {summary['resolved']}/{total} ({100 * summary['resolved_rate']:.1f}%)"
            f", unresolved {summary['unresolved']}, errors {summary['errors']}")
    if summary.get("resubmitted"):  # --executor ray: tasks run again after a node was lost
        line += f", submitted again {summary['resubmitted']} (node lost)"
    print(line)
    print("pass@k: " + ", ".join(f"@{k} {100 * v:.1f}%" for k, v in summary["pass_at_k"].items()))
    ttfp = summary["time_to_first_pass_s"]
    if ttfp.get("p50") is not None:
        print(f"time to first pass: median {ttfp['p50']:.1f}s, p90 {ttfp['p90']:.1f}s")
    rate = summary.get("tasks_per_min")
    print(f"wall clock {summary['wall_s']:.1f}s" + (f", {rate:.1f} tasks/min" if rate else "")
          + (f" ({skipped} task(s) done earlier)" if skipped else ""))
    if summary.get("cost") is not None:
        print(f"cost {money(summary['cost'])}")
    _print_failures(records)
    for failure in summary.get("gold_failures") or []:
        print(printable(f"GOLD FAILURE {failure['task_id']}: {failure['reason']}"))
    for problem in summary.get("gold_base_problems") or []:
        passing = problem["fail_to_pass_passing_before"]
        print(printable(f"BASE {problem['task_id']}: {len(passing)} FAIL_TO_PASS test(s) pass "
                        f"on the unpatched code already (first: {passing[0]}): they cannot tell "
                        "the fix from no change"))
    print(f"report: {eval_dir / 'report.html'}")



def _print_failures(records: list[dict[str, Any]] | None) -> None:
    """One line per unresolved task and per error, with its reason (never wrapped)."""
    from ooda.agent.support.reasons import failure_reason

    for status, label in (("unresolved", "UNRESOLVED"), ("error", "ERROR")):
        for record in sorted((r for r in records or [] if r["status"] == status),
                             key=lambda r: str(r["task_id"])):
            print(printable(f"{label} {record['task_id']}: {failure_reason(record)}"))
