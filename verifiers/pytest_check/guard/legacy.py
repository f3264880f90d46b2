"""The guard for pluggy before 1.1 (an environment's old pytest), which has no `wrapper=True`
hooks: the same innermost wrappers around each phase in the old `hookwrapper=True` style,
seeing the phase's exception in its outcome.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from .plugin import Guard


class LegacyGuard(Guard):
    """Guard with old-style hook wrappers."""

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, None]:
        self.check(f"before {item.nodeid}", full=False)
        outcome = yield
        self._outcome(item, "setup", outcome)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        self._begin_call(item)
        try:
            outcome = yield
        finally:
            self._stop_profile()
        self._outcome(item, "call", outcome)
        self._end_call(item)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, Any, None]:
        self._watch_entry(pyfuncitem)
        yield

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, None]:
        outcome = yield
        self._outcome(item, "teardown", outcome)
        self.check(f"after {item.nodeid}")

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, Any, None]:
        outcome = yield
        if outcome.excinfo is None:
            self._collect_skip(outcome.get_result())

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, Any, None]:
        self.check("at the end of the session")
        yield
        self.check("after the reports were written")

    def _outcome(self, item: pytest.Item, phase: str, outcome: Any) -> None:
        excinfo = outcome.excinfo
        self.records.phase(item.nodeid, phase, excinfo is not None)
        if excinfo is not None:
            self._skipped_by_candidate(item.nodeid, excinfo[1])
