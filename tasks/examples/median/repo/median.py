"""Median of a sequence of numbers."""

from collections.abc import Sequence


def median(values: Sequence[float]) -> float:
    """The median of `values`: the middle value, or the mean of the two middle values."""
    if not values:
        raise ValueError("median() of an empty sequence")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle] + ordered[middle + 1]) / 2
