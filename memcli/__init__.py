"""memcli: local-first long-term memory for developers and AI coding agents.

The library is usable without the CLI::

    from memcli import Store
    store = Store("~/.memcli")
    store.add("We deploy with `make release`; never push tags by hand.")
    for hit in store.search("how do we release?"):
        print(hit.score, hit.memory.text)
"""

from memcli.store import Store

__all__ = ["Store", "__version__"]
__version__ = "0.1.0"
