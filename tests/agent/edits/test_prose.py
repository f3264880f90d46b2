"""prose_before_edits: the prose an answer streams before any edit begins (#28's early stop)."""

from __future__ import annotations

from ooda.agent.edits import prose_before_edits


def test_prose_is_counted_until_an_edit_begins_in_any_format() -> None:
    assert prose_before_edits("Let me think about this.\nThe bug is in gcd.") is not None
    for begun in ("Fix:\n```python\ndef f(): ...\n", "gcd.py\n<<<<<<< SEARCH\n",
                  "--- a/gcd.py\n+++ b/gcd.py\n", "diff --git a/x b/x\n", "@@ -1 +1 @@\n"):
        assert prose_before_edits(begun) is None, begun


def test_a_leading_think_block_is_not_prose() -> None:
    assert prose_before_edits("<think>" + "hmm " * 500) == ""
    assert prose_before_edits("<think>long musing</think>\nShort answer.") == "\nShort answer."
    assert prose_before_edits("<think>x</think>\n```diff\n") is None
