"""Notices for the user: a repair made or a degraded mode entered, by whichever layer met it.

Layers call `notice()`; the CLI prints what `drain()` returns after each command, once per message.
Lives in core so that every layer (the settings included) can report without importing upwards.
"""

from __future__ import annotations

_notices: list[str] = []


def notice(message: str) -> None:
    """Record a repair or a degraded mode for the user (printed once by the CLI)."""
    if message not in _notices:
        _notices.append(message)


def drain() -> list[str]:
    """The notices since the last drain, oldest first."""
    out = list(_notices)
    _notices.clear()
    return out
