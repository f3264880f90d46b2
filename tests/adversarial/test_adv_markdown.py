"""Issue 33's sixth class: candidate text rendered as live Markdown in `ooda ci`'s comment.md
(real TaskVerifier in Docker and bwrap; the comment rendered by agent/app/ci/comment.py and read
back with markdown-it, GitHub-flavoured tables on). A candidate whose syntax error quotes a line
carrying an `@mention`, a link, an HTML comment and an image, and one whose failing assertion
says the same, show that text only inside code spans: no mention, link, image or comment is
live under the bot's name. The control: the same attempts without the trick say what failed in
the same table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from adv_helpers import CALC, calc_patch, make_task
from adv_helpers import verify as verify_task
from markdown_it import MarkdownIt

from ooda.agent.app.ci.comment import render_comment
from ooda.agent.app.ci.outcome import FailedTest, FailureReport
from ooda.agent.core.loop import Attempt, RunResult
from ooda.agent.core.records import RunSummary, Tokens

PAYLOAD = "@octocat [win](https://evil.example/x) <!-- hide --> <img src=x onerror=alert(1)> ``"
SYNTAX = CALC.replace("return a - b", f"return a - b ) # {PAYLOAD}")
ASSERTING = CALC.replace("return a - b", f"raise AssertionError({PAYLOAD!r})")
HONEST_WRONG = CALC.replace("return a - b", "return a * b")


def _comment(verdicts: list[tuple[str, object]]) -> str:
    attempts = []
    for index, (patch, verdict) in enumerate(verdicts):
        attempt = Attempt(f"r1c{index + 1}", 1, None, [])
        attempt.status, attempt.reason = "failed", getattr(verdict, "reason", "")
        attempt.patch, attempt.verdict = patch, verdict  # type: ignore[assignment]
        attempts.append(attempt)
    summary = RunSummary("run-1", "calc", "failed", "rounds exhausted", model="m",
                         attempts=len(attempts), wall_s=1.0, tokens=Tokens(1, 1))
    result = RunResult("failed", "rounds exhausted", None, attempts, 1, summary)
    report = FailureReport(
        fail_to_pass=["tests/test_calc.py::test_add"],
        pass_to_pass=[],
        failures=[FailedTest("tests/test_calc.py::test_add", f"E   AssertionError: {PAYLOAD}")],
        source="JUnit r.xml",
    )
    return render_comment(report, result)


def _live(markdown: str) -> list[str]:
    """What of the payload GitHub would render live: HTML, links, images, and mentions outside
    code (GitHub leaves text in code elements alone)."""
    parser = MarkdownIt("commonmark", {"html": True}).enable("table")
    html = parser.render(markdown)
    found = []
    if "evil.example" in re.sub(r"<code>.*?</code>", "", html, flags=re.S):
        found.append("a link")
    if re.search(r"<img|<!--\s*hide", html):
        found.append("HTML")
    if "@octocat" in re.sub(r"<code>.*?</code>", "", html, flags=re.S):
        found.append("a mention")
    return found


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_task(tmp_path_factory.mktemp("markdown"), timeout_s=120)


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_candidate_text_is_inert_in_the_ci_comment(task: Path, tmp_path: Path, backend: str) -> None:
    verdicts = []
    for name, source in (("syntax", SYNTAX), ("asserting", ASSERTING)):
        patch = calc_patch(source)
        verdict = verify_task(task, patch, tmp_path / name, backend)
        assert verdict.status == "failed"
        verdicts.append((patch, verdict))
    assert "octocat" in verdicts[0][1].feedback + verdicts[1][1].feedback  # the text is there
    comment = _comment(verdicts)
    assert "octocat" in comment
    assert _live(comment) == [], comment


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_the_control_says_what_failed(task: Path, tmp_path: Path, backend: str) -> None:
    patch = calc_patch(HONEST_WRONG)
    verdict = verify_task(task, patch, tmp_path, backend)
    comment = _comment([(patch, verdict)])
    assert "| `r1c1` | 1 | failed (pytest) |" in comment, comment
    assert "test_add" in comment
