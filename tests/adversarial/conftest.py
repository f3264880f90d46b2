"""The adversarial tests' shared verifiers (adv_helpers.verify) are closed at each module's end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from adv_helpers import close_shared


@pytest.fixture(autouse=True, scope="module")
def _shared_verifiers_closed() -> Iterator[None]:
    yield
    close_shared()
