"""The `ooda` command line (typer): run, verify, eval, ci, report, tasks, sandbox, doctor, serve.

Commands import their machinery lazily so that `ooda --help` and bad input answer fast.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from ooda.agent.cli.ci import ci as ci_command
from ooda.agent.cli.eval import eval_command, report_command
from ooda.agent.cli.options import (
    BaseUrlOpt,
    JsonOpt,
    MaxTokensOpt,
    ModelOpt,
    NoMypyOpt,
    NoRuffOpt,
    RoundsOpt,
    SamplesOpt,
    SandboxOpt,
    SelectName,
    SelectOpt,
    VerifierTimeoutOpt,
)
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.support.textsafe import markup_safe, printable

app = typer.Typer(
    name="ooda",
    help="Turn a fast code model into a reliable one: sample many candidate patches, verify "
    "each in a sandbox (pytest, ruff, mypy), feed failures back until one passes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
tasks_app = typer.Typer(help="Work with task sets: import public benchmarks.", no_args_is_help=True)
sandbox_app = typer.Typer(help="Manage the sandbox image.", no_args_is_help=True)
daemon_app = typer.Typer(
    help="The warm daemon that serves run/verify/eval/ci with the SDKs already imported and a "
    "sandbox container already started (started by the first such command; OODA_DAEMON=0 "
    "turns it off; it exits after OODA_DAEMON_IDLE_S idle seconds, default 1800).",
    no_args_is_help=True,
)
app.add_typer(tasks_app, name="tasks")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(daemon_app, name="daemon")
app.command("eval")(eval_command)
app.command("ci")(ci_command)
app.command("report")(report_command)


class ImportKind(StrEnum):
    quixbugs = "quixbugs"
    humanevalfix = "humanevalfix"
    swebench = "swebench"


BudgetOpt = Annotated[
    float, typer.Option("--time-budget", help="Wall-clock seconds for the whole task.")
]
RunsDirOpt = Annotated[Path, typer.Option("--runs-dir", help="Where run directories go.")]


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error on stderr and exit with the contract's code."""
    first = message.strip().splitlines()[0] if message.strip() else "error"
    print(f"ooda: error: {printable(first)}", file=sys.stderr)
    raise SystemExit(code)


