"""`ooda verify`: one given patch judged as `ooda run` judges a candidate (the same plan:
environment detection and `--environment`, runner, stages, the base's facts), no model; its
verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ooda.agent.cli.options import FailToPassOpt, JsonOpt, PassToPassOpt, grouped
from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import EnvironmentOptions, SandboxOptions, StageOptions
from ooda.agent.support.textsafe import markup_safe, printable

if TYPE_CHECKING:
    from ooda.agent.contracts.protocols import Verdict
    from ooda.tasks.loader import Task


@grouped("verify")
def verify(
    path: Annotated[Path, typer.Argument(help="A task directory (holds task.toml) or a "
                                         "repository (with --test-cmd or --fail-to-pass).")],
    patch: Annotated[Path, typer.Option("--patch", help="The unified diff to verify.")],
    sandbox: SandboxOptions,
    environment: EnvironmentOptions,
    stages: StageOptions,
    json_out: JsonOpt = False,
    logs: Annotated[
        Path | None, typer.Option("--logs", help="Directory for the verifiers' full logs.")
    ] = None,
    test_cmd: Annotated[
        str | None, typer.Option(help="Test command (a repository without task.toml); the "
                                 "tests failing without the patch must pass with it.")
    ] = None,
    fail_to_pass: FailToPassOpt = None,
    pass_to_pass: PassToPassOpt = None,
) -> None:
    """Judge one patch as `ooda run` would judge a candidate (no model involved) and print
    the verdict."""
    from ooda.agent.app.verify import verify_patch
    from ooda.agent.cli.console import make_console
    from ooda.agent.verify.workspace import PatchError

    for group in (sandbox, environment, stages):
        group.check()
    task = _task(path, test_cmd, fail_to_pass or [], pass_to_pass or [])
    try:
        # bytes as they are: a patch of latin-1 (or any non-UTF-8) files applies unchanged
        patch_text = patch.read_bytes().decode("utf-8", "surrogateescape")
    except OSError as exc:
        raise UsageError(f"cannot read --patch {patch}: {exc.strerror or exc}") from exc
    console = make_console()
    try:
        verified = verify_patch(
            task, patch_text, environment=environment, sandbox=sandbox, stages=stages,
            log_dir=logs, say=lambda line: console.print(markup_safe(line), highlight=False))
    except PatchError as exc:  # found by the cheap checks, before any sandbox or base run
        raise UsageError(f"--patch {patch}: {exc}") from None
    verdict = verified.verdict
    if verdict.status == "invalid_edit":  # the patch itself is bad input: one line, exit 2
        raise UsageError(f"--patch {patch}: {verdict.reason.removeprefix('invalid edit: ')}")
    judged = verified.plan.judged_task()  # with a test command: the lists derived on the base
    _print_verdict(judged.id, verdict, verified.sandbox, json_out,
                   _failing_before(judged, verdict))
    raise SystemExit(0 if verdict.status == "passed" else 1)


def _task(path: Path, test_cmd: str | None, fail_to_pass: list[str],
          pass_to_pass: list[str]) -> Task:
    """The task directory at `path`, or a task made from a plain repository and the tests
    named on the command line."""
    from ooda.tasks.loader import VerifierOptions, is_task_dir, load_task, task_from_repo

    if is_task_dir(path) or not path.is_dir():
        task = load_task(path)
        if test_cmd or fail_to_pass or pass_to_pass:
            raise UsageError(f"{path} is a task directory: its task.toml names the tests "
                             "(--test-cmd, --fail-to-pass and --pass-to-pass are for plain "
                             "repositories)")
        return task
    if not test_cmd and not fail_to_pass:
        raise UsageError(f"{path} is not a task directory (no task.toml): name the tests "
                         "that judge the patch with --test-cmd CMD or --fail-to-pass ID")
    return task_from_repo(path, statement="(ooda verify: no statement needed)",
                          fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass,
                          test_cmd=test_cmd, verifiers=VerifierOptions())


def _failing_before(task: Task, verdict: Verdict) -> dict[str, str]:
    """Each test that fails on the unpatched code (FAIL_TO_PASS) and its outcome with the
    patch ("passed": the patch fixes it; empty when the tests did not run)."""
    required: dict[str, object] = {}
    for result in verdict.results:
        outcomes = result.details.get("required")
        if result.name == "pytest" and isinstance(outcomes, dict):
            required = outcomes
    return {test: str(required[test]) for test in task.fail_to_pass if test in required}


def _print_verdict(task_id: str, verdict: Verdict, sandbox: str, json_out: bool,
                   failing_before: dict[str, str]) -> None:
    if json_out:
        print(
            json.dumps(
                {
                    "task_id": task_id,
                    "status": verdict.status,
                    "reason": verdict.reason,
                    "sandbox": sandbox,
                    "changed_files": verdict.changed_files,
                    "fail_to_pass": failing_before,
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
        return
    from ooda.agent.cli.console import make_console

    console = make_console(stderr=False)
    style = "bold green" if verdict.status == "passed" else "bold red"
    console.print(f"[{style}]{verdict.status.upper()}[/{style}] {markup_safe(task_id)}: "
                  f"{markup_safe(verdict.reason)}")
    for r in verdict.results:
        console.print(f"  {r.name:<8} {r.status:<8} {r.duration_s:6.2f}s")
    fixed = [test for test, outcome in failing_before.items() if outcome == "passed"]
    if failing_before:
        shown = ", ".join(fixed[:5]) + (f" and {len(fixed) - 5} more" if len(fixed) > 5 else "")
        console.print(markup_safe(f"{len(fixed)} of {len(failing_before)} test(s) failing "
                                  f"without the patch pass with it" + (f": {shown}" if fixed
                                                                       else "")))
    if verdict.status != "passed" and verdict.feedback:
        console.print(printable(verdict.feedback), markup=False, highlight=False)
