"""Verify: the TaskVerifier, workspaces and baselines of one task."""