@app.command()
def run(
    path: Annotated[
        Path, typer.Argument(help="A task directory (holds task.toml) or a repository.")
    ],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    samples: SamplesOpt = 4,
    rounds: RoundsOpt = 3,
    time_budget: BudgetOpt = 600.0,
    sandbox: SandboxOpt = None,
    runs_dir: RunsDirOpt = Path("runs"),
    json_out: JsonOpt = False,
    statement: Annotated[str | None, typer.Option(help="What to do (plain repositories).")] = None,
    statement_file: Annotated[
        Path | None, typer.Option(help="File holding what to do (plain repositories).")
    ] = None,
    test_cmd: Annotated[
        str | None, typer.Option(help="Test command; failing tests become fail_to_pass.")
    ] = None,
    fail_to_pass: Annotated[
        list[str] | None, typer.Option("--fail-to-pass", help="pytest id that must pass (repeat).")
    ] = None,
    pass_to_pass: Annotated[
        list[str] | None,
        typer.Option("--pass-to-pass", help="pytest id that must keep passing (repeat)."),
    ] = None,
    no_ruff: NoRuffOpt = False,
    no_mypy: NoMypyOpt = False,
    verifier_timeout: VerifierTimeoutOpt = None,
    max_tokens: MaxTokensOpt = None,
    select: SelectOpt = SelectName.first,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.8,
    concurrency: Annotated[int, typer.Option(help="Model requests in flight at once.")] = 8,
    verify_concurrency: Annotated[int, typer.Option(help="Candidates verified at once.")] = 2,
    apply: Annotated[
        bool, typer.Option("--apply", help="Write the winning patch into the repository.")
    ] = False,
) -> None:
    """Solve one task: sample candidates, verify them, feed failures back."""
    from rich.console import Console

    from ooda.agent.app.run import RunOptions, run_task
    from ooda.tasks.loader import (
        VerifierOptions,
        check_test_cmd,
        is_task_dir,
        load_task,
        task_from_repo,
    )

    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if statement_file is not None:
        if statement is not None:
            raise UsageError("give --statement or --statement-file, not both")
        try:
            statement = statement_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --statement-file {statement_file}: {exc}") from exc
    if is_task_dir(path):
        task = load_task(path)
        if statement is not None:
            task.statement = statement
        if fail_to_pass:
            task.fail_to_pass = list(fail_to_pass)
        if pass_to_pass:
            task.pass_to_pass = list(pass_to_pass)
        if test_cmd:
            check_test_cmd(test_cmd, "--test-cmd")
            task.test_cmd = test_cmd
    else:
        if statement is None:
            raise UsageError(
                f"{path} is not a task directory (no task.toml): say what to do with "
                "--statement TEXT or --statement-file FILE"
            )
        task = task_from_repo(
            path,
            statement=statement,
            fail_to_pass=list(fail_to_pass or []),
            pass_to_pass=list(pass_to_pass or []),
            test_cmd=test_cmd,
            verifiers=VerifierOptions(),
        )
    if no_ruff:
        task.verifiers.ruff = False
    if no_mypy:
        task.verifiers.mypy = False
    if verifier_timeout is not None:
        if verifier_timeout <= 0:
            raise UsageError("--verifier-timeout must be positive")
        task.verifiers.timeout_s = verifier_timeout
    options = RunOptions(
        model=model,
        base_url=base_url,
        samples=samples,
        rounds=rounds,
        time_budget_s=time_budget,
        max_tokens=max_tokens,
        select=select.value,
        sandbox=sandbox.value if sandbox else None,
        runs_dir=runs_dir,
        temperature=temperature,
        concurrency=concurrency,
        verify_concurrency=verify_concurrency,
    )
    options.validate()
    console = Console(stderr=True)
    if options.model == "replay" and not json_out:
        console.print(
            "[yellow]--model replay: answers are replayed from the task's script, "
            "not generated by a model.[/yellow]"
        )
    result, log = run_task(task, options, console=console, show_progress=not json_out)
    if apply and result.winner is not None:
        from ooda.agent.verify.workspace import apply_patch

        apply_patch(task.repo, result.winner.patch)
    summary = {**result.summary, "run_dir": str(log.dir), "applied": bool(apply and result.winner)}
    if json_out:
        print(json.dumps(summary, indent=2))
    else:
        _print_run_result(
            console, result.summary, log.dir, result.winner.patch if result.winner else None
        )
        if apply and result.winner is not None:
            console.print(f"Applied the winning patch to {task.repo}.")
    raise SystemExit(0 if result.status == "passed" else 1 if result.status == "failed" else 3)


def _print_run_result(
    console: Any, summary: dict[str, Any], run_dir: Path, patch: str | None
) -> None:
    from rich.syntax import Syntax

    status = summary["status"]
    style = {"passed": "bold green", "failed": "bold red"}.get(status, "bold yellow")
    console.print(
        f"[{style}]{status.upper()}[/{style}] {markup_safe(summary['task_id'])}: "
        f"{markup_safe(summary['reason'])} — "
        f"{summary['attempts']} attempts, {summary['rounds_used']} round(s), "
        f"{summary['wall_s']:.1f}s, tokens {summary['tokens']['prompt']}+"
        f"{summary['tokens']['completion']}"
    )
    if patch:
        console.print(Syntax(printable(patch), "diff", theme="ansi_dark"))
        console.print(f"final.diff: {run_dir / 'final.diff'}")
    console.print(f"run directory: {run_dir}")


