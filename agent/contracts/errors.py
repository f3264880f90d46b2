"""The two errors that map onto the contract's exit codes: bad input (2) and infrastructure (3)."""


class UsageError(Exception):
    """Bad input or usage: the CLI prints the message on one line and exits 2."""

    exit_code = 2


class InfraError(Exception):
    """No sandbox, unreachable endpoint, broken engine: the CLI prints the message and exits 3."""

    exit_code = 3


class SandboxBroken(InfraError):
    """The sandbox itself stopped working mid-command (engine gone, container killed): never the
    candidate's fault, so the verdict is an infrastructure error, not a failure."""
