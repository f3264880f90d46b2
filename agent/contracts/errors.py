"""The two errors that map onto the contract's exit codes: bad input (2) and infrastructure (3)."""


class UsageError(Exception):
    """Bad input or usage: the CLI prints the message on one line and exits 2."""

    exit_code = 2


class OptionError(UsageError):
    """One option's value out of its range (`--samples must be at least 1 (got -5)`): the CLI
    adds where the value was written when it was not typed on the command line (the config
    file and key, the OODA_* variable), as it does for a value of the wrong type."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag
        """The option's flag as the command line spells it (`--samples`)."""


class EndpointRefused(UsageError):
    """Bad input every request to the model's endpoint meets: a key it rejects (401), a model
    it does not have (404). A run stops at once, and so does an evaluation (every task would
    meet it), exit 2."""


class InfraError(Exception):
    """No sandbox, unreachable endpoint, broken engine: the CLI prints the message and exits 3."""

    exit_code = 3


class SandboxBroken(InfraError):
    """The sandbox itself stopped working mid-command (engine gone, container killed): never the
    candidate's fault, so the verdict is an infrastructure error, not a failure."""


class VerificationStopped(BaseException):  # noqa: N818 - a signal, as CancelledError
    """The run was decided (or ended) while a candidate was being verified: its command was
    stopped and it has no verdict (its record says "stopped", never "failed"). A BaseException,
    as asyncio's CancelledError: no stage's `except Exception` may turn it into a verdict."""


class GenerationError(Exception):
    """A model's answer that could not be had whole (the endpoint kept failing, a deadline or
    timeout passed mid-stream): carries the text that did arrive, which is kept, never lost."""

    def __init__(self, message: str, partial: str = "",
                 t_first_token: float | None = None) -> None:
        super().__init__(message)
        self.partial = partial
        """Text received before the failure (possibly empty)."""
        self.t_first_token = t_first_token
        """When its first text arrived (time.monotonic()), if any did."""


class ContextOverflow(UsageError):
    """A prompt that does not fit the model's context window with room for an answer: never
    sent again as it is (the loop may shorten a feedback conversation; a first prompt that does
    not fit is bad input, exit 2)."""

    def __init__(self, message: str, *, window: int, prompt_tokens: int | None = None) -> None:
        super().__init__(message)
        self.window = window
        self.prompt_tokens = prompt_tokens
