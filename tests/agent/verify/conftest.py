"""Fixtures the verify tests share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.sandbox_helpers import backend_or_skip


@pytest.fixture(scope="module")
def docker() -> Iterator[Any]:
    """The Docker backend for one test module (skipped, or failed under
    OODA_REQUIRE_SANDBOXES=1, where there is none), closed after it."""
    backend = backend_or_skip("docker")
    yield backend
    backend.close()