@app.command()
def verify(
    path: Annotated[Path, typer.Argument(help="A task directory (holds task.toml).")],
    patch: Annotated[Path, typer.Option("--patch", help="The unified diff to verify.")],
    sandbox: SandboxOpt = None,
    json_out: JsonOpt = False,
    logs: Annotated[
        Path | None, typer.Option("--logs", help="Directory for the verifiers' full logs.")
    ] = None,
) -> None:
    """Run the verifier cascade on one patch (no model involved) and print the verdict."""
    import tempfile

    from ooda.agent.app.run import derive_test_lists
    from ooda.agent.sandbox.registry import get_backend
    from ooda.agent.verify.verifier import TaskVerifier
    from ooda.tasks.loader import load_task

    task = load_task(path)
    try:
        patch_text = patch.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read --patch {patch}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"--patch {patch} is not UTF-8 text") from exc
    backend = get_backend(sandbox.value if sandbox else None)
    try:
        with tempfile.TemporaryDirectory(prefix="ooda-verify-") as work:
            verifier = TaskVerifier(task, backend, Path(work))
            try:
                # a test command's tests, per test: those failing on the base must pass now
                verifier.task = task = derive_test_lists(task, verifier)
                verdict = verifier.verify(patch_text, log_dir=logs)
            finally:
                verifier.close()
    finally:
        backend.close()
    if json_out:
        print(
            json.dumps(
                {
                    "task_id": task.id,
                    "status": verdict.status,
                    "reason": verdict.reason,
                    "sandbox": backend.name,
                    "changed_files": verdict.changed_files,
                    "verifiers": [
                        {
                            "name": r.name,
                            "status": r.status,
                            "duration_s": round(r.duration_s, 3),
                            "summary": r.summary,
                        }
                        for r in verdict.results
                    ],
                },
                indent=2,
            )
        )
    else:
        from rich.console import Console

        console = Console()
        style = "bold green" if verdict.status == "passed" else "bold red"
        console.print(f"[{style}]{verdict.status.upper()}[/{style}] {markup_safe(task.id)}: "
                      f"{markup_safe(verdict.reason)}")
        for r in verdict.results:
            console.print(f"  {r.name:<8} {r.status:<8} {r.duration_s:6.2f}s")
        if verdict.status != "passed" and verdict.feedback:
            console.print(printable(verdict.feedback), markup=False, highlight=False)
    raise SystemExit(0 if verdict.status == "passed" else 1)


@tasks_app.command("import")
def tasks_import(
    kind: Annotated[ImportKind, typer.Argument(help="quixbugs | humanevalfix | swebench")],
    src: Annotated[Path, typer.Argument(help="The benchmark's data (directory or .jsonl).")],
    dest: Annotated[Path, typer.Argument(help="Directory to write task directories into.")],
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Import only these ids (repeat).")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace existing task directories.")] = False,
    repos_dir: Annotated[
        Path | None,
        typer.Option(help="swebench: local clones named owner__name."),
    ] = None,
) -> None:
    """Convert a public benchmark into self-contained task directories."""
    from ooda.tasks import importers

    if not src.exists():
        raise UsageError(f"{src}: no such file or directory")
    func = importers.IMPORTERS[kind.value]
    extra: dict[str, object] = {}
    if kind is ImportKind.swebench:
        if repos_dir is None:
            raise UsageError("tasks import swebench needs --repos-dir (clones named owner__name)")
        extra["repos_dir"] = repos_dir
    written = func(src, dest, only=list(only) if only else None, overwrite=overwrite, **extra)
    print(f"wrote {len(written)} task(s) to {dest}")


@sandbox_app.command("build")
def sandbox_build(
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if it exists.")] = False,
) -> None:
    """Build (or rebuild) the sandbox image offline."""
    from ooda.agent.sandbox.registry import build_image

    tag = build_image(force=force, log=lambda line: print(line, file=sys.stderr))
    print(tag)


@app.command()
def doctor() -> None:
    """Check the machine (Docker engine, image, bubblewrap, endpoint) and say what to do."""
    from ooda.agent.app.doctor import diagnose

    checks = diagnose()
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        line = f"[{mark}] {check.name}: {check.detail}"
        if not check.ok and check.fix:
            line += f"\n       fix: {check.fix}"
        print(line)
    raise SystemExit(0 if all(c.ok for c in checks) else 1)


@daemon_app.command("status")
def daemon_status(json_out: JsonOpt = False) -> None:
    """Say whether a daemon serves this installation and environment (exit 1 if none)."""
    from ooda.agent.startup import client as daemon_client

    status = daemon_client.control("status")
    if json_out:
        print(json.dumps(status))
    elif status is None:
        print("no ooda daemon for this installation and environment")
    else:
        print(f"ooda daemon pid {status['pid']}: {status['served']} command(s) served, "
              f"{status['running']} running, warm container: {status['warm_container']}")
    raise SystemExit(0 if status is not None else 1)


