"""The usual flags and the config file (issue 15.9), through the real command line (no
sandbox needed: every case ends before one would start)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import MEDIAN, ooda


def test_version_short_help_and_completion() -> None:
    version = ooda("--version")
    assert version.returncode == 0 and version.stdout.startswith("ooda ")
    helped = ooda("-h")
    assert helped.returncode == 0
    for flag in ("--verbose", "--quiet", "--version", "--install-completion", "config"):
        assert flag in helped.stdout
    run_help = ooda("run", "-h").stdout
    assert "-n, --samples N" in run_help and "[docker|bwrap|local]" in run_help
    assert "OODA_TIME_BUDGET" in run_help and "$OPENAI_BASE_URL" in run_help
    assert "<bool>" not in run_help and "<str>" not in run_help and " ." not in run_help


def test_bare_ooda_prints_help_and_exits_2() -> None:
    bare = ooda()
    assert bare.returncode == 2
    assert "Usage:" in bare.stdout + bare.stderr


def test_precedence_flag_over_env_over_config_over_default(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.ooda]\nsamples = 0\nrounds = 5\n'
                                             '[tool.ooda.eval]\nrounds = 6\n')
    args = ("run", str(MEDIAN), "--model", "replay")
    config_only = ooda(*args, cwd=tmp_path)
    assert config_only.returncode == 2 and "--samples must be at least 1 (got 0)" in \
        config_only.stderr
    env = ooda(*args, cwd=tmp_path, env={"OODA_SAMPLES": "-3"})
    assert env.returncode == 2 and "(got -3)" in env.stderr
    flag = ooda(*args, "--samples", "-5", cwd=tmp_path, env={"OODA_SAMPLES": "-3"})
    assert flag.returncode == 2 and "(got -5)" in flag.stderr
    shown = ooda("config", "eval", "--json", cwd=tmp_path, env={"OODA_TIME_BUDGET": "30"})
    rows = {r["option"]: r for r in json.loads(shown.stdout)["options"]}
    assert rows["--rounds"]["value"] == 6 and rows["--rounds"]["source"].endswith("pyproject.toml")
    assert rows["--time-budget"]["source"] == "OODA_TIME_BUDGET"
    assert rows["--temperature"]["source"] == "default" and rows["--temperature"]["value"] == 0.8


def test_an_unknown_config_key_is_exit_2_with_a_suggestion(tmp_path: Path) -> None:
    (tmp_path / "ooda.toml").write_text("sampels = 2\n")
    bad = ooda("config", cwd=tmp_path)
    assert bad.returncode == 2
    assert "unknown option 'sampels' (did you mean 'samples'?)" in bad.stderr


def test_bad_values_read_as_one_plain_line() -> None:
    """15.10: no `Value error,` or parser wording from the validation library."""
    for args, expected in ((("--sandbox", "foo"), "'foo' is not one of 'docker'"),
                           (("--time-budget", "abc"), "'--time-budget': not a valid number"),
                           (("-n", "x"), "not a valid integer")):
        bad = ooda("run", str(MEDIAN), "--model", "replay", *args)
        assert bad.returncode == 2 and expected in bad.stderr, bad.stderr
        assert "Value error" not in bad.stderr and "env var" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_help_says_what_concurrency_counts_and_ci_model_has_no_reference_patch() -> None:
    assert "--requests counts requests" in " ".join(ooda("run", "-h").stdout.split())
    assert "Tasks run at once" in ooda("eval", "-h").stdout
    ci_help = " ".join(ooda("ci", "-h").stdout.split())
    assert "reference patch" not in ci_help and "never inside the checkout" in ci_help


def test_ci_writes_outside_the_checkout_by_default(tmp_path: Path,
                                                   monkeypatch: object) -> None:
    from ooda.agent.cli.ci import default_out

    monkeypatch.delenv("RUNNER_TEMP", raising=False)  # type: ignore[attr-defined]
    assert not default_out(tmp_path).resolve().is_relative_to(tmp_path.resolve())
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path / "rt"))  # type: ignore[attr-defined]
    assert default_out(tmp_path) == tmp_path / "rt" / "ooda-ci-out"


def test_doctor_passes_offline_and_takes_base_url() -> None:
    """15.10: without an endpoint, doctor notes it (the offline path needs none), exit 0 when
    a sandbox is there; --base-url is an option of its own."""
    offline = ooda("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(offline.stdout)["checks"]}
    assert checks["model endpoint"]["optional"] and not checks["model endpoint"]["ok"]
    sandboxes_ok = all(c["ok"] for c in checks.values() if not c["optional"])
    assert offline.returncode == (0 if sandboxes_ok else 1)
    unreachable = ooda("doctor", "--base-url", "http://127.0.0.1:9/v1", "--json")
    endpoint = {c["name"]: c for c in json.loads(unreachable.stdout)["checks"]}["model endpoint"]
    assert unreachable.returncode == 1 and "unreachable" in endpoint["detail"]


def test_global_flags_anywhere_on_the_line() -> None:
    """27.2: -q, -v and -V after the command too, as uv and ruff take them."""
    from ooda.agent.cli.app import click_command, globals_first

    command = click_command()
    assert globals_first(command, ["run", "t", "-q", "-vv", "--model", "gold"]) == \
        ["-q", "-vv", "run", "t", "--model", "gold"]
    # an option's value, and anything after --, stay where they are
    assert globals_first(command, ["run", "--statement", "-v", "t", "--", "-q"]) == \
        ["run", "--statement", "-v", "t", "--", "-q"]
    assert globals_first(command, ["tasks", "import", "-V"]) == ["-V", "tasks", "import"]
    late = ooda("run", "/no/such/task", "-q", "-v")
    assert late.returncode == 2 and "No such option" not in late.stderr
    assert "/no/such/task" in late.stderr
    for line in (("-V",), ("doctor", "-V"), ("config", "run", "--version")):
        shown = ooda(*line)
        assert shown.returncode == 0 and shown.stdout.startswith("ooda "), line


def test_usage_lines_name_arguments_in_capitals_and_a_non_url_is_bad_input() -> None:
    """27.9: `ooda run [OPTIONS] PATH` (not typer's `{path}`); the choices of a missing
    argument on its one line; `--base-url notaurl` is bad input (2), not a broken machine."""
    assert ooda("run", "-h").stdout.startswith("Usage: ooda run [OPTIONS] PATH\n")
    assert "Usage: ooda tasks import [OPTIONS] KIND SRC DEST" in ooda("tasks", "import", "-h").stdout
    missing = ooda("tasks", "import")
    assert missing.returncode == 2
    assert "Missing argument 'KIND'. Choose from: quixbugs, humanevalfix, swebench" in missing.stderr
    for args, env in ((("--base-url", "notaurl"), {}), ((), {"OPENAI_BASE_URL": "localhost:8000"})):
        bad = ooda("run", str(MEDIAN), "--model", "m", *args, env=env)
        assert bad.returncode == 2, bad.stderr
        assert "is not an http:// or https:// URL" in bad.stderr
    assert "OPENAI_BASE_URL 'localhost:8000'" in bad.stderr


def test_a_bad_value_names_where_it_was_written(tmp_path: Path) -> None:
    """27.3: the file or variable a bad value came from, not only the option it sets."""
    config = tmp_path / "ooda.toml"
    config.write_text('samples = "eight"\n')
    run = ("run", str(MEDIAN), "--model", "gold")
    from_file = ooda(*run, cwd=tmp_path)
    assert from_file.returncode == 2
    assert f"samples = 'eight' in {config}: " in from_file.stderr
    assert "not a valid integer" in from_file.stderr
    from_env = ooda(*run, env={"OODA_SAMPLES": "abc"})
    assert from_env.returncode == 2 and "OODA_SAMPLES='abc': " in from_env.stderr
    config.write_text("rounds = -5\n[eval]\nsamples = \"eight\"\n")
    shown = ooda("config", "eval", cwd=tmp_path, env={"OPENAI_BASE_URL": "http://h:1/v1"})
    assert shown.returncode == 2  # what `ooda eval` here would refuse, said, not exit 0
    assert "<- not a valid integer" in shown.stdout
    assert "<- must be at least 1 (got -5)" in shown.stdout  # the option's own check, as run's
    assert f"samples = 'eight' in {config} ([eval] table): --samples" in shown.stderr
    (base_url,) = [line for line in shown.stdout.splitlines() if "--base-url " in line]
    assert base_url.split()[1:] == ["http://h:1/v1", "OPENAI_BASE_URL"]  # not "None, default"
    config.unlink()
    (tmp_path / "pyproject.toml").write_text("[tool.ooda.evl]\nrounds = 2\n")
    table = ooda("config", cwd=tmp_path)
    assert table.returncode == 2 and "unknown table [evl] (did you mean [eval]?)" in table.stderr


def test_a_value_out_of_range_names_where_it_was_written(tmp_path: Path) -> None:
    """27.3: a value the options' own checks refuse (not click's types) names its source too:
    the file and key, or the variable; typed on the command line, the option alone."""
    config = tmp_path / "ooda.toml"
    config.write_text("samples = -5\n[eval]\nrequests = 0\n")
    run = ("run", str(MEDIAN), "--model", "gold")
    from_file = ooda(*run, cwd=tmp_path)
    assert from_file.returncode == 2
    assert from_file.stderr.strip() == (
        f"ooda: error: samples = -5 in {config}: --samples must be at least 1 (got -5)")
    evaluated = ooda("eval", str(MEDIAN.parent), "--model", "gold", cwd=tmp_path)
    assert evaluated.returncode == 2 and evaluated.stderr.strip() == (
        f"ooda: error: requests = 0 in {config} ([eval] table): --requests must be at least 1 "
        "(got 0)")
    config.write_text("samples = 0\n")  # `ooda config` checks as the command does (0 too)
    shown = ooda("config", "run", cwd=tmp_path)
    assert shown.returncode == 2 and "<- must be at least 1 (got 0)" in shown.stdout
    config.unlink()
    from_env = ooda(*run, env={"OODA_SAMPLES": "-5"})
    assert from_env.returncode == 2 and from_env.stderr.strip() == (
        "ooda: error: OODA_SAMPLES='-5': --samples must be at least 1 (got -5)")
    escalation = ooda(*run, "--escalate-to", "strong", env={"OODA_ESCALATE_BELOW": "2"})
    assert "OODA_ESCALATE_BELOW='2': --escalate-below must be in [0, 1)" in escalation.stderr
    typed = ooda(*run, "-n", "-5", env={"OODA_SAMPLES": "3"})
    assert typed.stderr.strip() == "ooda: error: --samples must be at least 1 (got -5)"


def test_max_tokens_caps_an_answer_and_its_old_meaning_is_pointed_to_token_budget() -> None:
    """#28: --max-tokens is per answer, as in OpenAI clients; a value only a run's budget could
    mean is refused with the new name."""
    proc = ooda("run", str(MEDIAN), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                "--max-tokens", "200000")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "ooda: error: --max-tokens caps each answer, as in OpenAI's API, and 200,000 is more "
        "than models answer at once; for a token budget of the whole run (what --max-tokens "
        "meant before), use --token-budget 200000"]
    bad = ooda("run", str(MEDIAN), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
               "--token-budget", "0")
    assert bad.returncode == 2 and "--token-budget must be positive" in bad.stderr
