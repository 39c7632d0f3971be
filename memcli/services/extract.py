"""Heuristic fact extraction: turn a chat, note, commit message or Markdown file into candidate memories.

This is the offline path (no LLM, no network): it must be cheap enough to run on every `memcli add`
and on whole files, so everything here is line scanning plus a handful of precompiled regexes.
The guiding rule is *conservative*: junk stored in long-term memory pollutes every later search,
so greetings, questions, filler, search-output and prompt echoes are dropped (and counted in
``Extraction.skipped``), while anything that reads like a decision, convention, command, gotcha,
preference or project fact is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memcli.core.facts import MEMORY_TYPES, Extraction, Fact
from memcli.core.lazy_re import lazy_compile
from memcli.core.text import PYTHON_VERSION_ALONE_RE

__all__ = ["heuristic_extract", "infer_tags", "detect_flags", "code_pattern_of", "normalise", "junk_reason",
           "fact_from_text"]

MAX_TAGS = 5
_CONF_DEFAULT = 0.7
_CONF_RULE = 0.8
_CONF_HEDGED = 0.6

# ----------------------------------------------------------------------------------------------
# Tag vocabulary. Single tokens are looked up in a dict (fast on large inputs); multi-word and
# context-dependent terms ("go build", "make test", "main.go") go through one small regex.
# ----------------------------------------------------------------------------------------------

# canonical tag -> (single-token synonyms, implied tags)
_VOCAB: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "python": (("python", "python3", "python2", "py", "py3", "cpython", "pypy"), ()),
    "javascript": (("javascript", "js", "ecmascript", "es6", "mjs", "cjs"), ()),
    "typescript": (("typescript", "ts", "tsx", "tsc", "tsconfig"), ()),
    "rust": (("rust", "rustc", "rustup", "rs", "clippy"), ()),
    "go": (("golang", "gofmt", "goroutine", "goroutines"), ()),
    "java": (("java", "jvm", "jdk", "openjdk", "javac"), ()),
    "cpp": (("c++", "cpp", "cmake"), ()),
    "csharp": (("c#", "csharp", "dotnet"), ()),
    "ruby": (("ruby", "rails", "bundler", "rubygems"), ()),
    "php": (("php", "laravel"), ()),
    "sql": (("sql",), ("database",)),
    "bash": (("bash", "zsh", "shell", "sh", "shellcheck"), ()),
    "git": (("git", "rebase", "rebasing", "squash", "commit", "commits", "gitignore", "gitattributes"), ()),
    "github": (("github", "gh"), ()),
    "docker": (("docker", "dockerfile", "dockerfiles", "container", "containers", "podman"), ()),
    "kubernetes": (("kubernetes", "k8s", "kubectl", "helm", "minikube"), ()),
    "npm": (("npm", "npx"), ()),
    "pnpm": (("pnpm",), ()),
    "yarn": (("yarn",), ()),
    "pip": (("pip", "pip3", "pipx"), ()),
    "uv": (("uv", "uvx"), ()),
    "poetry": (("poetry",), ()),
    "cargo": (("cargo",), ("rust",)),
    "pytest": (("pytest", "conftest"), ("testing",)),
    "react": (("react", "reactjs", "jsx", "nextjs"), ()),
    "node": (("nodejs", "node_modules"), ()),
    "django": (("django",), ()),
    "flask": (("flask",), ()),
    "fastapi": (("fastapi",), ()),
    "postgres": (("postgres", "postgresql", "psql", "pg_dump", "pgbouncer"), ("database",)),
    "mysql": (("mysql", "mariadb"), ("database",)),
    "sqlite": (("sqlite", "sqlite3"), ("database",)),
    "mongodb": (("mongo", "mongodb"), ("database",)),
    "redis": (("redis",), ()),
    "aws": (("aws", "s3", "ec2", "iam", "cloudfront", "dynamodb", "ecs", "eks", "cloudwatch"), ()),
    "gcp": (("gcp", "gcloud", "bigquery"), ()),
    "azure": (("azure",), ()),
    "terraform": (("terraform", "tfstate"), ()),
    "ci": (("ci", "cicd", "jenkins", "circleci", "travis"), ()),
    "make": (("makefile", "makefiles"), ()),
    "ruff": (("ruff",), ("linting",)),
    "linting": (("lint", "linting", "linter", "linters", "eslint", "flake8", "pylint", "mypy", "pyright"), ()),
    "testing": (("test", "tests", "testing", "tested", "e2e", "jest", "vitest", "mocha", "coverage", "fixture",
                 "fixtures", "tdd", "unittest", "flaky"), ()),
    "deploy": (("deploy", "deploys", "deployed", "deploying", "deployment", "deployments", "rollout", "rollback",
                "prod", "production", "staging"), ()),
    "security": (("security", "secure", "secret", "secrets", "vulnerability", "vulnerabilities", "cve", "xss", "csrf",
                  "injection", "encrypt", "encrypted", "encryption", "password", "passwords", "credential",
                  "credentials", "sanitize", "sanitise"), ()),
    "performance": (("performance", "perf", "slow", "slower", "latency", "throughput", "benchmark", "benchmarks",
                     "optimize", "optimise", "optimization", "optimisation", "profiling", "profiler",
                     "bottleneck"), ()),
    "database": (("database", "databases", "db", "schema", "migration", "migrations", "orm", "sqlalchemy", "alembic",
                  "transaction", "transactions"), ()),
    "api": (("api", "apis", "endpoint", "endpoints", "graphql", "grpc", "openapi", "webhook", "webhooks"), ()),
    "auth": (("auth", "authentication", "authorization", "authorisation", "oauth", "oauth2", "jwt", "sso", "login",
              "logins", "authn", "authz", "saml", "oidc"), ()),
    "config": (("config", "configs", "configuration", "settings", "env", "dotenv"), ()),
    "logging": (("logging", "log", "logs", "logger", "structlog", "loguru"), ()),
    "cache": (("cache", "caches", "caching", "cached", "memcached"), ()),
    "concurrency": (("async", "asyncio", "threading", "concurrency", "deadlock", "mutex"), ()),
    "docs": (("docs", "documentation", "readme", "docstring", "docstrings", "mkdocs", "sphinx"), ()),
    "dependencies": (("dependency", "dependencies", "deps", "lockfile", "dependabot", "renovate"), ()),
    "llm": (("llm", "llms", "openai", "anthropic", "litellm", "ollama"), ()),
    "embeddings": (("embedding", "embeddings", "onnx", "hnswlib", "fastembed"), ()),
    "linux": (("linux", "ubuntu", "debian", "systemd", "systemctl"), ()),
    "macos": (("macos", "osx", "homebrew", "brew"), ()),
    "windows": (("windows", "powershell", "wsl"), ()),
    "nginx": (("nginx",), ()),
}

_TOKEN_TAG: dict[str, str] = {syn: tag for tag, (syns, _) in _VOCAB.items() for syn in syns}
_IMPLIED: dict[str, tuple[str, ...]] = {tag: implied for tag, (_, implied) in _VOCAB.items() if implied}

# Multi-word / context-sensitive terms. Lookaheads keep "make deploy" from swallowing "deploy".
_PHRASES: tuple[tuple[str, str], ...] = (
    ("ci", r"github actions|gitlab[ -]ci|ci/cd"),
    ("git", r"pull requests?|merge conflicts?|cherry-pick\w*|force[ -]push\w*|pre-commit"),
    ("go", r"go(?=\s+(?:mod|build|test|run|get|vet|fmt|install|generate|work|modules?|code|1\.\d+)\b)"
           r"|(?<=\w\.)go\b|go\.(?:mod|sum)"),
    ("make", r"make(?=\s+(?:build|test|install|clean|lint|all|check|release|dev|run|docs|format|fmt|deps"
             r"|setup|ci|deploy|serve|dist|help|bench)\b)"),
    ("node", r"node\.js|node(?=\s+(?:\d|version|modules)\b)"),
    ("react", r"next\.js"),
    ("docker", r"docker[ -]compose"),
    ("testing", r"unit tests?|integration tests?"),
    ("performance", r"memory leaks?"),
    ("concurrency", r"race conditions?"),
    ("config", r"env(?:ironment)? var(?:iable)?s?|pyproject\.toml|\.env\b"),
    ("security", r"api keys?|sql injection"),
    ("gcp", r"google cloud"),
    ("deploy", r"roll(?:ed|ing)? back"),
    ("dependencies", r"lock ?files?"),
)
_PHRASE_RE = lazy_compile(
    r"(?<![\w-])(?:" + "|".join(f"(?P<p{i}>{pat})" for i, (_, pat) in enumerate(_PHRASES)) + ")"
)
_PHRASE_TAG = {f"p{i}": tag for i, (tag, _) in enumerate(_PHRASES)}
_TAG_TOKEN_RE = lazy_compile(r"\w[\w+#]*")

_CONVENTIONAL_RE = lazy_compile(
    r"^(feat|feature|fix|bugfix|hotfix|docs|style|refactor|perf|test|tests|build|ci|chore|revert|security|deps)"
    r"(?:\(([^)\n]{1,40})\))?!?:\s+\S",  # lowercase only: "Security: never ..." in a note is not a commit
)
_COMMIT_TYPE_TAGS = {"test": "testing", "tests": "testing", "ci": "ci", "perf": "performance",
                     "docs": "docs", "deps": "dependencies", "security": "security", "build": "build"}


def _tags_in_order(text: str) -> list[str]:
    """All vocabulary tags found in `text`, in order of first mention, implied tags right after."""
    low = text.lower()
    hits: list[tuple[int, str]] = [(0, "python")] if PYTHON_VERSION_ALONE_RE.match(text) else []
    for m in _TAG_TOKEN_RE.finditer(low):
        tag = _TOKEN_TAG.get(m.group())
        if tag is not None:
            hits.append((m.start(), tag))
    for m in _PHRASE_RE.finditer(low):
        hits.append((m.start(), _PHRASE_TAG[m.lastgroup or ""]))
    hits.sort(key=lambda h: h[0])
    return list(dict.fromkeys(t for _, tag in hits for t in (tag, *_IMPLIED.get(tag, ()))))


def _commit_prefix_tags(subject: str) -> list[str]:
    """Tags from a conventional-commit prefix: the scope(s) first, then the type if it names a topic."""
    m = _CONVENTIONAL_RE.match(subject.strip())
    if not m:
        return []
    tags: list[str | None] = []
    for part in re.split(r"[,/\s]+", (m.group(2) or "").lower()):
        mapped = _TOKEN_TAG.get(part)
        if mapped is None and re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,23}", part):
            mapped = part
        tags.append(mapped)
    tags.append(_COMMIT_TYPE_TAGS.get(m.group(1).lower()))
    return [t for t in dict.fromkeys(tags) if t]


def _merge_tags(*groups: list[str]) -> list[str]:
    """Concatenate tag groups in priority order, dropping repeats, capped at ``MAX_TAGS``."""
    return list(dict.fromkeys(t for group in groups for t in group))[:MAX_TAGS]


def infer_tags(text: str) -> list[str]:
    """A few lowercase topic tags for `text`, so memories can be filtered without embeddings.

    Word-boundary vocabulary matching with synonyms (k8s -> kubernetes, psql -> postgres, py -> python);
    a conventional-commit scope ("fix(api): ...") comes first. Order is deterministic: scope, then
    order of first mention. At most ``MAX_TAGS``.
    """
    return _merge_tags(_commit_prefix_tags(text), _tags_in_order(text))


# ----------------------------------------------------------------------------------------------
# Code and command detection.
# ----------------------------------------------------------------------------------------------

_CLI = (
    r"(?:sudo\s+)?(?:git|npm|npx|pnpm|yarn|pip3?|pipx|uvx?|poetry|python3?|pytest|make|docker(?:-compose)?"
    r"|kubectl|helm|memcli|curl|wget|cargo|rustup|rustc|node|deno|bun|brew|apt(?:-get)?|ssh|scp|rsync"
    r"|terraform|aws|gcloud|az|gh|ruff|black|mypy|tox|nox|psql|mysql|redis-cli|sqlite3|ls|cd|cp|mv|rm"
    r"|mkdir|chmod|chown|cat|grep|rg|find|sed|awk|tar|export|source|bash|sh|zsh|echo|systemctl|journalctl"
    r"|mvn|gradle|tsc|eslint|prettier|jest|vitest|alembic|uvicorn|gunicorn|conda|ollama|javac|java|ansible"
    r"|heroku|vercel|flyctl|jq|lsof|tail|touch|ln|openssl|podman|minikube|pre-commit|twine|hatch|pdm|nvm"
    r"|pyenv|bundle|rake|dotnet|go(?=\s+(?:build|test|run|mod|get|install|vet|fmt|generate|work|version"
    r"|env|list)\b))"
)
# Inline `spans` need an argument (`git` alone is a name, `git rebase -i` is a command).
_INLINE_CMD_RE = lazy_compile(rf"^(?:\$\s*)?(?:{_CLI}(?=\s+\S)|\./[\w./-]+)")
_LINE_CMD_RE = lazy_compile(rf"^\s*(?:\$\s+)?(?:{_CLI}(?=\s|$)|\./[\w./-]+)")
_PROMPT_LINE_RE = lazy_compile(r"^\s*\$ +(\S.*)$", re.MULTILINE)
_FENCED_RE = lazy_compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_INLINE_CODE_RE = lazy_compile(r"`([^`\n]+)`")
_SHELL_LANGS = {
    "", "bash", "sh", "shell", "console", "zsh", "fish", "shell-session", "sh-session", "terminal",
    "powershell", "ps1", "pwsh", "cmd", "bat", "text", "txt",
}


_PLAIN_LANGS = {"text", "txt"}


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) for each fenced block in `text`."""
    return [(m.group(2).lower(), m.group(3).rstrip("\n")) for m in _FENCED_RE.finditer(text)]


