"""Fixtures shared across the test folders (which mirror the packages: tests/agent/<layer>/,
tests/verifiers/, tests/tasks/, plus tests/acceptance/ and tests/adversarial/ by purpose).
Helper modules live in tests/helpers/, on the import path through pytest's `pythonpath`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "tasks" / "examples"


@pytest.fixture
def median(tmp_path: Path) -> Path:
    """A fresh copy of the `median` example task (its caches left out)."""
    dest = tmp_path / "median"
    shutil.copytree(EXAMPLES / "median", dest, ignore=shutil.ignore_patterns(".*_cache"))
    return dest