@daemon_app.command("start")
def daemon_start(
    timeout: Annotated[float, typer.Option(help="Seconds to wait for it to be ready.")] = 60.0,
) -> None:
    """Start the daemon now (instead of after the next command) and wait until it is ready."""
    import time

    from ooda.agent.startup import client as daemon_client

    if not daemon_client.enabled():
        raise UsageError("the daemon is turned off here (OODA_DAEMON=0)")
    if daemon_client.control("status") is None:
        daemon_client.spawn()
    deadline = time.monotonic() + timeout
    while (status := daemon_client.control("status")) is None:
        if time.monotonic() > deadline:
            log = daemon_client.paths(daemon_client.daemon_key())["log"]
            raise InfraError(f"the ooda daemon did not start within {timeout:g} s (see {log})")
        time.sleep(0.1)
    print(f"ooda daemon pid {status['pid']} ready")


@daemon_app.command("stop")
def daemon_stop() -> None:
    """Stop the daemon (commands it is running finish first)."""
    from ooda.agent.startup import client as daemon_client

    status = daemon_client.control("stop")
    print("stopped" if status is not None else "no ooda daemon was running")


@app.command()
def serve(
    replay: Annotated[
        list[Path],
        typer.Option("--replay", help="replay.jsonl file or directory of tasks (repeat)."),
    ],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 = any free port).")] = 8000,
    tokens_per_s: Annotated[float, typer.Option(help="Simulated token rate (0 = instant).")] = 0.0,
    ttft: Annotated[float, typer.Option("--ttft", help="Simulated time to first token (s).")] = 0.0,
    faults: Annotated[
        str | None, typer.Option(help="Comma-separated fault cycle: ok,429,500,drop,hang.")
    ] = None,
    answer_as: Annotated[
        str, typer.Option(help="Rewrite each answer: as-is, whole-file, definitions (bare "
                          "functions in prose) or mixed (agent/models/answer_styles.py).")
    ] = "as-is",
) -> None:
    """Serve scripted answers over an OpenAI-compatible API (tests, demos, benchmarks)."""
    from ooda.agent.models.server import serve_forever

    for p in replay:
        if not p.exists():
            raise UsageError(f"--replay {p}: no such file or directory")
    serve_forever(
        replay,
        host=host,
        port=port,
        tokens_per_s=tokens_per_s,
        ttft_s=ttft,
        faults=faults.split(",") if faults else None,
        answer_as=answer_as,
    )


_click_command: Any = None


def click_command() -> Any:
    """The click command typer builds from `app` (built once per process: ~20 ms; the daemon
    builds it before it forks)."""
    global _click_command
    if _click_command is None:
        _click_command = typer.main.get_command(app)
    return _click_command


def main() -> None:
    """Entry point: map errors to the contract's exit codes, one line each, no traceback."""
    if sys.argv[1:2] == ["run"] and not {"-h", "--help"} & set(sys.argv):
        from ooda.agent.startup import prestart

        prestart.begin(sys.argv[2:])  # the sandbox backend opens while typer parses
    try:
        returned = click_command()(standalone_mode=False)
        if returned == 130:  # typer's answer to Ctrl-C when not in standalone mode
            raise KeyboardInterrupt
    except UsageError as exc:
        fail(str(exc), 2)
    except InfraError as exc:
        fail(str(exc), 3)
    except (KeyboardInterrupt, typer.Abort):
        fail("interrupted", 130)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except SystemExit:
        raise
    except Exception as exc:
        if _is_click_usage_error(exc):
            if type(exc).__name__ == "NoArgsIsHelpError":
                raise SystemExit(0) from None
            fail(exc.format_message(), 2)  # type: ignore[attr-defined]
        # Anything else is a bug: keep the traceback for the report, out of the user's way
        import tempfile
        import traceback

        crash = Path(tempfile.gettempdir()) / "ooda-crash.log"
        crash.write_text(traceback.format_exc(), encoding="utf-8")
        fail(f"internal error: {type(exc).__name__}: {exc} (traceback in {crash})", 3)


def _is_click_usage_error(exc: BaseException) -> bool:
    """typer raises click's usage errors (from click or its own vendored copy)."""
    return any(cls.__name__ in ("UsageError", "ClickException") for cls in type(exc).__mro__)