def _block_has_command(lang: str, code: str) -> bool:
    """Shell-language blocks count; untagged/text blocks only if a line starts with a known CLI."""
    if lang not in _SHELL_LANGS:
        return False  # a ```python block with `python = ...` in it is not a shell command
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lang and lang not in _PLAIN_LANGS:
        return bool(lines)  # a ```bash block is commands by definition
    return any(_LINE_CMD_RE.match(ln) for ln in lines)


def _strip_fences(text: str) -> str:
    """Prose with fenced blocks removed, so `$ ` lines or backticks inside code are not double-counted."""
    return _FENCED_RE.sub(" ", text)


def detect_flags(text: str) -> dict[str, bool]:
    """Boolean hints for the front matter: ``hasCodeBlock`` / ``hasCommand``; only true keys are returned.

    They let an agent ask for "memories with a command in them" without re-parsing Markdown.
    """
    flags: dict[str, bool] = {}
    blocks = _fenced_blocks(text)
    if blocks:
        flags["hasCodeBlock"] = True
    prose = _strip_fences(text)
    if (
        any(_block_has_command(lang, code) for lang, code in blocks)
        or _PROMPT_LINE_RE.search(prose)
        or any(_INLINE_CMD_RE.match(span.strip()) for span in _INLINE_CODE_RE.findall(prose))
    ):
        flags["hasCommand"] = True
    return flags


def code_pattern_of(text: str) -> str | None:
    """The reusable code in `text` (fenced blocks, else ``$ `` prompt lines, else an inline `command`).

    Stored separately so a memory's command can be shown/copied verbatim; None when there is none.
    """
    blocks = _fenced_blocks(text)
    if blocks:
        return "\n".join(code for _, code in blocks) or None
    prompts = _PROMPT_LINE_RE.findall(text)
    if prompts:
        return "\n".join(p.rstrip() for p in prompts)
    for span in _INLINE_CODE_RE.findall(text):
        span = span.strip()
        if _INLINE_CMD_RE.match(span):
            return span[1:].strip() if span.startswith("$") else span
    return None


