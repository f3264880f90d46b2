"""`ooda eval`: many tasks, K at a time, scored in an evaluation directory."""
