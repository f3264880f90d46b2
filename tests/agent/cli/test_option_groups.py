"""Options declared once (agent/contracts/options.py): each group's fields reach the command
line with their OODA_* variable and config-file name, the values come back as the group, and
an evaluation's fingerprint keeps the names it always had (old evaluations still resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import MEDIAN, ooda

from ooda.agent.app.options import RunOptions
from ooda.agent.cli.app import click_command
from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import GROUPS, LoopOptions, option_fields


def test_every_option_of_every_group_is_on_a_command_with_its_variable() -> None:
    commands = click_command().commands
    offered = {p.name: p for name in ("run", "eval", "ci", "verify")
               for p in commands[name].params}
    for group in GROUPS:
        for f, spec in option_fields(group):
            param = offered.get(spec.name or f.name)
            assert param is not None, f"{group.__name__}.{f.name} is on no command"
            longs = [o for o in spec.flags if o.startswith("--")]
            assert param.envvar == "OODA_" + longs[0][2:].upper().replace("-", "_")


def test_values_come_back_as_the_group(tmp_path: Path) -> None:
    bad = ooda("run", str(MEDIAN), "--model", "replay", "-n", "0")
    assert bad.returncode == 2 and "--samples must be at least 1" in bad.stderr
    config = tmp_path / "ooda.toml"
    config.write_text("samples = 3\nescalate-below = 0.5\nno-ruff = true\n")
    shown = ooda("config", "run", "--json", cwd=tmp_path)
    rows = {r["option"]: r for r in json.loads(shown.stdout)["options"]}
    assert rows["--samples"]["value"] == 3 and rows["--samples"]["source"] == str(config)
    assert rows["--escalate-below"]["value"] == 0.5 and rows["--no-ruff"]["value"] is True


def test_flat_names_build_the_groups_and_bad_values_are_usage_errors() -> None:
    options = RunOptions.of(model="m,strong", samples=2, time_budget=60, sandbox="local")
    assert options.loop == LoopOptions(samples=2, time_budget_s=60)
    checked = options.checked()
    assert (checked.model.name, checked.escalation.escalate_to) == ("m", "strong")
    assert checked.escalation_model() is not None
    with pytest.raises(TypeError):
        RunOptions.of(samplez=2)
    for bad, message in (({"rounds": 0}, "--rounds must be at least 1"),
                         ({"select": "worst"}, "--select must be first or best"),
                         ({"verifier_timeout": -1.0}, "--verifier-timeout must be positive"),
                         ({"price_prompt": -1.0}, "--price-prompt must be a non-negative number")):
        with pytest.raises(UsageError, match=message):
            RunOptions.of(model="m", **bad).checked()


def test_the_fingerprint_keeps_its_historical_names() -> None:
    plain = RunOptions.of(model="m").results()
    assert set(plain) == {"model", "base_url", "samples", "rounds", "time_budget_s", "select",
                          "temperature", "oracle", "repro_tests"}  # the options added since
    # (`newer`, as --token-budget): only away from their defaults
    assert RunOptions.of(model="m", token_budget=10).results()["token_budget"] == 10
    escalating = RunOptions.of(model="m", escalate_to="s").results()
    assert set(escalating) - set(plain) == {"escalate_to", "escalate_base_url", "escalate_after",
                                            "escalate_below"}
