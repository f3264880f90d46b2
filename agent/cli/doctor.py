"""`ooda doctor`: check the machine (Docker engine, image, bubblewrap, endpoint, a test stream
from the model), say what to do.

Exit 0 when everything a run needs is there; a missing endpoint is a note (the offline
`--model replay` and `--model gold` need none), not a failure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ooda.agent.cli.options import one_option
from ooda.agent.contracts.options import ModelOptions

if TYPE_CHECKING:
    BaseUrlOpt = str | None
else:  # --base-url as `ooda run` declares it (agent/contracts/options.py)
    BaseUrlOpt = one_option(ModelOptions, "base_url", "doctor")


def doctor(
    base_url: BaseUrlOpt = None,
    model: Annotated[str | None, typer.Option(
        "--model", envvar="OODA_MODEL",
        help="The model to send the test streams to (default: the first the endpoint lists).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable, on stdout.")
                        ] = False,
) -> None:
    """Check the machine (Docker engine, image, bubblewrap, endpoint) and say what to do."""
    import dataclasses
    import json

    from ooda.agent.app.doctor import diagnose

    checks = diagnose(base_url, model)
    failed = [c for c in checks if not c.ok and not c.optional]
    if json_out:
        print(json.dumps({"ok": not failed, "checks": [dataclasses.asdict(c) for c in checks]},
                         indent=2))
        raise SystemExit(1 if failed else 0)
    for check in checks:
        mark = "ok  " if check.ok else "--  " if check.optional else "FAIL"
        line = f"[{mark}] {check.name}: {check.detail}"
        if not check.ok and check.fix:
            line += f"\n       {'to do' if check.optional else 'fix'}: {check.fix}"
        print(line)
    raise SystemExit(1 if failed else 0)
