"""The small src-layout project several environment tests build (tests/agent/sandbox,
tests/agent/verify, tests/acceptance): one text, because its install files are part of the
environment's image hash, so every test that writes it shares one built image."""

DEMO_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "0.1"
requires-python = ">=3.9,<3.10"
dependencies = ["MarkupSafe==2.0.1"]

[tool.setuptools.packages.find]
where = ["src"]
"""
