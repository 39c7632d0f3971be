"""memcli's LLM path on a real model: per case, what was stored and what it cost.

    MEMCLI_LLM_MODEL=openai/qwen2.5-coder-0.5b MEMCLI_LLM_API_BASE=http://127.0.0.1:8765/v1 \\
        .venv/bin/python bench/llm_real.py [--cases a,b] [--json out.json] [--no-llm-baseline]

The server is any OpenAI-compatible one (../shared/llm/serve.sh starts llama-cpp-python's with a
small local model). The case set is tests/llm_cases.py. Each case gets a fresh store, its seed
memories (verbatim), then one `add` through the library (in-process: the one-off costs of the
process are measured apart, up front: importing litellm, loading the embedding model).

Printed per case: parse ok (the model's reply was used) or fallback (heuristic extractor), facts
found / expected, code strings intact / expected, junk and forbidden (secret, injected) memories
stored, decision right, requests, replies cut at max_tokens, model time and memcli's own time
(wall time of the add minus the time inside the model requests). Totals at the end, and the same
run with --no-llm as the baseline (unless --no-llm-baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from llm_cases import ASK_CASES, CASES, MERGE_CASES, CaseResult, MergeAskResult, run_ask_case, run_case, run_merge_case  # noqa: E402,I001


def _row(r: CaseResult) -> str:
    dec = "-" if not r.decision_expected else ("right" if r.decision_right else f"WRONG ({r.decision_seen})")
    parse = "error" if r.error else ("ok" if r.method == "llm" else "fallback")
    return (f"{r.id:26} {parse:8} facts {r.facts_found}/{r.facts_expected}  code {r.code_found}/{r.code_expected}  "
            f"junk {len(r.junk)}  forbidden {len(r.forbidden)}  invalid {r.invalid:2}  cut {r.cut_off}  "
            f"req {r.requests}  model {r.model_s:6.1f}s  own {r.own_s:5.2f}s (cpu {r.own_cpu_s:4.2f}s)  decision {dec}")


def _merge_ask_row(r: MergeAskResult) -> str:
    if r.error:
        return f"{r.id:26} ERROR {r.error}"
    extra = (f"stale {r.stale}" if r.id.startswith("merge")
             else f"cited {r.cited} matched {r.matched} unknown {r.unknown}")
    text = r.text.replace("\n", " | ")[:160]
    return (f"{r.id:26} {r.method:9} {'right' if r.right else 'WRONG'}  kept {r.kept}/{r.keep_expected}  {extra}  "
            f"model {r.model_s:5.1f}s  cpu {r.own_cpu_s:4.2f}s{f'  note: {r.note}' if r.note else ''}\n    = {text}")


def totals(results: list[CaseResult]) -> dict[str, float | int]:
    done = [r for r in results if not r.error]
    own = [r.own_s for r in done]
    cpu = [r.own_cpu_s for r in done]
    model = [r.model_s for r in done]
    t: dict[str, float | int] = {
        "cases": len(results),
        "errors": len(results) - len(done),
        "parse_ok": sum(r.method == "llm" for r in done),
        "fallback": sum(r.method == "heuristic" for r in done),
        "facts_found": sum(r.facts_found for r in results),
        "facts_expected": sum(r.facts_expected for r in results),
        "code_found": sum(r.code_found for r in results),
        "code_expected": sum(r.code_expected for r in results),
        "junk": sum(len(r.junk) for r in results),
        "forbidden": sum(len(r.forbidden) for r in results),
        "cut_off": sum(r.cut_off for r in results),
        "decisions_right": sum(r.decision_right for r in results),
        "decisions_expected": sum(r.decision_expected for r in results),
        "model_s_median": round(statistics.median(model), 2) if model else 0.0,
        "model_s_max": round(max(model), 2) if model else 0.0,
        "own_s_median": round(statistics.median(own), 3) if own else 0.0,
        "own_s_max": round(max(own), 3) if own else 0.0,
        "own_cpu_s_median": round(statistics.median(cpu), 3) if cpu else 0.0,
        "own_cpu_s_max": round(max(cpu), 3) if cpu else 0.0,
    }
    return t


def _print_totals(label: str, t: dict[str, float | int]) -> None:
    print(f"{label}: parse ok {t['parse_ok']}/{t['cases']}, fallback {t['fallback']}, errors {t['errors']}; "
          f"facts {t['facts_found']}/{t['facts_expected']}, code {t['code_found']}/{t['code_expected']}; "
          f"junk {t['junk']}, forbidden {t['forbidden']}, cut at max_tokens {t['cut_off']}; "
          f"decisions {t['decisions_right']}/{t['decisions_expected']}; model median {t['model_s_median']}s "
          f"(max {t['model_s_max']}s); memcli's own median {t['own_s_median']}s (max {t['own_s_max']}s), "
          f"CPU median {t['own_cpu_s_median']}s (max {t['own_cpu_s_max']}s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", help="comma-separated case ids (default: all)")
    ap.add_argument("--json", help="write per-case results and totals here")
    ap.add_argument("--no-llm-baseline", action="store_true", help="skip the --no-llm baseline run")
    ap.add_argument("--verbose", action="store_true", help="print the stored memories of each case")
    ap.add_argument("--merge-ask", choices=["yes", "no", "only"], default="yes",
                    help="also run the merge and ask cases (only: just those)")
    args = ap.parse_args()

    from memcli.core.config import Config

    model, base = os.environ.get("MEMCLI_LLM_MODEL"), os.environ.get("MEMCLI_LLM_API_BASE")
    if not model:
        sys.exit("set MEMCLI_LLM_MODEL (and MEMCLI_LLM_API_BASE for a local server)")
    cases = CASES if not args.cases else [c for c in CASES if c["id"] in args.cases.split(",")]
    if args.merge_ask == "only":
        cases = []
    config = Config(llm_model=model, api_base=base, llm_retries=0,
                    llm_timeout=float(os.environ.get("MEMCLI_LLM_TIMEOUT") or 0) or None)
    t0 = time.perf_counter()
    from memcli.services.llm.client import _litellm

    _litellm()
    litellm_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        from memcli.ops.handle import Store

        t0 = time.perf_counter()
        warm = Store(Path(tmp) / "warm", config)
        warm.init()
        warm.index.embedder.embed([f"warm up the embedding model {time.time()}"])  # a cache miss: loads it
        embed_s = time.perf_counter() - t0
        warm.close()
        print(f"model {model} at {base}; one-off: litellm import {litellm_s:.2f}s, embedding model load "
              f"{embed_s:.2f}s (not counted below)")
        results: list[CaseResult] = []
        for case in cases:
            r = run_case(case, Path(tmp) / "llm", config)
            results.append(r)
            print(_row(r) + (f"  ERROR {r.error}" if r.error else ""), flush=True)
            for line in r.junk + r.forbidden:
                print(f"    !! {line}")
            if args.verbose:
                for text in r.stored:
                    print("    + " + text.replace("\n", "\n      "))
        t = totals(results)
        merge_ask: list[MergeAskResult] = []
        if args.merge_ask != "no":
            for case in MERGE_CASES:
                merge_ask.append(run_merge_case(case, Path(tmp) / "merge", config))
                print(_merge_ask_row(merge_ask[-1]), flush=True)
            for case in ASK_CASES:
                merge_ask.append(run_ask_case(case, Path(tmp) / "ask", config))
                print(_merge_ask_row(merge_ask[-1]), flush=True)
        baseline = None
        if not args.no_llm_baseline and cases:
            plain = replace(config, llm_model=None)
            base_results = [run_case(c, Path(tmp) / "nollm", plain) for c in cases]
            baseline = totals(base_results)
    if cases:
        _print_totals(f"{model}", t)
    if merge_ask:
        merges = [r for r in merge_ask if r.id.startswith("merge")]
        asks = [r for r in merge_ask if r.id.startswith("ask")]
        used = sum(r.method == "llm" for r in merges)
        refused = sum(r.method == "heuristic" for r in merges)
        named = sum(not r.cited and bool(r.matched) for r in asks)
        print(f"{model} merge: right {sum(r.right for r in merges)}/{len(merges)} (model's text used {used}, "
              f"refused -> heuristic {refused}, errors {sum(bool(r.error) for r in merges)}); "
              f"ask: right {sum(r.right for r in asks)}/{len(asks)} "
              f"(model cited an id {sum(bool(r.cited) for r in asks)}"
              f", named by memcli {named}, invented ids {sum(len(r.unknown) for r in asks)})")
    if baseline:
        _print_totals("--no-llm baseline", baseline)
    if args.json:
        Path(args.json).write_text(json.dumps({"model": model, "litellm_import_s": litellm_s, "embed_load_s": embed_s,
                                               "totals": t, "baseline": baseline,
                                               "cases": [asdict(r) for r in results],
                                               "merge_ask": [asdict(r) for r in merge_ask]}, indent=1))


if __name__ == "__main__":
    main()
