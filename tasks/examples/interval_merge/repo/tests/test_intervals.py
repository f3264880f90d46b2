"""Tests for merge_intervals() and total_length()."""

from intervals import merge_intervals, total_length


def test_empty() -> None:
    assert merge_intervals([]) == []


def test_disjoint_stay_apart() -> None:
    assert merge_intervals([(5, 6), (1, 2)]) == [(1, 2), (5, 6)]


def test_overlapping_merge() -> None:
    assert merge_intervals([(1, 3), (2, 5), (8, 9)]) == [(1, 5), (8, 9)]


def test_touching_merge() -> None:
    assert merge_intervals([(1, 2), (2, 4)]) == [(1, 4)]


def test_contained_interval() -> None:
    assert merge_intervals([(1, 10), (2, 3)]) == [(1, 10)]


def test_total_length() -> None:
    assert total_length([(0, 4), (1, 2), (6, 8)]) == 6
