"""`ooda prompt`: print exactly what the first request of a run would send (no model call):
the messages, or with --json {"messages", "tokens", "context": [{"path", "lines"}]}."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ooda.agent.cli.options import (
    FailToPassOpt,
    JsonOpt,
    StatementFileOpt,
    StatementOpt,
    TaskPathArg,
    one_option,
)
from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import LoopOptions, ModelOptions

if TYPE_CHECKING:
    ContextTokensOpt = int
    ModelOpt = str
    BaseUrlOpt = str | None
else:  # --context-tokens, --model and --base-url as `ooda run` declares them
    ContextTokensOpt = one_option(LoopOptions, "context_tokens", "prompt")
    ModelOpt = one_option(ModelOptions, "name", "prompt")
    BaseUrlOpt = one_option(ModelOptions, "base_url", "prompt")
CONTEXT_TOKENS = LoopOptions().context_tokens


def prompt(
    path: TaskPathArg,
    json_out: JsonOpt = False,
    statement: StatementOpt = None,
    statement_file: StatementFileOpt = None,
    test_cmd: Annotated[
        str | None, typer.Option(help="Test command (plain repositories), as for `ooda run`.")
    ] = None,
    fail_to_pass: FailToPassOpt = None,
    context_tokens: ContextTokensOpt = CONTEXT_TOKENS,
    model: ModelOpt = "",
    base_url: BaseUrlOpt = None,
) -> None:
    """Print the first prompt a run would send for this task: with --model, the code chosen
    as that run chooses it (the model's votes on a large repository); without, no model is
    called."""
    from ooda.agent.app.prompt import prompt_report, prompt_with_model
    from ooda.agent.cli.run import _task

    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if statement_file is not None:
        if statement is not None:
            raise UsageError("give --statement or --statement-file, not both")
        try:
            statement = statement_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --statement-file {statement_file}: {exc}") from exc
    if context_tokens < 1:
        raise UsageError(f"--context-tokens must be positive (got {context_tokens})")
    task = _task(path, statement, test_cmd, fail_to_pass, None)
    report = (prompt_with_model(task, context_tokens, ModelOptions(name=model, base_url=base_url))
              if model else prompt_report(task, context_tokens))
    if json_out:
        print(json.dumps(report, indent=2))
        return
    for message in report["messages"]:
        print(f"----- {message['role']} -----")
        print(message["content"])
    shown = ", ".join(
        f"{c['path']}" + ("" if len(c["lines"]) == 1 and c["lines"][0][0] == 1 else
                          f" ({sum(b - a + 1 for a, b in c['lines'])} lines)")
        for c in report["context"])
    print(f"~{report['tokens']} tokens (estimated); code shown: {shown or 'none'}",
          file=sys.stderr)
