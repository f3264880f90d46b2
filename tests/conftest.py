"""Fixtures shared across the test folders (which mirror the packages: tests/agent/<layer>/,
tests/verifiers/, tests/tasks/, plus tests/acceptance/ and tests/adversarial/ by purpose).
Helper modules live in tests/helpers/, on the import path through pytest's `pythonpath`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import InfraError

ROOT = Path(__file__).resolve().parents[1]
# The base check's facts are kept per base in $OODA_HOME (agent/verify/basecache.py): tests
# with fake verifiers would share them through identical repositories. Off here, on in the
# tests of the cache itself (tests/agent/verify/test_base_cache.py).
os.environ.setdefault("OODA_BASE_CACHE", "0")
EXAMPLES = ROOT / "tasks" / "examples"


@pytest.fixture
def median(tmp_path: Path) -> Path:
    """A fresh copy of the `median` example task (its caches left out)."""
    dest = tmp_path / "median"
    shutil.copytree(EXAMPLES / "median", dest, ignore=shutil.ignore_patterns(".*_cache"))
    return dest


@pytest.fixture(scope="module")
def sandbox_name() -> str:
    """The backend `--sandbox` would pick here; a failure under OODA_REQUIRE_SANDBOXES=1."""
    from ooda.agent.sandbox.registry import get_backend

    try:
        backend = get_backend(None)
    except InfraError as exc:
        if os.environ.get("OODA_REQUIRE_SANDBOXES") == "1":
            pytest.fail(f"OODA_REQUIRE_SANDBOXES=1 but no sandbox works: {exc}")
        pytest.skip(f"no sandbox on this machine: {exc}")
    name = backend.name
    backend.close()
    return name
