"""Which stores may choose where data is sent.

A store's `config.toml` travels with a repository: anyone who can commit could point `api_base` at
their server and collect the key and the texts. So the settings that pick a destination or a
credential are read from a store's config only when the user trusts the store: their global store,
one listed in `$XDG_CONFIG_HOME/memcli/trusted` (`memcli trust DIR`), or any with
`MEMCLI_TRUST_STORE_CONFIG=1`. Otherwise they are ignored with one warning line.
"""

from __future__ import annotations

import os
from pathlib import Path

from memcli.core.discovery import global_store

DESTINATION_KEYS = ("llm_model", "api_base", "api_key")


def trust_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base else Path.home() / ".config") / "memcli" / "trusted"


def _canonical(store: Path) -> str:
    return str(Path(store).expanduser().resolve())


def trusted_stores() -> list[str]:
    try:
        lines = trust_file().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [x.strip() for x in lines if x.strip() and not x.lstrip().startswith("#")]


def is_trusted(store: Path) -> bool:
    """Whether `store`'s own config may set the LLM destination and credentials."""
    if os.environ.get("MEMCLI_TRUST_STORE_CONFIG", "").strip().lower() in ("1", "true", "yes"):
        return True
    path = _canonical(store)
    return path == _canonical(global_store()) or path in trusted_stores()


def set_trust(store: Path, trusted: bool = True) -> bool:
    """Add (or remove) a store in the user's trust list; returns whether the list changed."""
    path = _canonical(store)
    current = trusted_stores()
    if (path in current) == trusted:
        return False
    new = [*current, path] if trusted else [p for p in current if p != path]
    f = trust_file()
    f.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = f.with_name(f".{f.name}.{os.getpid()}.tmp")  # written whole, then renamed: never half a list
    tmp.write_text("".join(f"{p}\n" for p in new), encoding="utf-8")
    os.replace(tmp, f)
    return True
