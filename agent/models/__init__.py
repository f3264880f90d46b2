"""Models: the registry of model clients (openai, gold, replay server)."""
