"""Tests for median()."""

import pytest

from median import median


def test_odd_length() -> None:
    assert median([3, 1, 2]) == 2


def test_single_value() -> None:
    assert median([7.5]) == 7.5


def test_even_length() -> None:
    assert median([4, 1, 3, 2]) == 2.5


def test_two_values() -> None:
    assert median([10, 20]) == 15


def test_empty_raises() -> None:
    with pytest.raises(ValueError):
        median([])


def test_input_not_modified() -> None:
    values = [3.0, 1.0, 2.0]
    median(values)
    assert values == [3.0, 1.0, 2.0]
