"""pytest's get_config prepared once (verifiers/pytest_check/guard/prepared.py): a run takes it
only when what get_config reads is what it was made with, and is then configured as a fresh
pytest.main would configure it; otherwise it configures itself. In-process pytest runs of a
one-test file (the Docker path is in tests/agent/sandbox/test_sandbox_warm.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _pytest.config
import pytest

from ooda.verifiers.pytest_check.guard import prepared


class _Seen:
    """A plugin that keeps the configuration its run was given."""

    def __init__(self) -> None:
        self.config: Any = None

    def pytest_configure(self, config: Any) -> None:
        self.config = config


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(prepared, "used", False)
    yield tmp_path
    prepared.drop()
    sys.modules.pop("test_one", None)


def _run(folder: Path, *extra: str) -> tuple[int, Any]:
    sys.modules.pop("test_one", None)  # another in-process run's module of that name
    seen = _Seen()
    args = ["-p", "no:cacheprovider", "-q", *extra, str(folder)]
    code = int(prepared.main(args, [seen]))
    return code, seen.config


def test_the_plugin_arguments_are_read_by_pytests_own_parsing() -> None:
    args = ["-p", "no:cacheprovider", "-pno:doctest", "-p", "xdist", "-q", "tests/x.py"]
    assert prepared._blocks(_pytest.config, args) == ("no:cacheprovider", "no:doctest")


def test_a_run_takes_the_prepared_configuration_once(suite: Path) -> None:
    prepared.prepare()
    ready = prepared._ready
    assert ready is not None
    code, config = _run(suite)
    assert code == 0 and prepared.used and config is ready.config
    assert config.invocation_params.dir == suite
    assert "-q" in config.invocation_params.args
    assert prepared._ready is None  # once
    prepared.used = False
    code, again = _run(suite)  # nothing prepared: pytest.main itself
    assert code == 0 and not prepared.used and again is not config
    names = {n for n, p in config.pluginmanager.list_name_plugin() if p is not None}
    fresh = {n for n, p in again.pluginmanager.list_name_plugin() if p is not None}
    assert {n for n in names if not n.isdigit() and "/" not in n} == \
        {n for n in fresh if not n.isdigit() and "/" not in n}
    assert sorted(vars(config.option)) == sorted(vars(again.option))


@pytest.mark.parametrize("change", ["environment", "blocks"])
def test_a_run_whose_get_config_inputs_differ_configures_itself(
    suite: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    prepared.prepare()
    ready = prepared._ready
    assert ready is not None
    extra: tuple[str, ...] = ()
    if change == "environment":
        monkeypatch.setenv("OODA_TEST_PREPARED", "1")  # a variable get_config could read
    else:
        extra = ("-p", "no:doctest")
    code, config = _run(suite, *extra)
    assert code == 0 and not prepared.used and config is not ready.config
