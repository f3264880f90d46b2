"""The typer command line: one module per command (parse -> validate -> one call)."""
