"""ooda: a best-of-N coding loop that turns a fast model into a reliable one."""

__version__ = "0.1.0"
