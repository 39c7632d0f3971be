"""memcli: local-first long-term memory for developers and AI coding agents.

The library is usable without the CLI::

    from memcli import Store
    store = Store("~/.memcli")
    store.add("We deploy with `make release`; never push tags by hand.")
    for hit in store.search("how do we release?"):
        print(hit.score, hit.memory.text)
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs a hook ~10 ms
if TYPE_CHECKING:
    from typing import Any

    from memcli.api import Store

__all__ = ["Store", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`memcli.Store` is imported on first use: git hooks run `python -m memcli.agents.capture`, which
    must start in a few tens of milliseconds and never needs the YAML/Markdown layer."""
    if name == "Store":
        from memcli.api import Store

        return Store
    raise AttributeError(f"module 'memcli' has no attribute {name!r}")
