"""The `calc` task as a fixture for the loop's tests (tests/helpers/loop_fakes.py builds it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_fakes import calc_task

from ooda.tasks.loader import Task


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return calc_task(tmp_path)
