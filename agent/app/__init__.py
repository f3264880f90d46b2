"""Applications: run, evaluate, ci, report, metrics."""
