"""LLM cost and memcli's own overhead for `memcli add` of a typical 10-turn developer conversation.

    .venv/bin/python bench/llm_overhead.py [--runs 5] [--latency 0.2] [--background 200]

The model is tests/llm_server.py's FakeLLMServer (an OpenAI-compatible server on 127.0.0.1)
reached through litellm exactly as a local Ollama / vLLM server would be, answering with
realistic extract and decide replies after a fixed artificial latency per request. The replies
are computed from each request (the decide reply names the neighbours memcli actually sent),
so the figures hold whatever the embedding neighbourhood looks like.

Each run adds the whole conversation with `memcli add --json` (Typer's runner, in-process) to a
fresh copy of a store holding `--background` generated memories plus three that the conversation
updates, so both requests happen: extract, then one decide for the facts with neighbours.

Reported per add (median over runs): requests, prompt / completion tokens (as the server counts
them: ~4 characters a token), wall time, LLM time (inside litellm's completion calls, so it
includes litellm's own per-call work as well as the model's latency) and memcli's overhead =
wall - LLM time. The one-off costs of a process (importing litellm, loading the embedding model,
the first request's client setup) are measured apart, in a warm-up add that is not counted.
Target: overhead < 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import make_texts, table, verdict, write_jsonl  # noqa: E402
from llm_server import FakeLLMServer  # noqa: E402

TARGET_S = 0.5

CONVERSATION = """user: I'm setting up the new billing service. We moved the main app from PostgreSQL 15 to 16 last \
week, so billing starts on 16 as well.
assistant: Good choice: PostgreSQL 16 is a safe default. Do you want me to update the docker-compose file?
user: Yes please. Migrations are Alembic as usual; run `alembic upgrade head` before the app starts.
assistant: Noted. Here is the service block:
```yaml
billing-db:
  image: postgres:16
  environment:
    POSTGRES_DB: billing
```
user: Perfect. Tests run with `pytest -x -q`. CI is GitHub Actions, and the desktop build needs the macOS runner.
assistant: I'll add a workflow step for that. Should I cache pip dependencies?
user: Yes, cache pip between runs. Also, Alice owns the billing service and reviews all of its pull requests.
assistant: Got it. Anything else I should know?
user: Staging deploys are `make deploy ENV=staging`. And never deploy on Fridays.
assistant: Understood, I'll keep that in mind. Thanks!"""

SEEDS = [  # what the store already knows and the conversation updates
    "The project uses PostgreSQL 15 as its main database",
    "The CI pipeline runs on GitHub Actions",
    "Database migrations are written with Alembic",
]

FACTS = [
    {"text": "The project uses PostgreSQL 16 as its main database", "type": "semantic",
     "tags": ["postgres", "database"], "confidence": 0.95},
    {"text": "Database migrations are written with Alembic and applied with alembic upgrade head before the app "
             "starts", "type": "procedural", "tags": ["alembic", "migrations"], "confidence": 0.9,
     "code_pattern": "alembic upgrade head"},
    {"text": "The billing database runs the postgres:16 image with POSTGRES_DB=billing in docker-compose",
     "type": "semantic", "tags": ["docker-compose", "billing"], "confidence": 0.85,
     "code_pattern": "billing-db:\n  image: postgres:16\n  environment:\n    POSTGRES_DB: billing"},
    {"text": "Tests run with pytest -x -q", "type": "procedural", "tags": ["pytest", "testing"], "confidence": 0.9,
     "code_pattern": "pytest -x -q"},
    {"text": "The CI pipeline runs on GitHub Actions with a macOS runner for the desktop build", "type": "semantic",
     "tags": ["ci", "github-actions"], "confidence": 0.9},
    {"text": "CI caches pip dependencies between runs", "type": "semantic", "tags": ["ci", "pip"], "confidence": 0.85},
    {"text": "Alice owns the billing service and reviews all of its pull requests", "type": "semantic",
     "tags": ["billing", "ownership"], "confidence": 0.95},
    {"text": "Deploy to staging with make deploy ENV=staging", "type": "procedural", "tags": ["deploy", "staging"],
     "confidence": 0.9, "code_pattern": "make deploy ENV=staging"},
    {"text": "Never deploy on Fridays", "type": "semantic", "tags": ["deploy", "policy"], "confidence": 0.9},
]
EXTRACT_REPLY = json.dumps({"facts": FACTS, "skipped": 5})


