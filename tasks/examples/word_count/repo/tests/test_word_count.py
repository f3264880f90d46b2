"""Tests for word_counts() and top_words()."""

from word_count import top_words, word_counts


def test_empty_text() -> None:
    assert word_counts("") == {}


def test_punctuation_is_ignored() -> None:
    assert word_counts("red, green; red... blue!") == {"red": 2, "green": 1, "blue": 1}


def test_apostrophes_stay_in_words() -> None:
    assert word_counts("don't stop") == {"don't": 1, "stop": 1}


def test_case_is_ignored() -> None:
    assert word_counts("The cat saw the Cat") == {"the": 2, "cat": 2, "saw": 1}


def test_top_words_ties_alphabetical() -> None:
    text = "Beta alpha gamma beta ALPHA delta"
    assert top_words(text, 3) == [("alpha", 2), ("beta", 2), ("delta", 1)]
