"""agent/support/textsafe.py: control characters a candidate wrote become visible text."""

from __future__ import annotations

from ooda.agent.support.textsafe import markup_safe, printable


def test_escapes_become_visible_and_newlines_and_tabs_stay() -> None:
    text = "a\x1b]52;c;eA==\x07b\x1b[2J\rPASSED\r\n\tc\u202ed\x9b\x00\ud800"
    shown = printable(text)
    assert shown == "a\\x1b]52;c;eA==\\x07b\\x1b[2J\\x0dPASSED\n\tc\\u202ed\\x9b\\x00\\ud800"
    shown.encode("utf-8")  # no lone surrogate left: any stream can print it


def test_plain_text_is_unchanged() -> None:
    text = "tests/test_calc.py::test_add failed: assert -1 == 5\n\tdéjà vu ✓ 中文"
    assert printable(text) == text


def test_markup_is_escaped_for_rich() -> None:
    assert markup_safe("[bold green]PASSED[/]\x1b") == "\\[bold green]PASSED\\[/]\\x1b"
