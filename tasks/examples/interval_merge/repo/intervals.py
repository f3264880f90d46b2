"""Merging closed integer intervals."""

Interval = tuple[int, int]


def merge_intervals(intervals: list[Interval]) -> list[Interval]:
    """Merge overlapping or touching intervals; the result is sorted by start."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def total_length(intervals: list[Interval]) -> int:
    """The length of the union of `intervals`."""
    return sum(end - start for start, end in merge_intervals(intervals))
