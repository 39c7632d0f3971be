"""Decision rules shared by `add`, `merge --auto` and `consolidate`: how a new text relates to a
stored one.

Embedding similarity says two texts are *about the same kind of thing*; it cannot tell "the staging
API listens on 8080" from "the production API listens on 443" (0.65-0.93 for such pairs, as high as
real paraphrases). So a similar neighbour is only a candidate, and these rules decide, reading the
words of both texts:

1. **Subject first.** The identifying parts must agree: scope words (staging/production, EU/US,
   iOS/Android, frontend/backend ...) and whatever sits before the sentence's verb (names,
   identifiers, paths, hosts, topic/service names). A text whose subject words are missing from the
   other is about something else: DISTINCT (ADD, linked `related` when close).
2. **Stated change.** Same subject, and the new text says it changed ("now", "no longer",
   "instead", "switched to", "replaced", "deprecated", "from now on", ...): SUPERSEDES.
3. **Value change.** Same subject and one slot holding a value (a number, version, identifier, a
   name, a tool, a day or frequency, on/off ...) has another value: SUPERSEDES; a negated predicate
   ("always"/"never", "can"/"cannot"): SUPERSEDES too (for `add`, the newer statement wins; for
   `consolidate` both are existing memories, so the pair is a contradiction to resolve).
4. **Novelty.** Same subject, nothing removed: SAME when nothing is added, else REFINES (UPDATE,
   the old text kept in `history`). Only generic wording swapped (a paraphrase) counts as the same
   fact when the texts are close enough (`threshold`, 0.85 by default); one specific detail swapped
   for another is never a paraphrase.

Everything here is pure string work on two texts (no I/O, no model), so every caller, the LLM
validation hook included, applies the same rules, and each verdict carries a one-line reason.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain

from memcli.core.lazy_re import lazy_compile
from memcli.core.refs import RELEASE_SUFFIX_RE, cited_refs, issue_refs, named_refs
from memcli.rules.subjects import (
    brought_back,
    headline,
    older_release,
    one_versioned,
    other_claim,
    package_keys,
    release_change,
    removal_of,
    removes,
    restated_version,
    reverts,
    same_pin,
    same_subject,
    strip_refs,
    subject_keys,
    version_change,
)

SAME = "same"  # nothing new: NONE
REFINES = "refines"  # same subject, says more: UPDATE
SUPERSEDES = "supersedes"  # same subject, new value or stated change: new memory, old one superseded
DISTINCT = "distinct"  # another subject or another fact: ADD

#: below this cosine similarity two texts are never treated as the same fact
CANDIDATE_FLOOR = 0.5
#: ... but from this one a change stated outright (a revert, a removal, "switched from A to B")
#: still bears on the older text
CHANGE_FLOOR = 0.3

_TOKEN_RE = lazy_compile(
    r"`[^`\n]+`"  # inline code, whole
    r"|https?://\S+[\w/]"  # URLs
    r"|~?/[\w.@%+-]*[\w@%+-](?:/[\w.@%+-]*[\w@%+-])*/?"  # paths
    r"|\d{1,2}:\d{2}(?::\d{2})?"  # times of day
    r"|[A-Za-z0-9_@#$%+]+(?:['’][a-z]{1,2}\b)?(?:[.\-/:][A-Za-z0-9_@#$%+]+)*"  # words, identifiers, versions
)

STOPWORDS = frozenset(
    """a about above across after again against all almost also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during each either else
    etc every few for from further get gets got had has have having he her here hers him his how i if in
    into is it its it's just let like may me might mine more most much my no nor not of off often on once
    only onto or other our ours out over own per please quite rather really same she should so some such
    than that that's the their theirs them then there these they this those through thus to too under
    until up upon us very via was we were what when where whether which while who whom whose why will with
    within would yet you your yours one ones thing things something anything everything
    always usually typically generally currently normally still there's we're we've i'm i've you're they're
    be can't won't isn't aren't don't doesn't didn't wasn't weren't shouldn't mustn't cannot never""".split()
)
#: words that state a change; multi-word ones are matched on the lowered text
CHANGE_PHRASES = (
    "now", "no longer", "not anymore", "anymore", "any more", "instead", "switched", "switch to", "switching to",
    "moved to", "moved from", "moving to", "migrated to", "migrated from", "replaced", "replaces", "replacing",
    "deprecated", "retired", "renamed", "from now on", "going forward", "as of today", "starting today",
    "changed to", "changed from", "is gone", "are gone", "was dropped", "were dropped", "dropped",
    "used to", "nowadays", "these days", "phased out", "superseded", "obsolete", "was removed", "were removed",
    "upgraded to", "downgraded to", "bumped to", "raised to", "lowered to", "reduced to", "increased to",
)
_CHANGE_RE = lazy_compile(r"\b(?:" + "|".join(re.escape(p) for p in sorted(CHANGE_PHRASES, key=len, reverse=True))
                          + r")\b")
_CHANGE_WORDS = frozenset(w for p in CHANGE_PHRASES for w in p.split()) - STOPWORDS - {"to", "from"}
#: "now" that announces an addition: "libripgrep is now a thing", "wheels are now available for CPython 3.12"
_ADDITIVE_NOW_RE = lazy_compile(r"\bnow\s+(?:also\b|a thing\b|(?:available|possible)\b"
                                r"|(?:supports?|accepts?|works?|handles?|allows?)\b(?!\s+only\b))")
_CHANGE_STEMS: frozenset[str] = frozenset()  # filled below, after _stem is defined

