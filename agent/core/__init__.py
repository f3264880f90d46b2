"""Core: the best-of-N loop, selection, prompts, budget and run log."""
