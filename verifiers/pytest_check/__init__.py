"""The pytest stage: run, parse, grade, and the in-sandbox guard."""