#: scope words: two texts that name different members of one class are about different things
SCOPES: tuple[frozenset[str], ...] = (
    frozenset("staging stage production prod dev development qa uat sandbox preview local test".split()),
    frozenset("eu us uk apac emea latam europe asia america na".split()),
    frozenset("ios android web mobile desktop macos linux windows".split()),
    frozenset("frontend backend client server".split()),
    frozenset("primary replica secondary leader follower master".split()),
    frozenset("internal external public private".split()),
    frozenset("v1 v2 v3 v4 v5".split()),
)
_SCOPE_OF = {w: i for i, ws in enumerate(SCOPES) for w in ws}
#: scope words that are also everyday words: scopes only in capitals ("the US cluster", not "tell us")
_CASED_SCOPES = frozenset({"us", "na", "eu", "uk"})
#: generic words that still hold a value in their slot (a day, a frequency, a switch)
VALUE_WORDS = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday weekday weekend weekends daily weekly
    monthly yearly hourly nightly quarterly annually biweekly on off enabled disabled enable disable true
    false yes tabs spaces asc desc ascending descending sync async synchronous asynchronous read-only
    read-write required optional allowed denied allow deny upper lower uppercase lowercase utc local gmt
    january february march april may june july august september october november december
    main master develop trunk debug info warning warn error critical trace verbose quiet
    once twice two three four five six seven eight nine ten eleven twelve dozen hundred thousand""".split()
)
#: values of one kind (a weekday, a frequency, a month); two values of different kinds fill different
#: slots ("released weekly" and "released on Mondays" can both be true)
_VALUE_CLASSES = (
    frozenset("monday tuesday wednesday thursday friday saturday sunday weekday weekend weekends".split()),
    frozenset("daily weekly monthly yearly hourly nightly quarterly annually biweekly".split()),
    frozenset("january february march april may june july august september october november december".split()),
)


def _value_class(t: _Tok) -> int | None:
    low = re.sub(r"s$", "", t.low) if t.low.endswith("days") else t.low
    if low.startswith("every_"):
        return 1
    for i, ws in enumerate(_VALUE_CLASSES):
        if low in ws or t.low in ws:
            return i
    return None


#: pairs of predicates that negate each other
OPPOSITES = (
    ("always", "never"), ("enable", "disable"), ("enabled", "disabled"), ("allow", "deny"), ("allowed", "denied"),
    ("must", "must not"), ("should", "should not"), ("can", "cannot"), ("do", "don't"), ("include", "exclude"),
    ("required", "optional"), ("increase", "decrease"),
)
_OPPOSITE_WORDS = frozenset(w for pair in OPPOSITES for w in pair if " " not in w)
_OPPOSITE_PHRASES = frozenset(w for pair in OPPOSITES for w in pair if " " in w)
_NEGATION_RE = lazy_compile(
    r"\b(?:never|no longer|cannot|can't|don't|doesn't|didn't|isn't|aren't|wasn't|weren't|won't|shouldn't|mustn't"
    r"|(?:do|does|did|is|are|was|were|will|should|must|can|could|would|may|need|has|have) not)\b"
)
_VERBS = frozenset(
    """is are was were be been being am has have had do does did can could should would will shall must may
    might need needs needed use uses used using run runs ran running listen listens listened own owns owned
    take takes took need require requires required store stores stored hold holds held handle handles handled
    go goes went move moves moved live lives lived point points pointed target targets targeted support
    supports supported evict evicts evicted deploy deploys deployed release releases released build builds
    built review reviews reviewed maintain maintains maintained validate validates validated cache caches
    cached retry retries retried export exports exported happen happens happened include includes included
    contain contains contained get gets got keep keeps kept send sends sent write writes wrote read reads
    serve serves served call calls called expose exposes exposed depend depends depended rely relies relied
    make makes made create creates created leak leaks leaked fail fails failed break breaks broke crash
    crashes crashed return returns returned expire expires expired rotate rotates rotated back backs backed
    sit sits lives talk talks talked connect connects connected belong belongs belonged mean means meant
    ship ships shipped push pushes pushed pull pulls pulled start starts started stop stops stopped
    replace replaces replaced switch switches switched migrate migrates migrated prefer prefers preferred
    like likes liked love loves loved want wants wanted plan plans planned think thinks thought know knows
    knew went visit visits visited work works worked sync syncs synced load loads loaded generate generates
    generated process processes processed emit emits emitted publish publishes published consume consumes
    consumed accept accepts accepted reject rejects rejected block blocks blocked trigger triggers
    triggered schedule schedules scheduled tag tags tagged limit limits limited wrap wraps wrapped
    follow follows followed skip skips skipped log logs logged retain retains retained index indexes indexed
    time times timed check checks checked lint lints linted format formats formatted test tests tested
    review reviewed restart restarts restarted autoscale autoscales take took taken lead leads led""".split()
)
_DETERMINERS = frozenset("a an the this that these those our your their my its his her each every all".split())


def _stem(word: str) -> str:
    """A crude stem: enough to match deploys/deployed/deploying and backup/backups, nothing more."""
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            if suffix == "s" and w.endswith("ss"):
                break
            w = w[: -len(suffix)]
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


_CHANGE_STEMS = frozenset(_stem(w) for w in _CHANGE_WORDS)


#: abbreviations read as the words they stand for ("the analytics DB" is "the analytics database")
ABBREVIATIONS = {
    "db": "database", "dbs": "databases", "repo": "repository", "repos": "repositories", "pr": "pull request",
    "prs": "pull requests", "prod": "production", "env": "environment", "envs": "environments",
    "config": "configuration", "configs": "configurations", "k8s": "kubernetes", "docs": "documentation",
    "deps": "dependencies", "dep": "dependency", "auth": "authentication", "msg": "message", "msgs": "messages",
    "infra": "infrastructure", "dev": "development", "pw": "password", "pwd": "password", "svc": "service",
}


#: a frequency said in words is the same value as its adverb ("every night" is "nightly")
_FREQUENCY_RE = lazy_compile(r"\b(?:every|each|once a|once per|once every)\s+(night|day|week|month|hour|year)\b", re.I)
_FREQUENCY = {"night": "nightly", "day": "daily", "week": "weekly", "month": "monthly", "hour": "hourly",
              "year": "yearly"}
#: verbs that say the same thing ("X requires Y" is "X needs Y"), read as one
SYNONYMS = {"require": "need", "requires": "needs", "requiring": "needing", "begin": "start", "begins": "starts",
            "began": "started", "beginning": "starting", "utilise": "use", "utilize": "use", "utilises": "uses",
            "utilizes": "uses"}


_EVERY_N_RE = lazy_compile(r"\b(?:every|each|once every)\s+(other|\w+)\s+(night|day|week|month|hour|year)s?\b", re.I)
_NUMBER_WORDS = {"other": "2", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "2": "2", "3": "3",
                 "4": "4", "5": "5", "6": "6", "10": "10", "12": "12", "15": "15", "30": "30"}


def _normalise_phrases(text: str) -> str:
    """Rewrite fixed phrases to the single word they mean, before tokenising: "every night" is
    "nightly", "every two weeks" / "every other week" is the one value "every_2_weeks"."""
    def every_n(m: re.Match[str]) -> str:
        n = _NUMBER_WORDS.get(m.group(1).lower())
        return f"every_{n}_{m.group(2).lower()}s" if n else m.group()
    return _FREQUENCY_RE.sub(lambda m: _FREQUENCY[m.group(1).lower()], _EVERY_N_RE.sub(every_n, text))


@dataclass
class _Tok:
    text: str  # as written
    low: str
    stem: str
    specific: bool  # carries a value or identifies something: number, identifier, name, code, tool...
    scope: int | None  # index into SCOPES
    cap: bool = False  # written with a capital (a name, wherever it stands)
    # derived from the fields above once per token (tokens are cached and shared between texts), so
    # that `parse` does not work them out again for every text a curation pass meets the word in
    kept: bool = field(init=False, compare=False)  # a content word (see `Parsed.content`)
    parts: frozenset[str] = field(init=False, compare=False)  # see `Parsed.parts`
    verb: bool = field(init=False, compare=False)  # a known verb
    s_form: bool = field(init=False, compare=False)  # a word in -s that may be a verb (see `_is_verb`)

    def __post_init__(self) -> None:
        low = self.low
        self.kept = not ((low in STOPWORDS and self.scope is None) or self.stem in _CHANGE_STEMS
                         or low in _CHANGE_WORDS or (len(low) == 1 and not low.isdigit()))
        self.parts = _word_parts(low) - STOPWORDS
        self.verb = low in _VERBS
        self.s_form = low.endswith("s") and not low.endswith("ss") and low.isalpha()


@dataclass
class Parsed:
    """What the rules need of one text."""

    text: str
    tokens: list[_Tok]
    content: dict[str, _Tok]  # stem -> token, stopwords and change words left out
    subject: set[str]  # stems before the first verb
    change: bool  # states a change
    negated: bool
    scopes: dict[int, set[str]] = field(default_factory=dict)
    #: the word parts of its identifiers, paths and URLs ("gs://ml-ckpt/resnet" -> ml, ckpt, resnet;
    #: "NDCG@10" -> ndcg, 10), stemmed, less the identifiers themselves and stopwords
    parts: set[str] = field(default_factory=set)
    # Built once per text by `parse`, not once per comparison (a curation pass compares each text
    # with several others):
    #: the lowered tokens joined by single spaces, with a space at each end: where a phrase
    #: ("must not") is looked up word-aligned
    spaced: str = ""
    words: frozenset[str] = frozenset()  # the lowered tokens, as a set
    keys: frozenset[str] = frozenset()  # the stems of `content`
    specific_keys: frozenset[str] = frozenset()  # the stems of `content` whose token is specific
    opposites: frozenset[str] = frozenset()  # the words of OPPOSITES found in `spaced`
    change_words: frozenset[str] = frozenset()  # `words` that are change words


_TECH: frozenset[str] | None = None


def _tech_words() -> frozenset[str]:
    """Tool and technology names: values in their slot ("format with black" -> "with ruff")."""
    global _TECH
    if _TECH is None:
        _TECH = frozenset(
            """pnpm npm yarn pip uv poetry black ruff flake8 mypy pytest tox nox jest vitest mocha playwright
            cypress webpack vite rollup esbuild babel eslint prettier docker podman kubernetes helm terraform
            ansible jenkins buildkite circleci travis netlify vercel heroku fly sentry rollbar datadog grafana
            prometheus loki promtail elasticsearch opensearch kafka rabbitmq redis memcached postgres mysql
            sqlite mongodb dynamodb celery dramatiq rq sidekiq vault nginx apache caddy traefik make just bazel
            gradle maven cargo go rust python node deno bun java kotlin swift ruby php elixir scala react vue
            svelte angular django flask fastapi rails spring express nextjs nuxt alembic flyway liquibase
            github gitlab bitbucket slack jira linear notion confluence aws gcp azure s3 gcs cloudflare
            launchdarkly unleash okta auth0 keycloak stripe paypal twilio sendgrid mailgun""".split()
        )
    return _TECH


_POSSESSIVE_RE = lazy_compile(r"['’]s$")
_JOINED_RE = lazy_compile(r"[a-z0-9][._/][a-z0-9]")
_CAMEL_RE = lazy_compile(r"[a-z][A-Z]")
_HYPHENATED_RE = lazy_compile(r"[a-z]+(?:-[a-z]+)+")


@functools.lru_cache(maxsize=65536)
def _tokens_of(raw: str, sentence_start: bool) -> tuple[_Tok, ...]:
    """The token(s) one matched word stands for. It depends only on the word as written and on
    whether a sentence starts there, and words recur across texts: a curation pass over 10k
    memories parses ~10k texts but meets a few thousand distinct words, so each is worked out once.
    The tokens are shared between texts and never modified."""
    low = raw.lower().strip("`'’")
    low = _POSSESSIVE_RE.sub("", low)
    is_code = raw.startswith("`")
    has_digit = any(c.isdigit() for c in low)
    has_alpha = any(c.isalpha() for c in low)
    ident = is_code or low.startswith(("/", "~", "http")) or (has_digit and has_alpha) or bool(
        _JOINED_RE.search(low)) or ("_" in low) or bool(_CAMEL_RE.search(raw))
    proper = raw[:1].isupper() and not sentence_start and low not in STOPWORDS
    acronym = len(raw) >= 2 and raw.isupper() and raw.isalpha()
    specific = (has_digit or ident or proper or acronym or low in _tech_words() or low in VALUE_WORDS)
    if low in SYNONYMS:
        low = SYNONYMS[low]
    if low in ABBREVIATIONS and not is_code:
        return tuple(_Tok(word, word, _stem(word), False, _SCOPE_OF.get(word), False)
                     for word in ABBREVIATIONS[low].split())
    stem = low if (has_digit or ident) else _stem(low)
    if _HYPHENATED_RE.fullmatch(low):  # squash-merged / squash-merge
        head, _, last = low.rpartition("-")
        stem = f"{head}-{_stem(last)}"
    scope = _SCOPE_OF.get(low)
    if low in _CASED_SCOPES and not raw.isupper():
        scope = None  # "us" the pronoun, not the US
    return (_Tok(raw, low, stem, specific or scope is not None, scope, raw[:1].isupper()),)


@functools.lru_cache(maxsize=32768)
def parse(text: str) -> Parsed:
    """Tokens of `text` with their roles (see the module docstring). Cached: a stored memory is
    compared with many new facts (one `add --batch` of a chat log compares the same few hundred)."""
    lowered = " ".join(text.lower().split())
    # `_normalise_phrases` rewrites only phrases with "every", "each" or "once": a text without any
    # (lowered: the regexes ignore case) is left as it is
    hint = "every" in lowered or "each" in lowered or "once" in lowered
    spelled = _normalise_phrases(text) if hint else text
    # each word with what follows it: a new sentence starts after . ! ? ; or : (or a space and one
    # of them, or a line break), and the capital that follows is not a name
    found = _TOKEN_END_RE.findall(spelled)
    raws, afters = zip(*found) if found else ((), ())
    # word i starts a sentence when word i-1 ended one (map stops at the shorter iterable)
    toks: list[_Tok] = list(chain.from_iterable(map(_tokens_of, raws, chain((True,), map(bool, afters)))))
    # stem -> its first content token (built from the last, so the first one stays)
    content: dict[str, _Tok] = {t.stem: t for t in toks[::-1] if t.kept}
    parts: set[str] = set().union(*[t.parts for t in toks])
    subject: set[str] = set()
    for i, t in enumerate(toks):
        if (t.verb or (i and t.s_form)) and _is_verb(toks, i):
            break
        if t.stem in content:
            subject.add(t.stem)
    else:
        subject = set()  # no verb found: a fragment, whose "subject" cannot be told
    scopes: dict[int, set[str]] = {}
    for t in [t for t in toks if t.scope is not None]:
        if not (t.low == "test" and not _scope_noun_follows(t, toks)):
            scopes.setdefault(t.scope, set()).add(t.low)
    lows = [t.low for t in toks]
    spaced = f" {' '.join(lows)} "
    words = frozenset(lows)
    # the phrase regexes run only when a word they need is in the text (most texts state no change)
    runs = frozenset(_WORD_RUN_RE.findall(lowered))
    change = not runs.isdisjoint(_CHANGE_KEYS) and bool(_CHANGE_RE.search(lowered))
    negated = not runs.isdisjoint(_NEGATION_KEYS) and bool(_NEGATION_RE.search(lowered))
    return Parsed(text, toks, content, subject, change, negated, scopes, parts, spaced=spaced, words=words,
                  keys=frozenset(content), specific_keys=frozenset([s for s, t in content.items() if t.specific]),
                  opposites=_opposites(spaced, words, len(toks)),
                  change_words=words & _CHANGE_WORDS)


def _opposites(spaced: str, words: frozenset[str], n: int) -> frozenset[str]:
    """The words and phrases of OPPOSITES that `spaced` holds word-aligned. When no token holds a
    space (one separator per token), a word is there exactly when it is a token."""
    if n and spaced.count(" ") == n + 1:
        found = words & _OPPOSITE_WORDS
        if "not" in words:
            found |= {w for w in _OPPOSITE_PHRASES if f" {w} " in spaced}
        return found
    return frozenset(w for w in _OPPOSITE_WORDS | _OPPOSITE_PHRASES if f" {w} " in spaced)


#: `_TOKEN_RE` and, for each word, what ends a sentence right after it (empty when nothing does)
_TOKEN_END_RE = lazy_compile(f"({_TOKEN_RE.pattern})" + r"(?=(\s?[.!?;:]|\n)?)")
_WORD_RUN_RE = lazy_compile(r"\w+")
#: one word (a run of \w) of each phrase of _CHANGE_RE / _NEGATION_RE: a text without any of them
#: cannot match the regex ("can't" ends in the run "t")
_CHANGE_KEYS = frozenset(max(_WORD_RUN_RE.findall(p), key=len) for p in CHANGE_PHRASES)
_NEGATION_KEYS = frozenset({"never", "longer", "cannot", "t", "not"})


def _is_verb(words: list[_Tok], i: int) -> bool:
    """Is words[i] the sentence's verb? A known verb not right after a determiner, or a word in -s
    between a noun and what reads like an object ("the team *follows* the ...")."""
    t = words[i]
    prev = words[i - 1].low if i else ""
    if t.low in _VERBS:
        return prev not in _DETERMINERS
    if i == 0 or not t.low.endswith("s") or t.low.endswith("ss") or not t.low.isalpha():
        return False
    nxt = words[i + 1] if i + 1 < len(words) else None
    return (prev not in _DETERMINERS and prev not in STOPWORDS and nxt is not None
            and (nxt.low in _DETERMINERS or nxt.low in _PREPOSITIONS or nxt.cap or nxt.low[:1].isdigit()))


_PREPOSITIONS = frozenset("in on at to from with by for of into onto via under over after before".split())


def _scope_noun_follows(t: _Tok, toks: list[_Tok]) -> bool:
    """`test` is a scope only as in "the test environment/cluster/server/database"."""
    i = toks.index(t)
    return i + 1 < len(toks) and toks[i + 1].low in {"environment", "env", "cluster", "server", "database", "db",
                                                        "instance", "stack", "account", "region", "bucket"}


class Relation:
    """How a new text relates to a stored one, and why (one line, for the user).

    `kind`: SAME | REFINES | SUPERSEDES | DISTINCT; `contradiction`: a value or polarity conflict
    between same-subject texts. The reason may be given as a function that writes it, called when
    the reason is first read: a curation pass asks for ~20k relations and reads a few hundred reasons.
    """

    __slots__ = ("kind", "contradiction", "_reason")

    def __init__(self, kind: str, reason: str | Callable[[], str], contradiction: bool = False) -> None:
        self.kind, self.contradiction, self._reason = kind, contradiction, reason

    @property
    def reason(self) -> str:
        if not isinstance(self._reason, str):
            self._reason = self._reason()
        return self._reason

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Relation):
            return NotImplemented
        return (self.kind, self.reason, self.contradiction) == (other.kind, other.reason, other.contradiction)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value (as the dataclass it was)

    def __repr__(self) -> str:
        return f"Relation(kind={self.kind!r}, reason={self.reason!r}, contradiction={self.contradiction!r})"


_AFTER_MARKERS = frozenset("replaced replaces replacing longer switched migrated moved".split())


_INNER_MARK_RE = lazy_compile(r"[a-z0-9][._/-][a-z0-9]")
_NON_WORD_RE = lazy_compile(r"[^a-z0-9]+")


def _identifying(t: _Tok) -> bool:
    """A token that names one thing among others of its kind: digits, dots, slashes, dashes."""
    return _identifying_word(t.low)


@functools.lru_cache(maxsize=65536)
def _identifying_word(low: str) -> bool:
    """`_identifying` of a lowered word, worked out once per distinct word (it is asked for every
    token of every text a curation pass compares)."""
    return any(c.isdigit() for c in low) or bool(_INNER_MARK_RE.search(low)) or "_" in low


def _change_about(new: Parsed, old: Parsed) -> bool:
    """Does a change word of `new` bear on something the old text named? ("... GitHub Actions was
    retired", "instead of Netlify"): a specific word of the old text within four words of it.
    "Use tmp_path instead of writing to /tmp" states no change to the stored fact."""
    toks = new.tokens
    old_words = old.words
    for i, t in enumerate(toks):
        if t.low not in _CHANGE_WORDS or t.low in old_words:
            continue
        after_only = t.low in _AFTER_MARKERS or (t.low == "instead" and i + 1 < len(toks) and toks[i + 1].low == "of")
        if t.low == "instead" and not after_only:
            continue  # "use X instead": X is the new value; the old one is not named here
        window = toks[i + 1: i + 6] if after_only else toks[max(0, i - 4): i + 5]
        for u in window:
            if u is not t and u.stem in old.content and (u.specific or u.cap) and u.low not in STOPWORDS:
                return True
    return False


def _short(words: set[str] | list[str], limit: int = 3) -> str:
    w = sorted(words)
    return ", ".join(w[:limit]) + ("…" if len(w) > limit else "")


def _polarity_flip(a: Parsed, b: Parsed) -> str | None:
    """The predicate negated between two texts ("always" vs "never", "can" vs "cannot")."""
    la, lb = a.opposites, b.opposites  # which of the words of OPPOSITES each text holds, word-aligned
    if la or lb:
        for x, y in OPPOSITES:
            if " " in y:  # "must" / "must not"
                if (y in la) != (y in lb) and x in la and x in lb:
                    return f"'{x}' vs '{y}'"
                continue
            if (x in la and y in lb and y not in la and x not in lb) or (
                    y in la and x in lb and x not in la and y not in lb):
                return f"'{x}' vs '{y}'"
    if a.negated != b.negated:
        plain = a if b.negated else b
        other = {t.stem for t in (b if b.negated else a).tokens}
        if any(t.low in NEGATIVE_WORDS and t.stem not in other for t in plain.tokens):
            return None  # "is broken" / "doesn't work": both say it does not
        return "one says not"
    return None


#: words that say "not" by themselves: a text holding one agrees with a negated rewording
NEGATIVE_WORDS = frozenset(
    """broken fails failing failed down missing unavailable unsupported unreachable forbidden disallowed
    prohibited banned impossible flaky absent unused lacks lacking""".split()
)


def _small(removed: dict[str, _Tok], added: dict[str, _Tok]) -> bool:
    """Only a word or two differs: a negation then bears on what both texts say."""
    return len(removed) <= 1 and len(added) <= 1


@functools.lru_cache(maxsize=65536)
def _normal(text: str) -> str:
    """`extract.normalise`, remembered: a curation pass compares each text with several others."""
    from memcli.services.extract import normalise  # here, not at the top: search never needs it (~15 ms of import)

    return normalise(text)


def relate(old: str, new: str, similarity: float, *, threshold: float = 0.85, strict: bool = False) -> Relation:
    """The relation of `new` to the stored `old` (cosine `similarity` between them).

    `threshold` is the similarity from which a pure rewording (generic words swapped, nothing
    specific changed) counts as the same fact. `strict` (commit subjects, changelog items: texts
    of one shape, "did X", that differ in what they did) supersedes by wording only when both
    texts name the same subject; the stated changes of step 0 still apply.
    """
    rel = _relate(old, new, similarity, threshold=threshold, strict=strict)
    # (the reason is built only for an announcement: most supersedes are none)
    if strict and rel.kind == SUPERSEDES and _announces_addition(new) \
            and not rel.reason.startswith(("states a change:", "reverts")):
        # an item announcing something new ends nothing before it: "Faster compiled wheels are now
        # available for CPython 3.12" (psf/black 23.12.0) ended 3.11's; "libripgrep is now a thing. The
        # primary crate is `grep`" (BurntSushi/ripgrep 0.10.0) ended "Upgrade `grep` crate to ..."
        return Relation(DISTINCT, lambda: f"announces an addition ({rel.reason})")
    return rel


def _announces_addition(text: str) -> bool:
    """An additive "now" and no other change word ("instead", "no longer" still state a change)."""
    low = text.lower()
    return bool(_ADDITIVE_NOW_RE.search(low)) and not _CHANGE_RE.search(_ADDITIVE_NOW_RE.sub(" ", low))


def _relate(old: str, new: str, similarity: float, *, threshold: float, strict: bool) -> Relation:
    """`relate` but for announcements (see there)."""
    # (read before references are stripped; only the strict reading of changelog items asks)
    ro, rn = (RELEASE_SUFFIX_RE.search(old), RELEASE_SUFFIX_RE.search(new)) if strict else (None, None)
    # "update connect" in express 3.2.5, 3.3.1, 3.3.8, 3.4.3...: each release's own update, not one
    # fact absorbing them all as "already known"
    two_releases = bool(ro and rn and ro.group(1) != rn.group(1))
    if _normal(old) == _normal(new):
        return Relation(SAME, "same text")
    if similarity < CHANGE_FLOOR:
        return Relation(DISTINCT, lambda: f"not similar ({similarity:.2f})")
    # 0. changes stated outright, read from the texts themselves: a revert, a newer release, the
    # removal of the name the old text is about, "switched from <old value> to ...". Such a pair
    # may be far apart in embedding space (a long deprecation note vs "`app` has now been
    # removed": 0.3-0.5), so these are asked from CHANGE_FLOOR
    if reverts(old, new):
        return Relation(SUPERSEDES, "reverts it", contradiction=True)
    if reverts(new, old):
        # `Revert "Add support for ASGI `pathsend` extension"`, then the same change made again
        # ten months later (encode/starlette #2649, #2671): the change is back
        return Relation(SUPERSEDES, "makes again the change it reverted", contradiction=True)
    if strict and same_change(old, new) and not two_releases:
        # (two releases' items on one issue are two steps: "Fish shell completions will be removed in
        # the ripgrep 13 release. See #1577" (12.1.0), "[BUG #1577]: ... will continue to be
        # auto-generated" (13.0.0): the wording rules below judge them)
        # a commit and the changelog item citing its pull request, a cherry-pick, a backport: one
        # change said twice, whatever the words ("Deprecate the `uvicorn.workers` module (#2302)" /
        # "Deprecated: Deprecate the `uvicorn.workers` module (#2302) (version 0.30.0)")
        return Relation(SAME, lambda: f"the same change ({_refs(cited_refs(old))}) said again")
    released = release_change(old, new)
    if released:  # (an older release than the stored one: `older_release`, the decider stores it superseded)
        which = "older" if older_release(old, new) else "newer"
        return Relation(SUPERSEDES, f"{which} release: {released}", contradiction=True)
    removed = removal_of(old, new)
    if removed:
        return Relation(SUPERSEDES, f"states a removal: {removed}", contradiction=True)
    back = brought_back(old, new)
    if back:
        return Relation(SUPERSEDES, f"states a change: {back} is back", contradiction=True)
    switched = switched_from(strip_refs(old), strip_refs(new), strict=strict)
    if switched:
        return Relation(SUPERSEDES, f"states a change: {switched}", contradiction=True)
    if similarity < CANDIDATE_FLOOR:
        # a new version of one named package is a change stated outright too, however the texts
        # are worded ("Allow rich 12" / "Bump rich pin to allow version 13": 0.4)
        bumped = version_change(old, new) if same_subject(old, new)[0] else None
        if bumped:
            return Relation(SUPERSEDES, f"new version: {bumped}", contradiction=True)
    if similarity < min(CANDIDATE_FLOOR, threshold):
        return Relation(DISTINCT, lambda: f"not similar ({similarity:.2f})")
    # reference numbers are provenance ("closes #382" vs "#381" is no new value), and the names
    # a text is about (options, code names, packages) are its subject: two texts that both name
    # some must name the same ones (memcli.rules.subjects)
    # references are dropped, and a called name is the name ("`get_pager_file()`" is "`get_pager_file`")
    refs_o, refs_n = cited_refs(old), cited_refs(new)
    named = (named_refs(old) - refs_n) | (named_refs(new) - refs_o)
    if refs_o and refs_n and named:
        # "Add regression test for #1765": a reference the text is about is its subject
        return Relation(DISTINCT, lambda: f"different subject: {_refs(named)}")
    so, sn = _CALLED_RE.sub(r"\1", strip_refs(old)), _CALLED_RE.sub(r"\1", strip_refs(new))
    if _content_count(so) >= 2 and _content_count(sn) >= 2:  # "Reconcile #2811 and #2840": the refs are all it says
        old, new = so, sn
        if _normal(old) == _normal(new):
            if two_releases:
                return Relation(DISTINCT, lambda: f"another release's change ({ro.group(1)} vs {rn.group(1)})")
            bumped = version_change(old, new) if strict else None
            if bumped:  # "chore(deps): bump github.com/go-playground/validator/v10 (#3330)", then (#4509)
                return Relation(SUPERSEDES, f"new version: {bumped}", contradiction=True)
            return Relation(SAME, "same text but for its references")
    same, why = same_subject(old, new)
    if same is False:
        return Relation(DISTINCT, why)
    if same:
        bumped = version_change(old, new)
        if bumped:
            return Relation(SUPERSEDES, f"new version: {bumped}", contradiction=True)
        pinned = same_pin(old, new)
        if pinned and not two_releases and not _fixes_it(old, new, strict):
            # (not "Features: Add support for pip>=22.1 (version 6.6.0)" / "Fix support for pip>=22.1
            # (version 6.6.1)", jazzband/pip-tools: the fix is the next release's change)
            return Relation(SAME, lambda: f"the same version said again ({pinned})")
        apart = other_claim(old, new)
        if apart:
            return Relation(DISTINCT, apart)
    elif same is None and strict:
        restated = restated_version(old, new)
        if restated:
            return Relation(SUPERSEDES, f"new version: {restated}", contradiction=True)
    rel = _by_words(old, new, similarity, threshold)
    if rel.kind in (SAME, REFINES) and strict and refs_o and refs_n and not refs_o & refs_n:
        # two commit subjects or changelog items citing other pull requests are two changes, however
        # alike their words ("Preserve comments before fmt: skip lines (#5139)" / "... (#5300)")
        return Relation(DISTINCT, lambda: f"another change: {_refs(refs_o)} vs {_refs(refs_n)}")
    if rel.kind in (SAME, REFINES) and strict and package_keys(new) and not subject_keys(old) \
            and not any(re.search(rf"\b{re.escape(k)}\b", old, re.I) for k in package_keys(new)):
        # a bump of a named package is no detail of a commit that names none: "deps: bump crossbeam-channel
        # from 0.5.13 to 0.5.15" (2025) joined "deps: bump everything else" (2024), BurntSushi/ripgrep
        return Relation(DISTINCT, lambda: f"a bump of {', '.join(sorted(package_keys(new)))}, another change")
    if two_releases and (
            rel.kind in (SAME, REFINES) or rel.kind == SUPERSEDES and not rel.contradiction):
        # two releases' items are two changes, however alike, unless a value was replaced:
        # "`attrs.resolve_types()` now resolves types of subclasses ... (version 21.1.0)" / "The type
        # annotation for `attrs.resolve_types()` is now correct. (version 23.2.0)" (python-attrs/attrs);
        # "View functions can now return a tuple ... (version 0.9)" / "... return generators directly
        # instead of wrapping them in a ``Response`` (version 2.2.0)" (pallets/flask). The same
        # text twice is caught above
        return Relation(DISTINCT, lambda: f"another release's change ({ro.group(1)} vs {rn.group(1)})")
    if rel.kind == SUPERSEDES and strict and not same:
        return Relation(DISTINCT, lambda: f"not shown to be one subject ({rel.reason})")
    if rel.kind == SUPERSEDES and strict and rel.reason.startswith("new value"):
        apart = one_versioned(old, new)
        if apart:
            return Relation(DISTINCT, apart)
    if rel.kind in (SUPERSEDES, REFINES, SAME) and not rel.contradiction and _fixes_it(old, new, strict):
        # "Fixed: `MaybeTimeStamper` now respects the *key* argument" does not end "Added:
        # `MaybeTimeStamper` that only adds a timestamp if there isn't one" (hynek/structlog 23.2.0,
        # 25.5.0): a fix's "now" tells the fixed behaviour; a value it replaces is read above. Nor is
        # a fix more of the feature it fixes ("enable secret key rotation" / "Fix signing key
        # selection order when key rotation is enabled ...", pallets/flask 3.1.1): another change; nor
        # is it the feature said again ("ignore/types: add support for Seed7 files" / "ignore/types: fix
        # Seed7 file extension", BurntSushi/ripgrep)
        return Relation(DISTINCT, lambda: f"a fix of it, another change ({rel.reason})")
    if rel.kind == SUPERSEDES and same is None and (subject_keys(old) or subject_keys(new)) \
            and not _STRONG_CHANGE_RE.search(new):
        # one text names its subject (an option, a code name, a file) and the other names none: the
        # wording alone ("now", one word swapped) does not show they are about one thing
        return Relation(DISTINCT, lambda: f"not shown to be one subject ({rel.reason})")
    if rel.kind == REFINES and strict and not (ro or rn) and similarity < 0.8:
        # a later commit that says more of the same thing is another change to it ("group exceptions"
        # / "detect recursion in Exception Groups", "Add support for tables in Markdown" / "Update styling
        # to be minimal in markdown tables, add inline style support", Textualize/rich: 0.56, 0.71); a
        # rewording that close is the same change said better ("Hide UNSET in the callback" / "Temporarily
        # provide a fake context to the callback to hide `UNSET` values", pallets/click: 0.81), and a
        # commit and its changelog item still join
        return Relation(DISTINCT, lambda: f"another commit on it ({rel.reason})")
    if rel.kind in (SAME, REFINES) and removes(new) != removes(old):
        # "fix min python for pip-compile" / "remove min python for pip-compile" (pallets/flask): one
        # verb apart, and that verb undoes the other; a removal after the fact is its newest state
        if removes(new) and not _FROM_DOCS_RE.search(headline(new)):
            return Relation(SUPERSEDES, "states a removal of it", contradiction=True)
        return Relation(DISTINCT, "one removes what the other does")
    return rel


#: a change stated outright: enough to supersede even when only one text names its subject
_STRONG_CHANGE_RE = lazy_compile(
    r"\b(?:no longer|not anymore|any more|instead|switched|replaced|removed|dropped|renamed|migrated|moved to"
    r"|deprecated|is gone|are gone|phased out|retired)\b", re.I)


_CALLED_RE = lazy_compile(r"(\w)\(\)")
#: "remove FLASK_ENV from docs" removes a mention, not the thing (pallets/flask)
_FROM_DOCS_RE = lazy_compile(r"\bfrom (?:the )?(?:docs?|documentation|readme|tests?|examples?|changelog)\b", re.I)
_FIX_START_RE = lazy_compile(r"^\W*(?:[\w/.\-]+(?:\([^)\n]*\))?!?:\s*)?(?:fixed|fix(?:es)?|bug\s?fix(?:es)?)\b", re.I)


def _fixes_it(old: str, new: str, strict: bool) -> bool:
    """A commit subject or changelog item (`strict`) that is a fix, after one that is not."""
    return strict and bool(_FIX_START_RE.match(new)) and not _FIX_START_RE.match(old)


def another_commit(old: str, new: str) -> str | None:
    """Two whole commits whose subject lines read as one statement but which are two changes: their
    messages cite other references ("ignore/types: add support for Seed7 files ... PR #3022" / "...
    fix Seed7 file extension PR #3023"), or one subject line carries two bodies that say other
    things ("deps: update everything" removing winapi, then removing `once_cell`, BurntSushi/ripgrep).
    The reason, or None. (`relate` compares the subject lines; this reads the rest.)"""
    ro, rn = cited_refs(old), cited_refs(new)
    if ro and rn and not ro & rn and _normal(strip_refs(headline(old))) != _normal(strip_refs(headline(new))):
        return f"another change: {_refs(ro)} vs {_refs(rn)}"  # (one subject line under two numbers is one)
    bo, bn = (_normal(strip_refs(t.strip().partition("\n")[2])) for t in (old, new))
    if bo and bn and bo not in bn and bn not in bo:
        return "another change under the same subject line"
    return None


def same_change(old: str, new: str) -> bool:
    """Both texts cite the same pull requests (`#N`), and as provenance, not as what they are about
    ("Add regression test for #1765" is about #1765): one change, described twice. A commit and
    the changelog item citing it are one; two commits are one only through a pull request (a
    cherry-pick, a backport): an issue is worked on by many ("sqlite-utils query --functions
    option, refs #471" / "sqlite-utils memory --functions, refs #471", simonw/sqlite-utils), and
    two items of one release are two lines of its notes."""
    refs = cited_refs(old)
    if not refs or refs != cited_refs(new) or named_refs(old) or named_refs(new):
        return False
    item_o, item_n = bool(RELEASE_SUFFIX_RE.search(old)), bool(RELEASE_SUFFIX_RE.search(new))
    if item_o != item_n:
        return True
    return not item_o and not refs <= issue_refs(old) | issue_refs(new)


def _refs(numbers: set[str]) -> str:
    return ", ".join(f"#{n}" for n in sorted(numbers, key=int))


def _content_count(text: str) -> int:
    """Words, but for articles and conjunctions: what is left of "Reconcile #2811 and #2840" once
    its references are gone is one word, and the references were what it said."""
    return sum(1 for w in re.findall(r"[a-z][a-z0-9_'-]+", text.lower()) if w not in ("and", "or", "the", "a", "an"))


def _said(text: str, words: set[str]) -> str:
    """How `text` states its change, as written ("no longer", "removed"), for a decision's reason."""
    for w in sorted(words):
        m = re.search(rf"\b(?:(?:no|not|now)\s+)?{re.escape(w)}\w*", text, re.IGNORECASE)
        if m:
            return m.group(0)
    return "it"


def _by_words(old: str, new: str, similarity: float, threshold: float) -> Relation:
    """Steps 1-4 of the module docstring: the relation read from the words of both texts."""
    po, pn = parse(old), parse(new)
    # 1. scope words: staging vs production, EU vs US, iOS vs Android ...
    for scope, words in po.scopes.items():
        other = pn.scopes.get(scope)
        if other and other != words and (words - other) and (other - words):
            return Relation(DISTINCT, f"different subject: {_short(words - other)} vs {_short(other - words)}")
    # a word that is a part of an identifier of the other text is not gone: "NDCG" -> "NDCG@10",
    # "resnet checkpoints" -> "gs://ml-ckpt/resnet"
    parts_o, parts_n = po.parts, pn.parts
    keys_o, keys_n = po.keys, pn.keys
    removed_keys, added_keys = keys_o - keys_n - parts_n, keys_n - keys_o - parts_o
    removed = {s: po.content[s] for s in removed_keys}
    added = {s: pn.content[s] for s in added_keys}
    r_spec, a_spec = removed_keys & po.specific_keys, added_keys & pn.specific_keys
    r_gen, a_gen = removed_keys - r_spec, added_keys - a_spec
    shared = keys_o & keys_n
    # the subject: words before the verb, missing from the other text
    old_gone = po.subject - keys_n - parts_n
    new_gone = pn.subject - keys_o - parts_o
    # an identifier or a number in one subject that the other lacks names another thing ("orders.created",
    # "service-1"); a plain name or acronym may just be reworded away ("the cache TTL ..." -> "... cached")
    specific_gone = {s for s in old_gone if _identifying(po.content[s])} | \
        {s for s in new_gone if _identifying(pn.content[s])}
    subj_missing = (old_gone | new_gone) if (old_gone and new_gone) or specific_gone else set()
    fresh = pn.change_words - po.words
    # a change word counts when it bears on the old text: a value of it named near the word, or
    # the texts otherwise parallel (one or two words replaced: "is master" -> "was renamed to main")
    change = pn.change and bool(fresh) and (bool(r_spec) or 0 < len(removed) <= 2 or _change_about(pn, po))
    single_slot = len(r_spec) <= 1 and len(a_spec) <= 2 and not (r_gen and a_gen and r_spec)
    if subj_missing:
        # "Priya is the lead ..." -> "Ahmed is the lead ... now": a stated change of one name is a new value
        names = {s for s, t in {**removed, **added}.items() if t.specific or t.cap}
        # "Keiko is the release manager for Q3" -> "Rafael is ...": one holder of a role named with
        # "the" (or owned, led) replaced by another, nothing else changed
        if _holder_swapped(po, pn, old_gone, new_gone, removed, added):
            return Relation(SUPERSEDES, f"new holder: {_short(old_gone)} -> {_short(new_gone)}", contradiction=True)
        if not (change and single_slot and subj_missing <= names and len(shared) >= 2):
            return Relation(DISTINCT, lambda: f"different subject: {_short(subj_missing)}")
    if not shared:
        return Relation(DISTINCT, "nothing in common")
    overlap = len(shared) / max(1, min(len(po.content), len(pn.content)))
    # 2. a stated change about the same subject
    if change and overlap >= 0.4:
        # the words as written, not their stems ("(states a change (main -> github, pag))" read badly)
        gone_w = {removed[x].text for x in r_spec}
        came_w = {added[x].text for x in (a_spec or set(added))}
        what = f"{_short(gone_w)} -> {_short(came_w)}" if r_spec and a_spec else _short(came_w) or _said(new, fresh)
        return Relation(SUPERSEDES, lambda: f"states a change ({what})", contradiction=bool(r_spec and a_spec))
    # 3. several specific slots changed at once: another thing, not another value
    if r_spec and a_spec and (len(r_spec) >= 2 and len(a_spec) >= 2 or (r_gen and a_gen)):
        return Relation(DISTINCT, lambda: f"differs in {_short(r_spec)} vs {_short(a_spec)}")
    # 3. a value of one kind swapped for one of another kind (a frequency for a weekday): other slots
    if r_spec and a_spec and not change:
        kinds_r = {_value_class(removed[x]) for x in r_spec}
        kinds_a = {_value_class(added[x]) for x in a_spec}
        if None not in kinds_r and None not in kinds_a and not (kinds_r & kinds_a):
            return Relation(DISTINCT, lambda: f"another slot: {_short(r_spec)} vs {_short(a_spec)}")
    # 3. one value replaced by another; when both texts deny it ("does not support IE11" / "... Safari 13")
    # both can be true
    if r_spec and a_spec and po.negated and pn.negated and not _polarity_flip(po, pn):
        return Relation(DISTINCT, lambda: f"both say not, of {_short(r_spec)} and {_short(a_spec)}")
    if r_spec and a_spec:
        return Relation(SUPERSEDES, lambda: f"new value: {_short(r_spec)} -> {_short(a_spec)}", contradiction=True)
    flip = _polarity_flip(po, pn)
    negated_extra = added if pn.negated and not po.negated else removed
    if flip and overlap >= 0.6 and _small(removed, added) and not (
            flip == "one says not" and any(t.specific for t in negated_extra.values())):
        return Relation(SUPERSEDES, lambda: f"negates it ({flip})", contradiction=True)
    # 4. novelty
    if not removed:
        if not added:
            return Relation(SAME, lambda: f"says the same ({similarity:.2f})")
        return Relation(REFINES, lambda: f"adds {_short(set(a.text for a in added.values()))}")
    if r_spec and not added:
        return Relation(SAME if similarity >= threshold else DISTINCT,
                        (lambda: f"says less ({similarity:.2f})") if similarity >= threshold else "says something else")
    if similarity >= threshold and not r_spec and not (len(removed) >= 3 and len(added) >= 3):
        # (three words or more swapped for three others is another case of the thing, not a rewording:
        # "... with one-liner functions" / "... in deeply nested expressions")
        if a_spec or len(added) > len(removed):
            return Relation(REFINES, lambda: f"rewording that adds {_short(set(a.text for a in added.values()))}")
        return Relation(SAME, lambda: f"rewording ({similarity:.2f})")
    if not r_spec and not a_spec and similarity >= threshold - 0.05 and len(added) <= 2 and len(removed) <= 2:
        return Relation(SAME, lambda: f"rewording ({similarity:.2f})")
    return Relation(DISTINCT, lambda: f"says something else ({_short(set(removed))} vs {_short(set(added))})")


_SWITCH_RE = lazy_compile(
    r"\b(?:switch(?:ed|es|ing)?|mov(?:e|ed|es|ing)|migrat(?:e|ed|es|ing)|chang(?:e|ed|es|ing)|went"
    r"|replac(?:e|ed|es|ing)|convert(?:ed|s|ing)?|upgrad(?:e|ed|es|ing)|downgrad(?:e|ed|es|ing))\b(?!:)"
    r"[^.;\n]{0,60}?\bfrom\s+(?:the\s+|a\s+|an\s+|our\s+)?"
    r"(.{2,40}?)\s+(?:to|with|for)\s+(?:the\s+|a\s+|an\s+|our\s+)?([^\s,.;]+(?:\s+[^\s,.;]+){0,2})"
    r"|\binstead\s+of\s+(?:the\s+|a\s+|an\s+|our\s+)?((?:`[^`\n]{1,60}`|[^.;\n`]){2,60}?)(?=[.;\n(]|$)"
    r"|\breplac(?:e|ed|es|ing)\s+(?:the\s+|a\s+|an\s+|our\s+)?([^,.;\n]{2,40}?)"
    r"\s+(?:with|by)\s+(?:the\s+|a\s+|an\s+|our\s+)?([^\s,.;]+(?:\s+[^\s,.;(]+){0,1})",
    re.I,
)


#: "to <verb>" after "from X" says why, not what came instead (pallets/flask 0.10)
_PURPOSE_RE = lazy_compile(r"(?:(?:better|properly|correctly)\s+)?(?:work|make|render|display|allow|avoid|ensure"
                           r"|support|fix|prevent|improve|match|reduce|keep|be|get|help|handle|account|reflect"
                           r"|comply)\b", re.I)


def switched_from(old: str, new: str, *, strict: bool = False) -> str | None:
    """`new` says a value was replaced ("switched the release workflow from trusted publishing to a
    PYPI_TOKEN secret", "now X instead of Y", "replaced Y with X") and `old` states that replaced value
    (every word of it) without the new one: the old statement is history. The reason names both."""
    low_old = " ".join(re.findall(r"[\w.+#/-]+", old.lower()))
    said_before = [[w for w in re.findall(r"[\w.+#/-]+", (m.group(1) or m.group(3) or m.group(4)).lower())
                    if w not in STOPWORDS] for m in _SWITCH_RE.finditer(old)]
    keys_old = {k.lower() for k in subject_keys(old)}
    packages = package_keys(old)

    def in_old(w: str) -> bool:  # named in the old text, or the old text pins a plugin of it (flake8-bugbear)
        return bool(re.search(rf"(?<![\w.-]){re.escape(w)}(?![\w-])", low_old)) or \
            any(k.startswith(f"{w}-") for k in packages)

    for m in _SWITCH_RE.finditer(new):
        came = m.group(2) or m.group(5) or ""
        # "instead of flake8, autoflake and isort": each listed value was replaced
        for gone in re.split(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", m.group(1) or m.group(3) or m.group(4)):
            found = _switched_value(gone, came, old, said_before, keys_old, packages, in_old, strict)
            if found:
                return found
    return None


def _switched_value(gone: str, came: str, old: str, said_before: list[list[str]], keys_old: set[str],
                    packages: frozenset[str], in_old: Callable[[str], bool], strict: bool) -> str | None:
    """One replaced value of `switched_from`: the reason when `old` states it, else None."""
    words = [w for w in re.findall(r"[\w.+#/-]+", gone.lower()) if w not in STOPWORDS]
    if not words or words in said_before:
        return None  # nothing named, or the old text states that same switch: a restatement
    if strict and all(re.search(r"(?:ing|ed)$", w) for w in words):
        return None  # "rolls back instead of committing": an action, not a value that was replaced
    if strict and not (set(words) & keys_old or any(k.startswith(f"{w}-") for w in words for k in packages)
                       or set(words) & set(re.findall(r"[\w.+#/-]+", old.lower())[:3])):
        # in one-shape texts (commit subjects, changelog items) the replaced value must be what the
        # old text is about ("Use flake8 for linting"), not a word on the way ("... instead of `help`")
        return None
    if not all(in_old(w) for w in words):
        return None
    if _PURPOSE_RE.match(came):
        return None  # "from sessions to work better with Google Chrome": a purpose, not a new value
    new_words = [w for w in re.findall(r"[\w.+#/-]+", came.lower()) if w not in STOPWORDS]
    if new_words and all(in_old(w) for w in new_words):
        return None  # the old text names the new value too: it may say the same change
    return f"{' '.join(words)} -> {' '.join(new_words) or 'something else'}"


def texts_mergeable(a: str, b: str) -> bool:
    """Are two texts one fact, each a rewording or a refinement of the other, about the same
    subject (never a change of value, a negation or another subject)? What `curate.mergeable`
    asks of two memories' texts."""
    return relate(a, b, 0.9, threshold=0.0).kind in (SAME, REFINES) and \
        relate(b, a, 0.9, threshold=0.0).kind in (SAME, REFINES)


@functools.lru_cache(maxsize=65536)
def _word_parts(low: str) -> frozenset[str]:
    """The stemmed parts of one identifier, path or URL (nothing for another word), once per word."""
    if not (_identifying_word(low) or low.startswith(("/", "~", "http"))):
        return frozenset()
    return frozenset(_stem(w) for w in _NON_WORD_RE.split(low) if w and w != low)


_ROLE_RE = lazy_compile(r"^(.+?)\s+(?:is|was|will be)\s+(?:the|our)\s+(.+)$", re.I | re.S)
_HOLDER_RE = lazy_compile(r"^\s*\S+\s+(?:owns|leads|runs|manages)\s+the\s", re.I)


def _holder_swapped(po: Parsed, pn: Parsed, old_gone: set[str], new_gone: set[str], removed: dict[str, _Tok],
                    added: dict[str, _Tok]) -> bool:
    """One subject word replaced by another before the same "is the <role>" ("Keiko is the release
    manager for Q3", "Python 3.10 is the minimum supported version"), or one name before the same
    "owns/leads the <thing>": a role has one holder at a time. "Marta prefers X" -> "Jun prefers X" is
    not this (two people can both prefer something), nor "Anna is a reviewer" (a role many hold)."""
    if len(old_gone) != 1 or len(new_gone) != 1 or set(removed) != old_gone or set(added) != new_gone:
        return False
    ro, rn = _ROLE_RE.match(po.text.strip()), _ROLE_RE.match(pn.text.strip())
    if ro and rn and _norm_rest(ro.group(2)) == _norm_rest(rn.group(2)):
        return True
    (o,), (n,) = old_gone, new_gone
    if not (po.content[o].cap and pn.content[n].cap and po.content[o].text.isalpha() and pn.content[n].text.isalpha()):
        return False
    return bool(_HOLDER_RE.match(po.text) and _HOLDER_RE.match(pn.text))


def _norm_rest(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def check_llm(event: str, old: str, new: str, similarity: float) -> str | None:
    """Why an LLM decision must not stand: an UPDATE, NONE or DELETE of a memory about another
    subject ("the staging X" for "the production X") is downgraded to ADD. None when it may stand."""
    if event not in ("UPDATE", "NONE", "DELETE"):
        return None
    rel = relate(old, new, similarity, threshold=0.0)
    if rel.kind == DISTINCT and rel.reason.startswith("different subject"):
        return rel.reason
    return None


def llm_supersedes(event: str, old: str, new: str, similarity: float) -> str | None:
    """Why an LLM UPDATE (or NONE) of a memory must end as a supersede instead: the new fact gives
    the same subject a new value or states a change (PG 15 -> 16), so the old memory is kept,
    marked `superseded_by`, and the fact becomes the current memory. None when it may stand.
    An UPDATE rewriting the memory in place would leave the replaced value only in `history`, and
    merged texts such as "PostgreSQL 16 (upgraded from 15)" hold both values as if both held."""
    if event not in ("UPDATE", "NONE"):
        return None
    rel = relate(old, new, similarity, threshold=0.0)
    return rel.reason if rel.kind == SUPERSEDES else None


def supersedes(old: str, new: str, similarity: float) -> bool:
    """Is `new` a new value (or a stated change) for the subject of `old`?"""
    return relate(old, new, similarity, threshold=0.0).kind == SUPERSEDES


# ------------------------------------------------------------ what SAME needs, for a cheap no
class Said:
    """What `relate` can answer SAME from, of one text, worked out when first asked: its
    normalised text, and the words of the text as written and without its references and call
    parentheses (relate reads the latter when both texts keep two words or more without them)."""

    __slots__ = ("text", "normal", "_plain", "_bare", "_bare_words", "_counted")

    def __init__(self, text: str) -> None:
        self.text = text
        self.normal = _normal(text)
        self._plain: _Words | None = None
        bare = _CALLED_RE.sub(r"\1", strip_refs(text))
        self._bare = None if bare == text else bare  # None: the text has nothing to drop
        self._bare_words: _Words | None = None
        self._counted: bool | None = None

    @property
    def stripped(self) -> bool:
        """Whether dropping the references and call parentheses changes the text."""
        return self._bare is not None

    @property
    def counted(self) -> bool:
        """At least two words without the references (relate's `_content_count(...) >= 2`)."""
        if self._counted is None:
            self._counted = _content_count(self._bare if self._bare is not None else self.text) >= 2
        return self._counted

    @property
    def bare_normal(self) -> str:
        return self.normal if self._bare is None else _normal(self._bare)

    def words(self, bare: bool) -> _Words:
        """(content stems, content stems and identifier parts, specific stems) of the text, or
        of the text without its references."""
        if bare and self._bare is not None:
            if self._bare_words is None:
                self._bare_words = _words(self._bare)
            return self._bare_words
        if self._plain is None:
            self._plain = _words(self.text)
        return self._plain


_Words = tuple[frozenset[str], frozenset[str], frozenset[str]]


def _words(text: str) -> _Words:
    """`Said.words` of one text. Parsed past relate's cache (`__wrapped__`): an input of 1,800
    facts would leave 1,800 parses in it (~12 objects each) that nothing reads again but the few
    `relate` is called on; every full pass of the garbage collector walks them (one pass mid-add
    cost ~0.1-0.3 s CPU at 100 KB), and each add's leftovers make the next pass come sooner."""
    p = parse.__wrapped__(text)
    return p.keys, p.keys | p.parts, p.specific_keys


def may_be_same(old: Said, new: Said, similarity: float, threshold: float) -> bool:
    """False when `relate(old, new, similarity, threshold=threshold)` cannot be SAME, read from
    what relate's SAME answers need: the same normalised text, with or
    without references; else `_by_words`'s novelty step, which is reached only when the texts do
    not both change a specific word (a new value), and which says SAME only when the new text
    adds no word (every stem of it a stem or an identifier part of the old one), or when it drops
    no specific one at `threshold - 0.05` or closer. True is no verdict: `relate` decides.
    tests/test_add_linear.py checks this against `relate` itself."""
    if old.normal == new.normal:
        return True
    # relate reads both texts without their references when both keep two words without them
    both = (old.stripped or new.stripped) and old.counted and new.counted
    if both and old.bare_normal == new.bare_normal:
        return True
    _, old_known, old_specific = old.words(both)
    new_keys, new_known, _ = new.words(both)
    if new_keys <= old_known:  # nothing added
        return True
    return similarity >= threshold - 0.05 and old_specific <= new_known  # ... or no specific word removed