class ScriptedModel(FakeLLMServer):
    """Answers extract / decide / anything else like a well-behaved model, after `latency` seconds."""

    def __init__(self, latency: float) -> None:
        super().__init__()
        self.latency = latency

    def _record_and_pop(self, body: dict[str, Any]) -> Any:
        with self._lock:
            self.requests.append(body)
        system = next((m["content"] for m in body.get("messages", []) if m["role"] == "system"), "")
        user = next((m["content"] for m in body.get("messages", []) if m["role"] == "user"), "")
        if system.startswith("You extract"):
            return {"content": EXTRACT_REPLY, "delay": self.latency}
        if system.startswith("You maintain"):
            data = json.loads(user[user.index("<data>") + 6 : user.rindex("</data>")])
            decisions = []
            for f in data["facts"]:
                top = max(f["neighbours"], key=lambda n: n["similarity"])
                if top["similarity"] >= 0.97:
                    decisions.append({"fact": f["fact"], "event": "NONE", "target_id": top["id"], "text": top["text"],
                                      "reasoning": "already known", "confidence": 0.9})
                else:
                    decisions.append({"fact": f["fact"], "event": "UPDATE", "target_id": top["id"],
                                      "text": f["text"], "reasoning": "refines the stored memory with new details",
                                      "confidence": 0.85})
            return {"content": json.dumps({"decisions": decisions}), "delay": self.latency}
        return {"content": "ok", "delay": self.latency}


