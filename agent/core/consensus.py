"""How much a candidate's change agrees with the other samples', from the patches alone.

Different samples rarely write the same code (exact votes are almost always 1), but the right
fix tends to share its changed lines with other samples: the same line removed, the same
condition added. A candidate's `consensus` is the sum, over every other sample with a patch,
of the Jaccard similarity of their changed-line sets (a soft vote; a sample with the same code
counts 1). A line is its file, its sign (added or removed) and its text without whitespace;
blank lines do not count. Measured on real systems' candidates (bench/selection, tuning part
and candidates no machine here can run): the most agreeing candidate resolves 61.6% of 60
disagreeing instances against 39.9% for a random pick.
"""

from __future__ import annotations

from collections.abc import Sequence


def changed_lines(patch: str) -> frozenset[tuple[str, str, str]]:
    """(file, sign, text without whitespace) for each non-blank line `patch` adds or removes."""
    lines: set[tuple[str, str, str]] = set()
    path = ""
    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip().split("\t")[0]
            path = path[2:] if path.startswith("b/") else path
        elif line.startswith("--- "):
            continue
        elif line[:1] in ("+", "-"):
            text = "".join(line[1:].split())
            if text:
                lines.add((path, line[0], text))
    return frozenset(lines)


def jaccard(a: frozenset[tuple[str, str, str]], b: frozenset[tuple[str, str, str]]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def consensus(patches: Sequence[str], samples: Sequence[str]) -> list[float]:
    """Each of `patches`' agreement with `samples` (every sample's patch, each of `patches`
    among them once): the sum of its similarity to every sample but itself."""
    sample_lines = [changed_lines(p) for p in samples]
    scores = []
    for patch in patches:
        mine = changed_lines(patch)
        total = sum(jaccard(mine, other) for other in sample_lines)
        scores.append(round(total - (1.0 if mine else 0.0), 6))  # itself, counted once
    return scores