#: after the split and join the only whitespace left is " ": rstrip is the regex [\s.!?,;:…]+$, cheaper
_TRAILING_PUNCT = " .!?,;:…"


def normalise(text: str) -> str:
    """Canonical form for exact-duplicate detection: casefold, single spaces, no trailing punctuation."""
    return " ".join(text.casefold().split()).rstrip(_TRAILING_PUNCT)


# ----------------------------------------------------------------------------------------------
# Line-level structure.
# ----------------------------------------------------------------------------------------------

_FENCE_OPEN_RE = lazy_compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*([\w+#.-]*)")
_HEADING_RE = lazy_compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_HRULE_RE = lazy_compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_LIST_ITEM_RE = lazy_compile(r"^(\s*)(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
_QUOTE_RE = lazy_compile(r"^\s*(?:>\s?)+")
#: who speaks in a pasted chat: "User:" / "Assistant:" lines, "## User" headings of an exported one
_SPEAKERS = ("user", "assistant", "human", "ai", "system", "bot", "me", "you", "claude", "chatgpt", "gpt", "copilot",
             "agent", "q", "a", "question", "answer")
_SPEAKER_RE = lazy_compile(
    r"^\s*(?:\[\d{1,2}:\d{2}(?::\d{2})?(?:\s?[ap]m)?\]\s*"
    r"|\[?\d{4}-\d{2}-\d{2}[ T]\d{1,2}:\d{2}(?::\d{2})?\]?\s*)?"
    r"(?:\*\*|__)?(" + "|".join(_SPEAKERS) + r")(?:\*\*|__)?\s*:(?:\*\*|__)?(?:\s+|$)",
    re.IGNORECASE,
)
_TRAILER_RE = lazy_compile(
    r"^\s*(?:[A-Z][\w]*(?:-[\w]+)*-by|Change-Id|Reviewed-on|PR-URL|Cc|See-also):\s*\S"
    r"|^\s*(?:Fixes|Closes|Resolves|Refs|Ref|Bug|Issue)\s*:?\s*(?:#\d+|[A-Z][A-Z0-9]+-\d+|https?://\S+)"
    r"(?:\s*,\s*(?:#\d+|[A-Z][A-Z0-9]+-\d+))*\s*$"
)
# memcli's own search output ("[0.83] ..."), score tables, box-drawn tables, and Markdown table rows.
_SEARCH_OUTPUT_RE = lazy_compile(
    r"^\s*(?:\d+[.)]\s*)?\[\s*\d?\.\d+\s*\]"
    r"|^\s*(?:score|rank|#)\s*[|│┃]"
    r"|^\s*\d\.\d{2,}\s*[|│┃]"
    r"|[─│┃━┏┓┗┛├┤┬┴┼╭╮╰╯═║]"
    r"|^\s*\|.*\|\s*$"
    r"|^\s*(?:found \d+ (?:memories|memory|results?)|no (?:memories|results) found)\b",
    re.IGNORECASE,
)
_SEARCH_FIRST = frozenset("[|#0123456789sSrRfFnN")
_TAG_ONLY_RE = lazy_compile(r"^\s*(?:<!--.*-->|</?[A-Za-z][\w-]*(?:\s[^>]*)?/?>)\s*$")
_COMMIT_JUNK_RE = lazy_compile(
    r"^(?:merge (?:branch|pull request|remote|tag)|wip\b|bump version|release v?\d|revert \"|initial commit)"
    r"|\b(?:typos?|whitespace|formatting)\b",
)


@dataclass
class _Cand:
    """A candidate fact before filtering; code attachments and context ride along."""

    text: str
    para: int
    turn: int
    heading_tags: list[str]
    commit: bool = False
    subject: bool = False
    item: bool = False
    skip: bool = False
    codes: list[tuple[str, str]] = field(default_factory=list)  # (lang, code); lang "$" = prompt lines
    speaker: str | None = None  # a named speaker ("Joanna: ..."): the fact keeps the attribution


# ----------------------------------------------------------------------------------------------
# Sentence splitting.
# ----------------------------------------------------------------------------------------------

_PROTECT_RE = lazy_compile(r"`[^`\n]+`|\b(?:https?://|www\.)[^\s<>`]*[^\s<>`.,;:!?)\]'\"]")
_SENT_END_RE = lazy_compile(r"[.!?]+[\"')\]*_]*\s+")
_ABBREVIATIONS = {
    "e.g", "i.e", "eg", "ie", "vs", "cf", "approx", "incl", "esp", "resp", "fig", "no", "nr", "mr", "mrs",
    "ms", "dr", "st", "jr", "sr", "inc", "ltd", "a.m", "p.m", "al", "ca", "viz", "w.r.t", "v", "ver", "min",
    "max", "sec", "e.g.,", "u.s", "n.b", "p.s", "ref", "refs", "dept", "est", "var",
}
_LINE_END = (".", "!", "?", ":")
_LINE_JOIN_END = tuple(",;(-–—&/+=|")
_CONNECTORS = {
    "and", "or", "but", "the", "a", "an", "to", "of", "with", "for", "in", "on", "at", "by", "from",
    "that", "which", "is", "are", "was", "were", "because", "so", "as", "into", "than", "then",
}


def _split_sentences(text: str) -> list[str]:
    """Split prose into sentences without breaking on e.g./i.e., versions, file names, URLs or `code`."""
    if not _SENT_END_RE.search(text):
        return [text.strip()] if text.strip() else []
    masked = _PROTECT_RE.sub(lambda m: "x" * len(m.group()), text)
    out: list[str] = []
    start = 0
    for m in _SENT_END_RE.finditer(masked):
        pos = m.start()
        if masked[pos] == "." and m.group()[1:2] not in ".!?":
            word_start = masked.rfind(" ", 0, pos) + 1
            word = masked[word_start:pos].lower().lstrip("([\"'*_")
            nxt = masked[m.end():m.end() + 1]
            if word in _ABBREVIATIONS or (word == "etc" and nxt.islower()):
                continue
        piece = text[start:m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


_ANAPHORA_RE = lazy_compile(r"^(?:it|its|this|that|these|those|they|their|them|he|she|which)\b", re.I)


def _join_anaphora(sentences: list[str]) -> list[str]:
    """Keep a sentence that opens with a pronoun ("It moves HEAD back...") with the sentence it
    refers to, so that the stored fact is self-contained."""
    out: list[str] = []
    for s in sentences:
        prev = out[-1] if out else ""
        if prev and _ANAPHORA_RE.match(s) and prev.rstrip()[-1:] not in "?!" and len(prev.split()) >= 4:
            out[-1] = f"{prev} {s}"
        else:
            out.append(s)
    return out


def _segments(lines: list[str]) -> list[str]:
    """Group a paragraph's lines into runs that may be joined (wrapped prose) vs. separate notes.

    Short unpunctuated lines ("Use pnpm not npm\\nTests run with vitest") are separate notes; a long
    line (hard-wrapped prose, e.g. a commit body) or one ending in "," / "and" continues onto the next.
    """
    segs: list[list[str]] = []
    for line in lines:
        s = line.strip()
        if segs:
            prev = segs[-1][-1]
            boundary = prev.endswith(_LINE_END) or (
                len(prev) < 50
                and not prev.endswith(_LINE_JOIN_END)
                and prev[prev.rfind(" ") + 1:].lower() not in _CONNECTORS
            )
            if not boundary:
                segs[-1].append(s)
                continue
        segs.append([s])
    return [" ".join(" ".join(seg).split()) for seg in segs]


# ----------------------------------------------------------------------------------------------
# Judging candidates.
# ----------------------------------------------------------------------------------------------

_INTERJECTION_RE = lazy_compile(
    r"^(?:(?:ok(?:ay)?|great|sure|yes|yeah|yep|yup|cool|nice|perfect|awesome|alright|right|thanks|thank you"
    r"|got it|also|btw|fyi|oh|ah|well|so|and|ps|p\.s\.|sorry|hmm+|hm|anyway|anyways|actually|basically|fwiw"
    r"|tl;?dr|indeed|exactly|correct|absolutely|certainly|of course|good|hey|hi|hello)\s*[,:!.\-–—]+\s*"
    r"|(?:ok(?:ay)?|so|btw|fyi|oh and|and also)\s+(?:so\s+)?)+",
    re.IGNORECASE,
)
_PLEASANTRIES = (
    "hi", "hello", "hey", "heya", "hiya", "yo", "sup", "good morning", "good afternoon", "good evening", "morning",
    "thanks", "thank you", "thank u", "thx", "ty", "tysm", "cheers", "great", "perfect", "awesome", "amazing", "cool",
    "nice", "excellent", "wonderful", "fantastic", "brilliant", "sweet", "ok", "okay", "k", "kk", "sure", "yes", "yep",
    "yup", "yeah", "ya", "no", "nope", "nah", "lol", "lmao", "rofl", "haha", "hahaha", "heh", "sounds good",
    "sounds great", "sounds perfect", "got it", "gotcha", "makes sense", "that makes sense", "will do", "no problem",
    "np", "no worries", "you're welcome", "youre welcome", "welcome", "bye", "goodbye", "see you", "see ya", "later",
    "done", "agreed", "exactly", "right", "correct", "true", "indeed", "i see", "oh", "ah", "hmm", "hm", "wow",
    "love it", "good", "great job", "well done", "nice one", "nice work", "good job", "great work", "that works",
    "that worked", "it works", "it worked", "works", "works for me", "all good", "fine", "alright", "all right",
    "for sure", "definitely", "absolutely", "certainly", "of course", "much appreciated", "appreciate it",
    "i appreciate it", "so much", "a lot", "very much", "for the help", "for your help", "again", "man", "mate",
    "buddy", "dude", "guys", "folks", "everyone", "all", "there", "team", "please", "sorry", "my bad", "oops", "lgtm",
    "ack", "roger", "noted", "understood", "that's great", "thats great", "that's it", "thats it", "great stuff", "yay",
    "claude", "chatgpt", "assistant", "bot", "gpt", "that's perfect", "thats perfect", "perfect thanks",
    "you're the best", "you rock", "ok cool", "and", "so", "just", "really", "very", "super", "that helps",
    "this helps", "helpful", "very helpful", "that was helpful", "good to know", "good to see you", "great to see you",
    "nice to see you", "good to hear from you", "nice to meet you", "long time no see", "good to hear", "glad to hear",
    "great to hear", "nice to hear", "good to hear that", "that's cool", "thats cool", "that's awesome",
    "that's amazing", "that's so cool", "how cool", "so cool", "omg", "aww", "love that", "that's really cool",
    "really cool",
)
_PLEASANTRY_RE = lazy_compile(
    r"^(?:(?:"
    + "|".join(re.escape(p) for p in sorted(_PLEASANTRIES, key=len, reverse=True))
    + r")(?:\s+|$))+$"
)
_QUESTION_RE = lazy_compile(
    r"^(?:(?:how|what|why|when|where|which|who|whom|whose)(?:'s|\s+(?:do|does|did|can|could|should|would"
    r"|will|is|are|was|were|am|has|have|i|we|you|it|they|about|if|come|not|much|many|exactly))\b"
    r"|(?:can|could|would|will|should|shall|do|does|did|is|are|was|were|has|have|may|might|must|am)"
    r"\s+(?:you|we|i|it|this|that|there|anyone|someone|somebody|they|he|she|these|those)\b"
    r"|any (?:idea|ideas|thoughts|suggestions|reason)\b|anyone know|does anybody|i wonder|i was wondering"
    r"|wondering (?:if|whether|why|how)|quick question|question:|thoughts\b|how to\b"
    r"|is it (?:possible|ok|okay|safe|worth)\b|what if\b|why not\b)",
)
_FILLER_RE = lazy_compile(
    r"^(?:let me (?:know|check|see|look|think|try|take|dig|explain|help|run|fix|update|investigate|search"
    r"|find|verify|confirm|summari[sz]e|start|first|also|quickly|just)"
    r"|let's (?:see|try|get started|start|dig in|take a look)"
    r"|i(?:'ll| will| can| am going to|'m going to|'m gonna) (?:take a look|look into|check|help|get back"
    r"|try|do that|fix that|update|investigate|start|now|go ahead|make (?:the|those|these) changes)"
    r"|i'm (?:on it|looking into|checking|not sure)|i am (?:looking into|checking|not sure)"
    r"|(?:one|a|just a) (?:sec|second|moment|minute)\b|give me a (?:sec|second|moment|minute)"
    r"|(?:i )?hope (?:this|that|it) helps|feel free\b|happy to help|glad (?:it|that|to|i|you)\b"
    r"|no (?:worries|problem)\b|(?:good|great|excellent|nice|interesting) (?:question|catch|point|idea)\b"
    r"|you(?:'re| are) (?:absolutely |totally |completely |quite )?(?:right|welcome|correct)\b"
    r"|i apologi[sz]e|apologies\b|sorry (?:for|about)\b|my apologies"
    r"|(?:that|this) (?:makes sense|sounds (?:good|great|right)|looks (?:good|great|right)|should work"
    r"|should do it|did it|did the trick|fixed it|worked)\b"
    r"|thanks? (?:for|so much|a lot|again)\b|thank you\b|many thanks"
    r"|working on it|on it\b|i see(?:[.!,]|$)|got it\b|understood\b|as an ai\b"
    r"|i (?:don't|do not) know\b|no idea\b|not sure (?:what|why|how|if|whether)\b"
    r"|sure,? (?:i|here|thing|let|no)\b|certainly[,!]|absolutely[,!]|of course[,!]"
    r"|here(?:'s| is| are) (?:what i (?:found|did|changed)|a summary|the summary|my (?:plan|suggestion))"
    r"|here(?:'s| is| are) (?:the |a |an |your |my |some )?(?:updated |full |complete |fixed |corrected "
    r"|new |final |modified |revised |whole |entire |relevant )?(?:code|version|file|function|script"
    r"|implementation|snippet|example|output|result|diff|patch|changes?|fix|command)s?\s*[:.!]?$)",
)  # requests ("please ...", "can you ...") are `_REQUEST_RE`'s, checked first
_PROMPT_ECHO_RE = lazy_compile(
    r"^(?:you are (?:a|an|the)\b.{0,80}?\b(?:assistant|agent|model|ai|bot|chatbot|expert|engineer|developer"
    r"|programmer|helper|extractor|coder|tutor)\b"
    r"|(?:as an ai|i am an ai|i'm an ai|i am a large language model|i'm a large language model)\b"
    r"|system prompt\b|<\|?(?:system|im_start|im_end)|\[/?inst\]|#{2,3} (?:instruction|system|response)\b"
    r"|your (?:task|job|role|goal|objective) is\b"
    r"|(?:respond|answer|reply|output) (?:only )?(?:in|with|as) (?:valid )?(?:json|markdown|yaml)\b"
    r"|ignore (?:all )?(?:the )?previous instructions"
    r"|you (?:will be|are being) given\b|given the following\b|extract (?:the )?(?:facts|memories)\b)",
)
_RULE_START_RE = lazy_compile(r"^(?:always|never|don't|do not|avoid|prefer|use|run|pin|keep)\b")

_IMPERATIVE_VERBS = (
    "run use always never don't do avoid prefer make ensure remember set add install call pass put keep "
    "check create configure enable disable write prefix build restart delete remove update upgrade pin "
    "bump open edit export source wrap mock import start stop clear reset rebase squash commit push pull "
    "store return raise handle validate escape quote document deploy execute invoke specify switch move "
    "rename copy clone fetch merge revert uninstall downgrade refresh regenerate rerun retry increase "
    "decrease limit wait stick follow read look see try consider skip ignore exclude include register "
    "mount bind expose replace truncate migrate backup restore flush purge invalidate annotate declare "
    "define extend override inject reindex prune tune announce notify ping send tell ask review approve "
    "verify confirm close"
).split()
_IMPERATIVE = "|".join(map(re.escape, _IMPERATIVE_VERBS))
_IMPERATIVE_RE = lazy_compile(
    r"^(?:(?:please|just|first|then|also|and)\s+)*(?:" + _IMPERATIVE + r")\b"
    r"(?!\s+(?:is|are|was|were|takes|took|has|have|had|fails|failed|runs|ran|requires|needs|uses|used"
    r"|can|will|should|must|may|might|does|did|of|it's|step|time|times)\b)",
)
_RULE_WORDS_RE = lazy_compile(
    r"\b(?:always|never|must|mustn't|make sure|be sure to|remember to|don't forget|need to|needs to|have to"
    r"|has to|should|shouldn't|do not|don't|avoid|prefer|instead of|in order to|is required|are required"
    r"|required to|convention|best practice|rule of thumb)\b",
)
_PROCEDURE_RE = lazy_compile(
    r"^(?:to\s+[a-z]+\b|how to\b|the (?:way|trick) to\b|steps? to\b"
    r"|(?:when|before|after|if|once|whenever|while|for)\b[^,]{1,120},\s*(?:(?:always|never|please|just|first"
    r"|then)\s+)?(?:" + _IMPERATIVE + r")\b)"
    r"|\buse\s+\S+(?:\s+\S+){0,3}\s+(?:to|for|instead)\b|\brun\s+`",
)
_DECISION_RE = lazy_compile(
    r"\b(?:we decided|decided to|decision|we agreed|agreed to|agreed on|we chose|always|never|must|mustn't"
    r"|do not|don't|is required|are required|mandatory)\b",
)
_HEDGE_RE = lazy_compile(
    r"\b(?:maybe|perhaps|probably|possibly|might|i think|i guess|i believe|i suspect|not sure|seems|seem to"
    r"|apparently|could be|likely|unclear|iirc|afaik)\b",
)
_DAYS = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = r"january|february|march|april|may|june|july|august|september|october|november|december"
_TIME_REF_RE = lazy_compile(
    rf"\b(?:yesterday|today|tonight|this (?:morning|afternoon|evening|week|sprint|month)"
    rf"|last (?:night|week|month|year|sprint|time|release|{_DAYS})|on (?:{_DAYS})|earlier today|just now"
    rf"|(?:\d+|a|an|a few|few|a couple of|couple of) (?:minutes?|hours?|days?|weeks?|months?|years?) ago"
    rf"|in (?:{_MONTHS})\b|on (?:{_MONTHS}) \d|\d{{4}}-\d{{2}}-\d{{2}}|(?:in|during) (?:this|the|today's|"
    rf"yesterday's) (?:session|incident|outage|standup|meeting|retro|release|migration|deploy))\b",
)
_PAST_RE = lazy_compile(
    r"\b(?:was|were|had|did|got|went|ran|found|broke|saw|hit|made|spent|took|wrote|came|caught|built|lost"
    r"|shipped|fixed|deployed|released|[a-z]{3,}ed)\b",
)
_EVENT_RE = lazy_compile(
    r"\b(?:we|i|the team|they)\s+(?:just\s+|finally\s+|accidentally\s+|already\s+)?(?:deployed|fixed|shipped"
    r"|released|migrated|upgraded|downgraded|rolled back|reverted|found|discovered|noticed|hit|broke|ran into"
    r"|spent|debugged|removed|merged|tried|learned|learnt|realized|realised|lost|restored|renamed|refactored"
    r"|rewrote|replaced|bumped|traced|tracked down|investigated|patched|hotfixed|launched|cut)\b",
)


_NON_WORD_RE = lazy_compile(r"[^\w'\s]+")


def _strip_interjections(text: str) -> str:
    """Drop a leading "Ok so," / "Thanks! Also," so the fact reads as a statement; keep the capital."""
    m = _INTERJECTION_RE.match(text)
    if not m:
        return text.strip()
    rest = text[m.end():].strip()
    if rest[:1].islower() and text[:1].isupper() and not _INLINE_CMD_RE.match(rest):
        rest = rest[0].upper() + rest[1:]
    return rest


def _is_pleasantry(low: str) -> bool:
    words = _NON_WORD_RE.sub(" ", low).split()
    return not words or (len(words) <= 12 and bool(_PLEASANTRY_RE.match(" ".join(words))))


def _is_question(low: str) -> bool:
    s = low.rstrip()
    if s.endswith("?") or s.endswith("?)"):
        return True
    return bool(_QUESTION_RE.match(s)) and ":" not in s and not s.endswith((".", "!"))


def _infer_type(prose: str, *, has_command: bool, commit: bool, subject: bool) -> str:
    """semantic / episodic / procedural from lexical cues in the lowercased prose (code excluded)."""
    if subject:
        return "episodic"
    rule = _RULE_WORDS_RE.search(prose) or _PROCEDURE_RE.search(prose)
    imperative = _IMPERATIVE_RE.match(prose)
    if rule or (imperative and not commit):
        return "procedural"
    if imperative and commit:
        return "episodic"  # commit-body bullets ("Add retry to uploader") record a change
    if _EVENT_RE.search(prose) or (_TIME_REF_RE.search(prose) and _PAST_RE.search(prose)):
        return "episodic"
    if has_command:
        return "procedural"
    return "semantic"


def _confidence(prose: str) -> float:
    """Explicit rules and decisions are trusted more than hedged remarks (lowercased prose)."""
    if _HEDGE_RE.search(prose):
        return _CONF_HEDGED
    if _DECISION_RE.search(prose):
        return _CONF_RULE
    return _CONF_DEFAULT


# An assistant reporting what it just did ("Done. I changed docker-compose.yml ...", "I've updated
# the tests for you"): a status line about the session, not knowledge about the project.
_STATUS_RE = lazy_compile(
    r"^(?:done|all (?:done|set)|finished|fixed|updated|changed|completed)\s*[.!:,]"
    r"|^i(?:'ve| have)? (?:just |now |also )?(?:made|applied|changed|updated|added|edited|modified|created"
    r"|fixed|implemented|refactored|removed|renamed|rewritten|rewrote|run|ran)\b.{0,160}?"
    r"\b(?:for you|as (?:you )?(?:requested|asked)|as discussed|per your request)\b"
    r"|^i(?:'ve| have) (?:just |now )?(?:made|applied) the changes?\b"
)
# A statement whose only content is a credential (after redaction): "the admin password is
# [REDACTED:password]", "AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key]", "log in as root with [REDACTED...]".
_CREDENTIAL_KINDS = (r"(?:password|secret|aws_access_key|aws_secret|openai_key|anthropic_key|github_token"
                     r"|gitlab_token|slack_token|auth_header|url_password|private_key|jwt)")
_CREDENTIAL_RE = lazy_compile(
    r"^\W*(?:export\s+)?[\w.-]+\s*[:=]\s*[\"']?\[REDACTED:\w+\]\W*$"
    r"|\b(?:password|passwd|passphrase|passcode|pin|token|secret|key|credentials?|login)\b[^.\n]{0,30}?"
    r"(?:\bis|\bare|\bwas|=|:)\s*(?:now\s+|still\s+)?[\"'`]?\[REDACTED:" + _CREDENTIAL_KINDS +
    r"|\blog(?:\s?in|\s?on)?\s+as\s+\S+\s+(?:with|using)\s+(?:the\s+)?(?:password\s+)?[\"'`]?\[REDACTED:",
    re.IGNORECASE,
)
_STATUS_FIRST = frozenset("dafuci")
_REDACTED_RE = lazy_compile(r"\[REDACTED:\w+\]")
# memcli's own memory ids in brackets: the line is a recalled memory, already stored.
_MEMORY_ID_RE = lazy_compile(r"\[0[0-9A-HJKMNP-TV-Z]{7,25}\]")
_REQUEST_RE = lazy_compile(r"^(?:please (?!always|never|make sure|remember|don't|do not|note|be aware|keep in mind"
                           r"|use|prefer|avoid|stick|follow|only|run|be careful)|(?:can|could|would) you\b)")


# A coding agent's transcript as pasted from its terminal (Claude Code): "⏺" starts an assistant
# turn or a tool call ("⏺ Bash(pytest -q)"), "⎿" a tool's output ("⎿ 12 passed in 0.84s").
_AGENT_MARKS = frozenset("⏺●⎿")
_TOOL_LINE_RE = lazy_compile(r"^\s*(?:⎿|[⏺●]\s*[A-Z]\w*\(.*\)\s*$)")


def _junk_rule(clean: str, low: str, *, subject: bool = False) -> str | None:
    """The one set of junk gates every fact passes (heuristic or LLM); returns the rule's name."""
    if clean[:1] in _AGENT_MARKS:
        if _TOOL_LINE_RE.match(clean):
            return "tool_output"
        clean = clean.lstrip("".join(_AGENT_MARKS) + " ")  # "⏺ I'll look at it first." is status chatter
        low = clean.lower()
    if _SEARCH_OUTPUT_RE.search(clean) or ("[0" in clean and _MEMORY_ID_RE.search(clean)):
        return "recalled_memory"
    if _PROMPT_ECHO_RE.match(low):
        return "prompt_echo"
    if _is_pleasantry(low):
        return "pleasantry"
    if "[REDACTED:" in clean and _CREDENTIAL_RE.search(clean):  # substring first: most text has none
        return "credential"
    if subject:  # a commit subject is a statement even when it reads like an imperative request
        return None
    if _REQUEST_RE.match(low):
        return "request"
    if _is_question(low):
        return "question"
    if _FILLER_RE.match(low):
        return "filler"
    if low[:1] in _STATUS_FIRST and _STATUS_RE.match(low):
        return "status"
    return None


def junk_reason(text: str) -> str | None:
    """Why `text` is not a fact worth storing, as a rule name, or None when it may be one.

    The same gates as the heuristic extractor applies to its own candidates (questions, requests to
    the assistant, pleasantries, filler, status chatter, recalled memories, prompt echoes,
    credential lines), plus "too_short" (under three words) and "only_redacted" (nothing left but
    redaction markers), so facts from a model are held to the heuristic's bar.
    """
    clean = _strip_interjections(" ".join(text.split())) or " ".join(text.split())
    rule = _junk_rule(clean, clean.lower())
    if rule:
        return rule
    if text.rstrip().endswith(":"):
        return "dangling"  # "run the following commands:" and nothing after it
    words = _REDACTED_RE.sub(" ", clean)
    if len(re.findall(r"\w[\w'./+-]*", words)) < 3:  # also when no word is left at all
        return "only_redacted" if _REDACTED_RE.search(clean) else "too_short"
    return None


def fact_from_text(text: str, code_pattern: str | None = None) -> Fact:
    """A Fact for `text` with memcli's own type, tags, confidence and flags (never the model's)."""
    low = _strip_fences(text).lower()
    flags = detect_flags(text if code_pattern is None or code_pattern in text else f"{text}\n{code_pattern}")
    return Fact(
        text=text,
        type=_infer_type(low, has_command=bool(flags.get("hasCommand")), commit=False, subject=False),
        tags=_merge_tags(_tags_in_order(f"{text}\n{code_pattern or ''}")),
        confidence=_confidence(low),
        code_pattern=code_pattern,
        flags=flags,
    )


def _render(prose: str, codes: list[tuple[str, str]]) -> str:
    """Fact text: the sentence, then its code re-fenced verbatim (``$`` prompt lines stay bare lines)."""
    parts = [prose] if prose else []
    for lang, code in codes:
        parts.append(code if lang == "$" else f"```{lang}\n{code}\n```")
    return "\n".join(parts)


def _piece(text: str, rule: str) -> dict[str, str]:
    """A skipped piece as reported (`add -v`, `add --dry-run --json`): its text on one line, and the rule."""
    return {"text": " ".join(text.split()), "rule": rule}


def _skip(why: list[str], rule: str) -> None:
    """Record the rule that skipped a candidate (shown by `add -v` and `add --dry-run --json`)."""
    why.append(rule)


def _judge(c: _Cand, default_type: str | None, why: list[str]) -> Fact | None:
    """Turn a candidate into a Fact, or None when it is not knowledge worth remembering (the rule
    that decided is appended to `why`)."""
    if c.skip:
        return _skip(why, "prompt_echo")
    if not c.codes and c.text.count(" ") < 2:
        return _skip(why, "too_short")  # checked first because chats are full of "ok"/"thx"
    clean = c.text if c.subject else _strip_interjections(c.text)
    if not clean:
        return _skip(why, "interjection")
    n_words = len(clean.split())
    if n_words < 3 and not c.codes:
        return _skip(why, "too_short")  # "Thanks! Also, works." is short once the interjections are gone
    low = clean.lower()  # the judging regexes are lowercase-only: faster than IGNORECASE
    rule = _junk_rule(clean, low, subject=c.subject)
    if rule:
        return _skip(why, rule)
    if c.subject and (_COMMIT_JUNK_RE.search(low) or n_words < 4):
        return _skip(why, "commit_boilerplate")
    if not c.codes and clean.endswith(":"):
        return _skip(why, "dangling")  # "memcli search gave:" + pasted output that was skipped
    text = _render(clean, c.codes)
    flags = detect_flags(text)
    if c.codes:
        if n_words < 2 and not flags.get("hasCommand"):
            return _skip(why, "code_without_statement")  # "Output:" + a log dump
    elif n_words < 4 and not (n_words == 3 and (_RULE_START_RE.match(low) or "`" in clean)) and not (
            n_words >= 2 and "://" in clean and _URL_RE.search(clean)):
        return _skip(why, "too_short")  # "Submit here: https://..." is a fact: where something lives
    code_text = "\n".join(code for _, code in c.codes)[:500]
    tags = _merge_tags(
        _commit_prefix_tags(clean) if c.subject else [],
        c.heading_tags if c.commit else [],  # commit scope tags ride in heading_tags for body lines
        _tags_in_order(f"{clean}\n{code_text}"),
        [] if c.commit else c.heading_tags,
    )
    ftype = default_type or _infer_type(
        low, has_command=bool(flags.get("hasCommand")), commit=c.commit, subject=c.subject
    )
    return Fact(
        text=text,
        type=ftype,
        tags=tags,
        confidence=_confidence(low),
        code_pattern=code_pattern_of(text),
        flags=flags,
    )


# ----------------------------------------------------------------------------------------------
# The scanner.
# ----------------------------------------------------------------------------------------------


class _Scanner:
    """One pass over the lines: builds candidates, attaching code blocks to the text that introduces them."""

    def __init__(self) -> None:
        self.cands: list[_Cand] = []
        self.skipped = 0
        self.skipped_pieces: list[dict[str, str]] = []  # {text, rule} for each piece dropped here
        self.para_id = 0
        self.turn = 0
        self.heading_tags: list[str] = []
        self.buf: list[str] = []
        self.buf_is_item = False
        self.attach_to: _Cand | None = None
        self.prompt_turn: int | None = None  # a system-prompt echo started in this speaker turn
        self.speaker: str | None = None  # the named speaker of turn `speaker_turn`
        self.speaker_turn = -1
        self.commit = False
        self.gap = False  # a blank line separates attach_to from what follows
        self.heading: str | None = None  # a heading whose first paragraph has not been read yet
        self.title: str | None = None  # the document's title (its first heading), for one-word sections
        self.cause: _Cand | None = None  # a stack trace's cause line, waiting for the sentence explaining it

    # -- paragraph handling -------------------------------------------------------------------
    def flush(self) -> None:
        if not self.buf:
            return
        lines, is_item = self.buf, self.buf_is_item
        self.buf, self.buf_is_item = [], False
        self.para_id += 1
        heading, self.heading = self.heading, None
        cause, self.cause = self.cause, None
        if cause is not None and not is_item and cause.turn == self.turn:
            # The paragraph after a stack trace explains it: one memory, the failure and its cause.
            cause.text = f"{cause.text} — {' '.join(' '.join(lines).split())}"
            self.attach_to = cause
            return
        paragraph = " ".join(" ".join(lines).split())
        if heading and not is_item and len(paragraph) <= _HEADED_PARAGRAPH_MAX and len(paragraph.split()) >= 4:
            # A section's paragraph is one memory with its heading (a runbook step, a decision record).
            pieces = [f"{heading}: {paragraph}"]
        elif is_item:
            pieces = [self._item_text(lines)]
        else:
            pieces = _join_anaphora([s for seg in _segments(lines) for s in _split_sentences(seg)])
        in_prompt = self.prompt_turn is not None and self.prompt_turn == self.turn and self.turn > 0
        first_clean = _strip_interjections(pieces[0]) if pieces else ""
        if pieces and not in_prompt and _PROMPT_ECHO_RE.match(first_clean.lower()):
            in_prompt = True
            self.prompt_turn = self.turn
        last = None
        for piece in pieces:
            last = _Cand(
                piece, self.para_id, self.turn, self.heading_tags,
                commit=self.commit, skip=in_prompt, item=is_item,
                speaker=self.speaker if self.speaker_turn == self.turn else None,
            )
            self.cands.append(last)
        self.attach_to = last
        self.gap = False

    def skip(self, text: str, rule: str) -> None:
        self.skipped += 1
        self.skipped_pieces.append(_piece(text, rule))

    def _item_text(self, lines: list[str]) -> str:
        """A list item stays whole, but a pleasantry run on after it ("- Use squash merges.
        Thanks!", a lazy continuation line in Markdown) is not part of the fact."""
        sentences = _split_sentences(" ".join(" ".join(lines).split()))
        while len(sentences) > 1 and _is_pleasantry(sentences[-1].lower()):
            self.skip(sentences.pop(), "pleasantry")
        return " ".join(sentences)

    def attach(self, lang: str, code: str) -> None:
        target = self.attach_to
        if target is not None and self.gap and target.item and not target.text.endswith(":"):
            target = None  # a block after a list (and a blank line) is not about the last bullet
        if target is None:
            # Code with nothing introducing it (or after a heading): no statement to remember.
            self.cands.append(_Cand("", self.para_id, self.turn, self.heading_tags, skip=True))
            return
        if not target.codes and len(target.text.split()) < 4 and len(self.cands) >= 2:
            prev = self.cands[-2]
            if (prev.para == target.para and not prev.codes and not prev.skip
                    and not prev.text.rstrip().endswith("?") and self.cands[-1] is target):
                # "Rebuilding the index after an upgrade is easy. Run:" + code -> one fact.
                prev.text = f"{prev.text} {target.text}"
                self.cands.pop()
                self.attach_to = target = prev
        target.codes.append((lang, code))

    def new_context(self) -> None:
        self.flush()
        self.attach_to = None

    def _section(self, title: str) -> str | None:
        """What a section's paragraph is prefixed with: its heading ("Deploying to staging"); a
        one-word heading with the document's title ("Use PostgreSQL for jobs — Decision"), since
        "Consequences: One fewer service to operate." says nothing alone (a decision record)."""
        if not title or title.endswith(":") or title.lower() in _SPEAKER_HEADINGS:
            return None  # "## User" / "## Assistant" in an exported chat names a speaker, not a section
        if self.title is None and not self.cands and self.para_id == 0:  # the text opens with it
            self.title = title if len(title.split()) >= 2 else None
        if len(title.split()) >= 2:
            return title
        return f"{self.title} — {title}" if self.title else title

    # -- main loop ----------------------------------------------------------------------------
    def run(self, text: str) -> None:
        lines = text.split("\n")
        i = _skip_front_matter(lines)
        n = len(lines)
        first = next((j for j in range(i, n) if lines[j].strip()), None)
        if first is not None and _looks_like_commit(lines, first):
            self.commit = True
            subject = lines[first].strip()
            self.heading_tags = _commit_prefix_tags(subject)
            self.para_id += 1
            self.cands.append(_Cand(subject, self.para_id, 0, self.heading_tags, commit=True, subject=True))
            i = first + 1
        while i < n:
            line = lines[i]
            i += 1
            stripped = line.lstrip()
            if not stripped:
                self.flush()
                self.gap = True
                continue
            c0 = stripped[0]
            if c0 == ">":
                line = _QUOTE_RE.sub("", line)
                stripped = line.lstrip()
                if not stripped:
                    self.flush()
                    continue
                c0 = stripped[0]
            # Cheap first-character dispatch: most lines are plain prose and skip every regex below.
            fence = _FENCE_OPEN_RE.match(line) if c0 in "`~" else None
            if fence:
                i = self._code_block(lines, i, fence)
                continue
            if (c0 in _SEARCH_FIRST or not line.isascii()) and _SEARCH_OUTPUT_RE.search(line):
                self.skip(line, "recalled_memory")
                self.new_context()
                continue
            if c0 in "TF" and _TRACEBACK_RE.match(line):
                i = self._stack_trace(lines, i)
                continue
            if c0.isupper() and _TRAILER_RE.match(line):
                self.skip(line, "git_trailer")
                self.new_context()
                continue
            if c0 == "#":
                heading = _HEADING_RE.match(line)
                if heading:
                    self.new_context()
                    if not self.commit:
                        self.heading_tags = _tags_in_order(heading.group(1))
                        title = heading.group(1).strip().strip("*_").strip()
                        self.heading = self._section(title)
                    self.prompt_turn = None
                    continue
            if c0 in "-*_<" and (_HRULE_RE.match(line) or _TAG_ONLY_RE.match(line)):
                self.new_context()
                continue
            speaker = _SPEAKER_RE.match(line) if ":" in line else None
            named = _named_speaker(line) if ":" in line and speaker is None and c0.isupper() else None
            speaker = named or speaker
            if speaker:
                self.new_context()
                self.turn += 1
                if named:
                    self.speaker, self.speaker_turn = named.group(1), self.turn
                elif speaker.group(1).lower() == "system":
                    self.prompt_turn = self.turn
                line = line[speaker.end():]
                stripped = line.lstrip()
                if not stripped:
                    continue
                c0 = stripped[0]
                fence = _FENCE_OPEN_RE.match(line) if c0 in "`~" else None
                if fence:
                    i = self._code_block(lines, i, fence)
                    continue
            if c0 == "$" and _PROMPT_LINE_RE.match(line) and (self.buf or self.attach_to is not None):
                # "$ memcli reindex" lines belong to the sentence that introduces them.
                self.flush()
                self.attach("$", stripped.rstrip())
                continue
            if c0 in "-*+•" or c0.isdigit():
                item = _LIST_ITEM_RE.match(line)
                if item and item.group(2).strip():
                    self.flush()
                    self.buf, self.buf_is_item = [item.group(2)], True
                    continue
            self.buf.append(line)
        self.flush()

    def _stack_trace(self, lines: list[str], i: int) -> int:
        """A pasted Python traceback starting at line i-1: its frames are skipped, its last line (the
        `...Error: ...` cause) becomes a memory with the sentence that introduced the trace and the
        paragraph after it (the explanation). Returns the index after the trace."""
        self.flush()
        intro = None
        last = self.cands[-1] if self.cands else None
        if last is not None and last.turn == self.turn and not last.codes and last.text.rstrip().endswith(":"):
            intro = self.cands.pop()
        n, cause = len(lines), None
        while i < n:
            ln = lines[i]
            i += 1
            if not ln.strip():
                continue
            if _FRAME_RE.match(ln) or ln[:1] in " \t":
                self.skip(ln, "stack_frame")
                continue
            cause = ln.strip()
            break
        if cause is None:
            return i
        self.para_id += 1
        text = f"{intro.text} {cause}" if intro is not None else cause
        cand = _Cand(text, self.para_id, self.turn, self.heading_tags,
                     speaker=self.speaker if self.speaker_turn == self.turn else None)
        self.cands.append(cand)
        self.cause = cand
        self.attach_to = cand
        return i

    def _code_block(self, lines: list[str], i: int, fence: re.Match[str]) -> int:
        """Consume a fenced block starting after line i-1; returns the index after the closing fence."""
        indent, marker, lang = len(fence.group(1)), fence.group(2), fence.group(3).lower()
        close = re.compile(rf"^\s*{re.escape(marker[0])}{{{len(marker)},}}\s*$")
        self.flush()
        rest = lines[i - 1].strip()[len(marker):]
        if rest.rstrip().endswith(marker) and len(rest.strip()) > len(marker):
            # ```memcli reindex``` on one line: a block that opens and closes at once.
            self.attach("", rest.rstrip()[: -len(marker)].strip())
            return i
        body: list[str] = []
        n = len(lines)
        while i < n and not close.match(lines[i]):
            ln = lines[i]
            body.append(ln[indent:] if ln[:indent].strip() == "" else ln.lstrip())
            i += 1
        i += 1  # the closing fence (or past the end when unterminated)
        while body and not body[-1].strip():
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
        if body:
            self.attach(lang, "\n".join(body))
        return i


_URL_RE = lazy_compile(r"\bhttps?://[\w.-]+\.[a-z]{2,}\S*")
_TRACEBACK_RE = lazy_compile(r"^\s*Traceback \(most recent call last\):\s*$")
_FRAME_RE = lazy_compile(r"^\s*(?:File \".*\", line \d+|at [\w.$<>]+[ (]|\.\.\.\s*\d* more|\^+\s*$)")
_HEADED_PARAGRAPH_MAX = 1200
_SPEAKER_HEADINGS = frozenset((*_SPEAKERS, "model"))


_NAMED_SPEAKER_RE = lazy_compile(r"^\s*([A-Z][\w'’.-]{0,30}(?: [A-Z][\w'’.-]{0,30}){0,2}):\s+(?=\S)")
_NOT_SPEAKERS = frozenset(
    """note notes warning warnings tip tips todo fixme hack example examples important update updates summary
    answer question reason solution problem error errors result results output input step usage context
    decision status fix bug issue edit ps nb caveat hint info rule rules convention deadline owner owners
    action actions goal goals why what how when where who tl;dr tldr re subject date from to cc title name
    description details detail reminder remember outcome impact cause symptom workaround background
    pros cons pro con test tests source sources link links see also example config command commands
    file files path version versions breaking change changes changelog release feature features""".split()
)
_CHATTY_RE = lazy_compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|our|you|you're|you've|your|us)\b|[!?]",
                          re.IGNORECASE)


def _named_speaker(line: str) -> re.Match[str] | None:
    """A chat turn labelled with a person's name ("Joanna: I'm going to ..."): the name is kept
    with what they said. A label that is a common heading word ("Note:", "Owner:") is not a
    speaker, and neither is a label followed by impersonal prose."""
    m = _NAMED_SPEAKER_RE.match(line)
    if m is None or m.group(1).lower().rstrip(".") in _NOT_SPEAKERS:
        return None
    return m if _CHATTY_RE.search(line, m.end()) else None


def _turn_fact(cands: list[_Cand], default_type: str | None) -> tuple[Fact | None, list[dict[str, str]]]:
    """One fact for a named speaker's turn, attributed to the speaker: the whole turn, as said, once
    one of its sentences is worth keeping (sentences depend on their neighbours: "5 years already!
    Time flies...", "It's special to me.", "Thanks, Mel! ..." says who was addressed). A turn of only
    greetings, thanks and questions is skipped. Returns the fact (None when nothing is kept) and
    the skipped pieces ({text, rule}) when the turn is skipped."""
    whys: list[list[str]] = [[] for _ in cands]
    judged = [_judge(c, default_type, why) for c, why in zip(cands, whys)]
    kept = [i for i, f in enumerate(judged) if f is not None]
    if not kept:
        return None, [_piece(c.text, why[0] if why else "not_knowledge") for c, why in zip(cands, whys)]
    fact = judged[kept[0]]
    assert fact is not None
    if len(cands) > 1:  # the whole turn stays: who was addressed, the question it answers, the rest
        prose = " ".join(c.text for c in cands if c.text)
        fact.text = _render(prose, [code for c in cands for code in c.codes])
        fact.tags = _merge_tags(_tags_in_order(prose), fact.tags)
        fact.flags = detect_flags(fact.text)
        fact.code_pattern = code_pattern_of(fact.text)
    speaker = cands[0].speaker or ""
    if not fact.text.startswith(f"{speaker}:"):
        fact.text = f"{speaker}: {fact.text}"
    return fact, []


def _skip_front_matter(lines: list[str]) -> int:
    """Index of the first line after a leading YAML front-matter block (memcli's own memory files)."""
    if lines and lines[0].strip() == "---":
        for j in range(1, min(len(lines), 200)):
            if lines[j].strip() in ("---", "..."):
                return j + 1
    return 0


def _looks_like_commit(lines: list[str], first: int) -> bool:
    """A conventional-commit subject, or a short subject line in a message that carries git trailers."""
    subject = lines[first].strip()
    if _CONVENTIONAL_RE.match(subject):
        return True
    if len(subject) > 72 or subject.endswith((".", ":", "?")) or _SPEAKER_RE.match(subject):
        return False
    if first + 1 < len(lines) and lines[first + 1].strip():
        return False
    return any(_TRAILER_RE.match(ln) for ln in lines[first + 1:first + 200])


def heuristic_extract(text: str, *, default_type: str | None = None) -> Extraction:
    """Split `text` into candidate facts with plain heuristics (no LLM, no network).

    Used when no model is configured and as the fallback when the LLM path fails, so it has to be
    fast (linear in the input) and err on the side of skipping junk rather than storing it.
    """
    if default_type is not None and default_type not in MEMORY_TYPES:
        raise ValueError(f"unknown memory type {default_type!r}; expected one of {', '.join(MEMORY_TYPES)}")
    if not text or not text.strip():
        return Extraction(facts=[])
    scanner = _Scanner()
    scanner.run(text.replace("\r\n", "\n").replace("\r", "\n"))
    facts: list[Fact] = []
    seen: set[str] = set()
    skipped, pieces = scanner.skipped, scanner.skipped_pieces
    cands = scanner.cands
    i = 0
    while i < len(cands):
        cand = cands[i]
        if cand.speaker is not None:  # a named speaker's turn becomes one attributed fact
            j = i
            while j < len(cands) and cands[j].turn == cand.turn and cands[j].speaker == cand.speaker:
                j += 1
            fact, dropped = _turn_fact(cands[i:j], default_type)
            i = j
        else:
            why: list[str] = []
            fact = _judge(cand, default_type, why)
            dropped = [] if fact is not None else [_piece(cand.text, why[0] if why else "not_knowledge")]
            i += 1
        if fact is not None:
            key = normalise(fact.text)
            if key not in seen:
                seen.add(key)
                facts.append(fact)
                continue
            dropped = [_piece(cand.text, "repeated")]
        skipped += len(dropped)
        pieces.extend(dropped)
    return Extraction(facts=facts, skipped=skipped, method="heuristic", skipped_pieces=pieces)
