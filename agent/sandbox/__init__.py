"""Sandboxes: where candidate code runs, isolated (Docker, bubblewrap) or, when named, not (local).

The registry (registry.py) picks and opens a backend; pool.py keeps warm sandboxes of one;
docker/ and bwrap.py are the isolated backends, image.py the offline root filesystem they share,
environments/ the per-task images. Every backend implements contracts.protocols.SandboxBackend.
See README.md (one line per module) and docs/ARCHITECTURE.md.
"""
