"""`python -m memcli` and the `memcli` command.

A Claude Code hook runs `memcli capture claude-code` after every turn, on a budget of a few tens of
milliseconds: that one command goes straight to the standard-library capture (which always exits 0
and records a failure in the store's `inbox/errors.log`), without loading the CLI framework.
Everything else is the full CLI.
"""

from __future__ import annotations

import sys

_HOOK_FLAGS = {"--no-redact"}


def _hook_capture(argv: list[str]) -> list[str] | None:
    """The capture module's arguments when `argv` is `[--store DIR] capture claude-code [--store DIR]
    [--no-redact]`, else None."""
    store: list[str] = []
    rest = list(argv)
    while rest[:1] in (["--store"], ["-s"]) and len(rest) >= 2:
        store, rest = ["--store", rest[1]], rest[2:]
    if rest[:2] != ["capture", "claude-code"]:
        return None
    tail = rest[2:]
    out = []
    while tail:
        if tail[0] in ("--store", "-s") and len(tail) >= 2:
            store, tail = ["--store", tail[1]], tail[2:]
        elif tail[0] in _HOOK_FLAGS:
            out.append(tail.pop(0))
        else:
            return None  # --json, --help...: the full CLI
    return ["claude-code", *store, *out]


def main() -> None:
    args = _hook_capture(sys.argv[1:])
    if args is not None:
        from memcli.agents.capture import main as capture

        sys.exit(capture(args))
    from memcli.cli.app import main as cli

    cli()


if __name__ == "__main__":
    main()
