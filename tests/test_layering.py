"""The layering, checked from the modules' own imports: each folder imports only the folders below it.

    core < services < storage < index < rules < ops < agents < api < cli, agents.mcp

- `core/`: the record, the vocabularies, the errors, the settings and where a store is (stdlib + YAML).
- `services/`: leaf services behind small interfaces: embeddings, redaction, extraction, the LLM
  client and its prompts, conversation readers.
- `storage/`: the files on disk: `facts/`, the trash, the log, the journal, locks, atomic writes.
- `index/`: the derived sidecar (catalog, keyword index, vectors, sync).
- `rules/`: the decision rules and deciders (pure functions of texts, and the LLM decider).
- `ops/`: what a user does to a store (add, search, curate, import/export, ...), through one ChangeSet.
- `agents/`: the integrations that run the operations for others: the inbox worker, hook
  installers and capture, team sync.
- `api.py`: `memcli.Store`, the public facade.
- `cli/` and `agents/mcp.py`: presentation. They import only the public API, the core vocabulary
  and (the CLI) its own rendering.

Every `import memcli.x` / `from memcli.x import ...` counts, including lazy ones inside functions,
so a cycle cannot hide in a function body.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import memcli

PACKAGE = Path(memcli.__file__).parent

#: bottom up; a module may import its own layer and the ones below
LAYERS = ["core", "services", "storage", "index", "rules", "ops", "agents", "api", "presentation"]
PRESENTATION = {"cli", "agents.mcp"}


def layer(module: str) -> str:
    """The layer of a module named relative to the package (`ops.add`, `api`, `cli.app`; "" is the package)."""
    if module in ("", "api"):
        return "api"
    if module in ("__main__", "cli") or module.startswith("cli.") or module in PRESENTATION:
        return "presentation"
    return module.split(".")[0]


def modules() -> dict[str, Path]:
    """Every memcli source file by its dotted name below the package (`ops.add`, `index`)."""
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def imports(path: Path) -> set[str]:
    """The memcli modules a source file imports, anywhere in it, named as in `modules()`."""
    known = modules()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if not name.startswith("memcli.") and name != "memcli":
                continue
            dotted = name.removeprefix("memcli").lstrip(".")
            while dotted and dotted not in known:  # `memcli.ops.add.plan_add` -> `ops.add`
                dotted = dotted.rpartition(".")[0]
            out.add(dotted)
    return out


def test_every_module_sits_in_a_known_layer() -> None:
    assert {layer(m) for m in modules()} <= set(LAYERS)
    assert not [m for m in modules() if "." not in m and m not in ("", "__main__", "api", "index", "cli", "core",
                                                                     "services", "storage", "rules", "ops", "agents")]


def test_no_module_imports_a_layer_above_its_own() -> None:
    violations = []
    for me, path in sorted(modules().items()):
        for other in imports(path):
            if LAYERS.index(layer(other)) > LAYERS.index(layer(me)) and me not in ("", "__main__"):
                violations.append(f"{me} ({layer(me)}) imports {other} ({layer(other)})")
    assert violations == []


def test_presentation_imports_only_the_public_api_and_the_core_vocabulary() -> None:
    violations = []
    for me, path in sorted(modules().items()):
        if layer(me) != "presentation" or me == "__main__":
            continue
        for other in imports(path):
            if not (other in ("", "api") or layer(other) in ("core", "presentation")):
                violations.append(f"{me} imports {other}")
            if me == "agents.mcp" and other.startswith("cli"):
                violations.append(f"{me} imports {other}")
    assert violations == []


def _cycles() -> list[list[str]]:
    graph = {m: imports(p) - {m} for m, p in modules().items()}
    # a package's __init__ importing its own modules is not a cycle of two modules
    graph = {m: {o for o in deps if not o.startswith(f"{m}.") and o != m} for m, deps in graph.items()}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_there_is_no_import_cycle() -> None:
    assert _cycles() == []


def test_only_the_index_runs_sql_against_the_catalog() -> None:
    offenders = [me for me, p in modules().items()
                 if not me.startswith("index") and ".db.execute(" in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_the_public_api_is_typed_and_documented() -> None:
    import inspect

    from memcli.api import Store

    assert memcli.Store is Store
    for name, fn in inspect.getmembers(Store, inspect.isfunction):
        if name.startswith("_") or fn.__qualname__.split(".")[0] != "Store":
            continue
        sig = inspect.signature(fn)
        assert fn.__doc__, name
        assert sig.return_annotation is not inspect.Signature.empty, name
        for p in sig.parameters.values():
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                assert p.annotation is not inspect.Parameter.empty, (name, p.name)


def test_the_index_hands_out_memories_not_record_dicts() -> None:
    """One vocabulary: what the index returns about a memory is a `Memory` (or, for ranking, the
    typed `RankFields`), never the JSON record dict its catalog rows keep, read with `.get()`."""
    import inspect
    import typing

    from memcli.core.memory import Memory
    from memcli.index import Index

    readers = {"records", "records_of", "select", "iter_select", "catalog_entries"}
    for name, fn in inspect.getmembers(Index, inspect.isfunction):
        if name.startswith("_"):
            continue
        returns = str(inspect.signature(fn).return_annotation)
        assert "dict[str, Any]" not in returns, f"Index.{name} returns {returns}"
        if name in readers:
            assert "Memory" in returns, f"Index.{name} returns {returns}"
    assert typing.get_type_hints(Index.select)["return"] == list[Memory]
    record_reads = ('.get("superseded_by")', ".record[", ".record.get(", "h.record", "Memory.from_dict(r")
    offenders = [(me, pattern) for me, p in modules().items() if not me.startswith("index") and me != "core.memory"
                 for pattern in record_reads if pattern in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_the_public_store_is_a_facade_over_the_handle_not_a_handle() -> None:
    """`memcli.Store` composes the files+index handle the operations take; nothing outside
    `api.py` reaches through it (`._store`), and it has no public write that skips a ChangeSet."""
    from memcli.api import Store
    from memcli.ops.handle import Store as Handle

    assert Handle not in Store.__mro__
    assert not {"write", "lock", "purge_trash", "log_many"} & {n for n in dir(Store) if not n.startswith("_")}
    reach = re.compile(r"(?<!self)\._store\b")  # another object's handle (an operation's own `self._store` is its own)
    offenders = [me for me, p in modules().items() if me != "api" and reach.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
