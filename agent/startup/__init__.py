"""Start-up: entry, daemon, client, prestart -- the only code that forks or keeps module state."""
