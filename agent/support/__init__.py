"""Support: stdlib-only helpers any layer may use (host file trees, safe text)."""
