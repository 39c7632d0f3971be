"""The one error family of memcli, and the exit statuses the CLI maps it to.

Every error the library raises on purpose is a `MemcliError`: the CLI prints `str(error)` as one
line and exits with `error.exit_status`. Messages speak the library's terms (a setting, an id):
advice naming a flag is the CLI's to add. Imports nothing from memcli: every layer raises these.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """Process exit statuses: what a script calling memcli can rely on."""

    OK = 0
    ERROR = 1  # the command could not do what was asked; one line on stderr says why
    USAGE = 2  # the command line itself is wrong (unknown option, bad value)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


class MemcliError(Exception):
    """Root of every expected memcli failure: `str()` is one line for a person, `hint` an optional
    second one (what to do next)."""

    exit_status: ExitStatus = ExitStatus.ERROR

    def __init__(self, message: str = "", *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class InvalidInput(MemcliError):
    """A value given by the caller is not acceptable (a bad option value, an unknown type)."""

    exit_status = ExitStatus.USAGE


class InputRejected(MemcliError):
    """Data handed to memcli (stdin, an import file) cannot be used: empty, binary, malformed."""


class StoreError(MemcliError):
    """A store operation that cannot be done (locked, missing, already there)."""


class NotFound(StoreError):
    """No memory (or trashed memory) with that id."""


class Conflict(StoreError):
    """A file changed between planning and commit; nothing was written. Running again re-plans."""


class ConfigError(MemcliError):
    """A setting or store path that cannot be used; the message is shown to the user as is."""


class LLMNotConfigured(ConfigError):
    """An operation needs an LLM and none is configured."""


class EmbedError(MemcliError):
    """The embedding model cannot be loaded or run; the message says what to do."""


class IndexUnavailable(MemcliError):
    """The sidecar index cannot be used (e.g. no store)."""


class LLMError(MemcliError):
    """The LLM could not be used; `str()` is one line (no traceback text)."""


class LLMUnavailable(LLMError):
    """The model could not be reached or refused the request (timeout, refused, 429/5xx, bad key)."""


class LLMFormatError(LLMError):
    """The model answered but nothing usable could be parsed from its reply."""


__all__ = [
    "Conflict", "ConfigError", "EmbedError", "ExitStatus", "IndexUnavailable", "InputRejected", "InvalidInput",
    "LLMError", "LLMFormatError", "LLMNotConfigured", "LLMUnavailable", "MemcliError", "NotFound", "StoreError",
]
