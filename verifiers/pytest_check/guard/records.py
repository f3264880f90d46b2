"""What the guard saw of each test, kept apart from pytest's report objects: whether each phase
raised (seen by the innermost hook wrappers) and the outcome of every report as it was logged,
under the (classname, name) key junitxml writes, so that the host can cross-check the JUnit
report test by test (verifiers/pytest_check/integrity.py).
"""

from __future__ import annotations

from typing import Any

import pytest

if int(pytest.__version__.split(".")[0]) < 6:
    # py.xml's escaping, undone with saxutils; imported only where needed: it imports
    # urllib.request, http.client and ssl (~30 ms of every cold run), which pytest never does
    import xml.sax.saxutils

PHASES = ("setup", "call", "teardown")
_XML_QUOTES = {"&quot;": '"', "&apos;": "'"}


class Records:
    """Raw phase outcomes and logged reports, per node id."""

    def __init__(self) -> None:
        import _pytest.junitxml

        self._mangle = _pytest.junitxml.mangle_test_address
        self._escape = _pytest.junitxml.bin_xml_escape
        self.raw: dict[str, dict[str, bool]] = {}
        """node id -> phase -> raised."""
        self.reports: dict[str, list[str]] = {}
        """node id -> the outcomes of its logged reports."""
        self.keys: dict[str, tuple[str, str]] = {}
        """node id -> (classname, name) as junitxml writes them."""

    def key(self, nodeid: str) -> None:
        if nodeid not in self.keys:
            names = self._mangle(nodeid)
            escaped = self._escape(names[-1])
            if hasattr(escaped, "uniobj"):  # pytest < 6: py.xml's raw text, XML-escaped
                escaped = xml.sax.saxutils.unescape(escaped.uniobj, _XML_QUOTES)
            self.keys[nodeid] = (".".join(names[:-1]), str(escaped))

    def phase(self, nodeid: str, phase: str, raised: bool) -> None:
        self.key(nodeid)
        phases = self.raw.setdefault(nodeid, {})
        phases[phase] = phases.get(phase, False) or raised

    def report(self, nodeid: str, outcome: str) -> None:
        self.key(nodeid)
        self.reports.setdefault(nodeid, []).append(outcome)

    def good(self, nodeid: str) -> bool:
        phases = self.raw.get(nodeid, {})
        reports = self.reports.get(nodeid, [])
        return (
            all(phase in phases and not phases[phase] for phase in PHASES)
            and bool(reports)
            and all(outcome == "passed" for outcome in reports)
        )

    def record(self, exit_code: int, problems: list[str]) -> dict[str, Any]:
        nodes = list(dict.fromkeys([*self.keys, *self.reports]))
        tests = []
        for nodeid in nodes:
            self.key(nodeid)
            classname, name = self.keys[nodeid]
            tests.append(
                {"nodeid": nodeid, "classname": classname, "name": name, "good": self.good(nodeid)}
            )
        return {"exit_code": exit_code, "problems": problems, "tests": tests}
