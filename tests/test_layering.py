"""The layering, checked from the modules' own imports: a lower module never imports an upper one.

files < index < store handle < changes < planning < api < cli, with the shared vocabulary
(errors, config, memory, ...) and the leaf services (embedding, extraction, redaction, LLM) below
them all. Every `import memcli.x` / `from memcli.x import ...` counts, including the lazy ones
inside functions, so a cycle cannot hide in a function body.
"""

from __future__ import annotations

import ast
from pathlib import Path

import memcli

PACKAGE = Path(memcli.__file__).parent

LAYERS: list[tuple[str, set[str]]] = [
    ("vocabulary", {"errors", "vocab", "config", "memory", "facts", "decision", "discovery", "render", "ids", "chain",
                    "safety", "trust", "locks", "yaml_fast", "background", "lazy_re", "detached"}),
    ("services", {"embed", "extract", "redact", "llm", "llm_checks", "decide"}),
    ("files", {"files", "journal"}),
    # the index package, bottom up: the catalog, then the vector graph over it, the sync of both,
    # and the package itself (`Index`); its modules are named `index.<module>`
    ("index catalog", {"index.keyword", "index.catalog"}),
    ("index vectors", {"index.vectors"}),
    ("index sync", {"index.sync"}),
    ("index", {"index"}),
    ("store handle", {"store"}),
    ("changes", {"changes"}),
    ("planning", {"ingest", "batch", "curate", "io", "records", "history", "search", "admin", "ask", "sharing",
                  "repair"}),
    ("api", {"api"}),
]
TOP = len(LAYERS)  # the CLI, completion, entry points, and modules not placed yet


def rank(module: str) -> int:
    for i, (_, names) in enumerate(LAYERS):
        if module in names:
            return i
    return TOP


def layer_name(r: int) -> str:
    return LAYERS[r][0] if r < TOP else "cli"


def memcli_imports(path: Path) -> set[str]:
    """Top-level memcli module names a source file imports, anywhere in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "memcli":
                names = [f"memcli.{a.name}" for a in node.names]
        else:
            continue
        out |= {module_name(n) for n in names if n.startswith("memcli.")}
    return out


def module_name(dotted: str) -> str:
    """`memcli.x.y` -> `x` for a top-level module, `index.y` inside the index package."""
    parts = dotted.split(".")
    return ".".join(parts[1:3]) if parts[1] == "index" and len(parts) > 2 else parts[1]


def modules() -> dict[str, Path]:
    """Every memcli source file by module name (`index.<m>` inside the index package)."""
    out = {p.stem: p for p in PACKAGE.glob("*.py")}
    out["index"] = PACKAGE / "index" / "__init__.py"
    out |= {f"index.{p.stem}": p for p in (PACKAGE / "index").glob("*.py") if p.stem != "__init__"}
    return out


def test_no_module_imports_a_layer_above_its_own() -> None:
    violations = []
    for me, path in sorted(modules().items()):
        if me in ("__init__", "__main__"):
            continue
        for other in memcli_imports(path):
            if rank(other) > rank(me):
                violations.append(f"{me} ({layer_name(rank(me))}) imports {other} ({layer_name(rank(other))})")
    assert violations == []


def test_the_layers_are_in_the_documented_order() -> None:
    order = [rank(m) for m in ("files", "index", "store", "changes", "ingest", "curate", "io", "api", "cli")]
    assert order == sorted(order) and rank("files") < rank("index") < rank("ingest") < rank("api") < rank("cli")
    assert rank("errors") < rank("files") and rank("embed") < rank("index")


def test_the_files_layer_imports_only_memory_config_and_errors() -> None:
    assert memcli_imports(PACKAGE / "files.py") <= {"memory", "config", "errors", "vocab", "safety", "journal"}


def test_only_the_index_runs_sql_against_the_catalog() -> None:
    offenders = [me for me, p in modules().items()
                 if not me.startswith("index") and ".db.execute(" in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_the_index_is_a_package_of_catalog_vectors_keyword_and_sync() -> None:
    assert {"index.catalog", "index.vectors", "index.keyword", "index.sync"} <= set(modules())
    assert not (PACKAGE / "index.py").exists() and not (PACKAGE / "keyword_index.py").exists()
    # the vector graph and the sync reach the catalog through its methods, not its SQL
    assert ".db.execute(" not in (PACKAGE / "index" / "vectors.py").read_text(encoding="utf-8")


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

    from memcli.index import Index
    from memcli.memory import Memory

    readers = {"records", "records_of", "select", "iter_select", "catalog_entries"}
    for name, fn in inspect.getmembers(Index, inspect.isfunction):
        if name.startswith("_"):
            continue
        returns = str(inspect.signature(fn).return_annotation)
        assert "dict[str, Any]" not in returns, f"Index.{name} returns {returns}"
        if name in readers:
            assert "Memory" in returns, f"Index.{name} returns {returns}"
    assert typing.get_type_hints(Index.select)["return"] == list[Memory]
    # nobody outside the index re-reads catalog records as dicts: `.get("superseded_by")` was how
    # a record dict said "replaced" (a Memory says `m.superseded_by`), `hit.record` a search hit's
    record_reads = ('.get("superseded_by")', ".record[", ".record.get(", "h.record", "Memory.from_dict(r")
    offenders = [(me, pattern) for me, p in modules().items() if not me.startswith("index") and me != "memory"
                 for pattern in record_reads if pattern in p.read_text(encoding="utf-8")]
    assert offenders == []