def build_seed_store(base: Path, background: int, cli: Any) -> Path:
    store = base / "seed-store"
    jsonl = base / "seed.jsonl"
    write_jsonl(jsonl, make_texts(background, seed=7))
    with open(jsonl, "a", encoding="utf-8") as f:
        for i, text in enumerate(SEEDS):
            f.write(json.dumps({"id": f"SEED{i:04d}", "text": text, "type": "semantic",
                                "created": "2026-01-15T10:00:00Z"}) + "\n")
    cli(store, "import", "--create", str(jsonl))
    return store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="measured adds (after one warm-up add)")
    ap.add_argument("--latency", type=float, default=0.2, help="artificial model latency per request, seconds")
    ap.add_argument("--background", type=int, default=200, help="unrelated memories already in the store")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memcli-llm-bench-"))
    os.environ["MEMCLI_CACHE_DIR"] = str(work / "cache")  # never the user's cache
    for key in [k for k in os.environ if k.startswith("MEMCLI_") and k != "MEMCLI_CACHE_DIR"]:
        del os.environ[key]

    t0 = time.perf_counter()
    from typer.testing import CliRunner

    from memcli.cli.app import app
    from memcli.services.embed import Embedder
    cli_import_s = time.perf_counter() - t0

    # Time every embedding-model load (a one-off per process in real use: reported apart).
    loads: list[float] = []
    original_load = Embedder._load

    def timed_load(self: Embedder) -> Any:
        if self._model is not None:
            return self._model
        start = time.perf_counter()
        try:
            return original_load(self)
        finally:
            loads.append(time.perf_counter() - start)

    Embedder._load = timed_load  # type: ignore[method-assign]
    runner = CliRunner()

    def cli(store: Path, *argv: str, env: dict[str, str] | None = None) -> Any:
        result = runner.invoke(app, ["--store", str(store), *argv], env=env or {}, catch_exceptions=False)
        if result.exit_code != 0:
            raise SystemExit(f"memcli {' '.join(argv)} failed ({result.exit_code}):\n{result.output}")
        return result

    print(f"# building the seed store ({args.background} background memories + {len(SEEDS)} related) ...",
          file=sys.stderr, flush=True)
    seed_store = build_seed_store(work, args.background, cli)
    seed_loads = len(loads)

    rows: list[dict[str, float]] = []
    with ScriptedModel(args.latency) as server:
        env = {"MEMCLI_LLM_MODEL": server.model, "MEMCLI_LLM_API_BASE": server.url}

        t0 = time.perf_counter()
        from memcli.services.llm.client import _litellm

        _litellm()
        litellm_import_s = time.perf_counter() - t0

        def one_add(tag: str) -> dict[str, float]:
            store = work / f"store-{tag}"
            shutil.copytree(seed_store, store)
            n_loads, n_requests = len(loads), len(server.requests)
            start = time.perf_counter()
            result = cli(store, "add", "--json", "--session", f"bench-{tag}", CONVERSATION, env=env)
            wall = time.perf_counter() - start
            out = json.loads(result.stdout)
            usage = out["llm"]
            events = [e["event"] for e in out["memory"]]
            if usage["requests"] != len(server.requests) - n_requests:
                raise SystemExit("request count mismatch between memcli and the server")
            return {
                "wall": wall, "llm": usage["llm_seconds"], "requests": usage["requests"],
                "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
                "model_load": sum(loads[n_loads:]), "facts": len(out["extraction"]["facts"]),
                "skipped": out["extraction"]["skipped"],
                "added": events.count("ADD"), "updated": events.count("UPDATE"), "known": events.count("NONE"),
            }

        warm = one_add("warmup")
        for i in range(args.runs):
            rows.append(one_add(str(i)))

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    overheads = [r["wall"] - r["llm"] - r["model_load"] for r in rows]
    simulated = med("requests") * args.latency
    overhead = statistics.median(overheads)
    print(f"\nmemcli add of a 10-turn developer conversation ({len(CONVERSATION)} chars), "
          f"{args.runs} runs after a warm-up, fake model latency {args.latency:.2f} s/request, "
          f"store of {args.background + len(SEEDS)} memories\n")
    print(table(["per add (median)", "value"], [
        ["facts extracted / skipped", f"{med('facts'):.0f} / {med('skipped'):.0f}"],
        ["events: added / updated / known", f"{med('added'):.0f} / {med('updated'):.0f} / {med('known'):.0f}"],
        ["LLM requests", f"{med('requests'):.0f} (extract + decide)"],
        ["prompt tokens", f"{med('prompt_tokens'):.0f}"],
        ["completion tokens", f"{med('completion_tokens'):.0f}"],
        ["wall time", f"{med('wall'):.3f} s"],
        ["LLM time (inside litellm calls)", f"{med('llm'):.3f} s"],
        ["  of which simulated model latency", f"{simulated:.3f} s"],
        ["  of which litellm per-call work", f"{med('llm') - simulated:.3f} s"],
        ["memcli overhead = wall - LLM time", f"{overhead:.3f} s (max {max(overheads):.3f} s)"],
    ]))
    print(f"\ntarget: overhead < {TARGET_S} s -> {verdict(overhead < TARGET_S)}")
    print("\none-off costs (per process, not in the figures above):")
    print(table(["cost", "seconds"], [
        ["import memcli.cli.app", f"{cli_import_s:.3f}"],
        ["import litellm (lazy, LLM path only)", f"{litellm_import_s:.3f}"],
        ["embedding model load (first use)", f"{loads[0]:.3f}" if loads else "-"],
        ["warm-up add: wall (first request's client setup)", f"{warm['wall']:.3f}"],
        ["warm-up add: overhead = wall - LLM - model load",
         f"{warm['wall'] - warm['llm'] - warm['model_load']:.3f}"],
    ]))
    extra_loads = len(loads) - seed_loads - (1 if warm["model_load"] else 0)
    if extra_loads > 0:
        print(f"\nnote: {extra_loads} model load(s) during measured runs were subtracted from the overhead")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
