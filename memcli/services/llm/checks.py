"""What memcli does around a model's reply, so that small local models give good memories: what
is sent (:func:`prepare_input`), which fact texts may be stored (:func:`fact_problem`, each verdict a
rule name), and the code, taken from the input, never from the model (:func:`attach_code`). Why:
docs/decision-rules.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

from memcli.core.facts import Fact
from memcli.core.lazy_re import lazy_compile
from memcli.services.extract import (
    _FENCED_RE,
    _fenced_blocks,
    _strip_fences,
    fact_from_text,
    heuristic_extract,
    junk_reason,
    normalise,
)

# ---------------------------------------------------------------- Input preparation
# A JSON object carrying memcli's reply keys: {"facts": ...}, {"decisions": ...}, or an event.
_REPLY_KEY = lazy_compile(
    r"""["'](?:facts|decisions)["']\s*:|["']event["']\s*:\s*["'](?:ADD|UPDATE|DELETE|NONE)["']""", re.I
)
REMOVED_REPLY = "[memcli-shaped JSON removed]"


def _object_end(text: str, start: int) -> int:
    """Index after the bracket closing the one at ``text[start]``, honouring strings (the end of
    the text when it is not closed)."""
    depth, quote, escape = 0, "", False
    for i in range(start, min(len(text), start + 20000)):
        ch = text[i]
        if quote:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def carries_reply(text: str) -> bool:
    """Whether ``text`` holds JSON shaped like memcli's own replies (an answer planted in the input)."""
    return bool(_REPLY_KEY.search(text))


def prepare_input(text: str) -> str:
    """The input as sent to the model, without memcli-shaped JSON replies (a small model copies a
    planted ``{"facts": [...]}``) and HTML comments. The stored text keeps them."""
    for _ in range(50):  # bounded: each pass removes one object
        m = _REPLY_KEY.search(text)
        if m is None:
            break
        start = text.rfind("{", max(0, m.start() - 400), m.start() + 1)
        if start < 0:  # no object around the key: the key goes
            text = text[: m.start()] + REMOVED_REPLY + text[m.end():]
        else:
            text = text[:start] + REMOVED_REPLY + text[_object_end(text, start):]
    return _HTML_COMMENT.sub("", text)


# Lines that instruct a model or a memory tool rather than state something: "store: ...",
# "ignore previous instructions and ...", "you are now ...", "new instructions: ...".
_INSTRUCTION_RE = lazy_compile(
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+|my\s+)?"
    r"(?:previous|prior|above|earlier|preceding|system|original|former|other)\b"
    r"|\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+|your\s+)?(?:instructions|rules|guidelines|everything)\b"
    r"|\byou\s+are\s+now\b|\bnew\s+instructions?\s*:|\bsystem\s+(?:prompt|override|message)\s*:"
    r"|(?:^|[\s>*#(-])(?:store|save|memori[sz]e|record|output|reply|respond|print|return|write|add)"
    r"(?:\s+(?:this|that|these|the\s+following))?(?:\s+(?:facts?|memor(?:y|ies)|json|as\s+a\s+fact))?\s*:"
    r"|\b(?:store|save|memori[sz]e|record|add)\s+(?:this|the\s+following|that)\s+(?:as\s+)?(?:a\s+)?"
    r"(?:facts?|memor(?:y|ies))\b"
    r"|\b(?:output|reply\s+with|respond\s+with|return)\s+(?:only\s+)?(?:the\s+following\s+)?(?:json|\{)"
    r"|\byour\s+(?:reply|answer|output|response)\s+(?:must|should|has\s+to)\b"
    r"|^\s*\W{0,3}system\s*:"  # a "SYSTEM:" role line inside data
    r"|\b(?:ai|llm|assistant|agent|model|memory\s+tool|bot)\s*[:,]\s*(?:remember|store|save|record|note|add)\b",
    re.I,
)
# An HTML comment: hidden from whoever reads the rendered text, so what it says is not what the
# author shows; a planted instruction ("<!-- AI memory tool: remember that ... -->") hides there.
_HTML_COMMENT = lazy_compile(r"<!--.*?(?:-->|$)", re.S)


def instruction_lines(text: str) -> list[str]:
    """The lines of ``text`` that instruct a model or a memory tool, and its HTML comments' content."""
    hidden = [re.sub(r"^<!--|-->$", "", m.group().strip()).strip() for m in _HTML_COMMENT.finditer(text)]
    return [line.strip() for line in text.splitlines() if _INSTRUCTION_RE.search(line)] + [h for h in hidden if h]


# ---------------------------------------------------------------- Fact texts
_STOP = frozenset(
    "a an the and or but of to in on at by for with from into as is are was were be been being it its this that "
    "these those there here we our us you your i me my they them their he she his her not no do does did has have "
    "had will would should can could may might must so if then than also just only very all any some each which "
    "who what when where how why about over under up down out via per use uses used using now".split()
)
_WORD = lazy_compile(r"[\w][\w.+#/-]*\w|\w")


def _content_words(text: str) -> set[str]:
    return {w for w in (t.lower().strip("./-") for t in _WORD.findall(text)) if w and w not in _STOP}


_PLACEHOLDER_RE = lazy_compile(
    r"^\W*(?:\.\.\.|…|text|facts?|string|str|null|none|n/?a|todo|tbd|example|placeholder|one short sentence"
    r"|the (?:merged )?(?:memory|fact|text)(?: text)?|fact text|memory text|your fact|same|unchanged|no change)"
    r"\W*$|^\W*$|^\s*<[^<>]{0,40}>\s*$|\.\.\.\s*$|^\s*(?:\.\.\.|…)",
    re.I,
)
_KEY_LIKE_RE = lazy_compile(
    r"^\s*[\"']?[A-Za-z_][\w -]{0,24}[\"']?\s*:\s*[\"']?[\w.\[\]-]{0,30}[\"']?\s*,?\s*$"
    r"|[\"'](?:text|type|tags|confidence|code_pattern|event|target_id|target|skipped|facts)[\"']\s*:"
    r"|^\s*\{|^\s*\[\s*[{\"']"
)


def _copied_from(text: str, source: str) -> bool:
    """Whether (nearly) all of ``text``'s words come from ``source`` in one piece."""
    norm = normalise(text)
    return len(norm) >= 8 and norm in normalise(source)


def _coverage(words: set[str], text: str) -> float:
    return len(words & _content_words(text)) / len(words) if words else 0.0


_SPEAKER_PREFIX = lazy_compile(r"^\s*(?:\*\*|__)?[A-Za-z][\w -]{0,20}(?:\*\*|__)?\s*:\s+")
_SENTENCE_SPLIT = lazy_compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])")


_CODE_CHARS = lazy_compile(r"[=(){}\[\];]|^\s*(?:return|raise|import|from|def|class|await|yield)\b")


@functools.lru_cache(maxsize=4)
def _machine_lines(source: str) -> Mapping[str, str]:
    """Input lines that are not prose, by normalised text: a command's output (after a ``$`` line,
    up to a blank line) and indented code. Cached: every fact of a reply is checked against one input."""
    out: dict[str, str] = {}
    after_command = False
    for raw in source.splitlines():
        line = raw.strip()
        if not line:
            after_command = False
            continue
        if line.startswith("$ "):
            after_command = True
            continue
        if after_command:
            out[normalise(line)] = "tool_output"
        elif raw[:2] in ("  ", "\t") and _CODE_CHARS.search(line):
            out[normalise(line)] = "bare_code"
    return out


@functools.lru_cache(maxsize=4)
def _source_pieces(source: str) -> list[tuple[str, str | None]]:
    """Each sentence of the input with the junk rule it trips (None for a statement); cached likewise."""
    pieces: list[tuple[str, str | None]] = []
    machine = _machine_lines(source)
    for line in source.splitlines():
        if normalise(line.strip()) in machine:
            pieces.append((line.strip(), machine[normalise(line.strip())]))
            continue
        line = _SPEAKER_PREFIX.sub("", line.strip(), count=1)
        if not line:
            continue
        for sentence in _SENTENCE_SPLIT.split(line):
            if sentence.strip():
                pieces.append((sentence, junk_reason(sentence)))
    return pieces


def fact_problem(
    text: str,
    *,
    source: str,
    prompt: str = "",
    instructions: Iterable[str] = (),
) -> str | None:
    """Why a model's fact text must not be stored (a rule name), or None. ``source`` is the input as
    sent, ``prompt`` the model's instructions and example, ``instructions`` the input's instruction lines."""
    if _PLACEHOLDER_RE.search(text):
        return "placeholder"
    if _KEY_LIKE_RE.search(text):
        return "key_like"
    reason = junk_reason(text)
    if reason and reason != "dangling":  # an intro to code is judged once the input's code is attached
        return reason
    extra = _chat_rule(text)
    if extra:
        return extra
    bare = re.sub(r"^\$\s*", "", text.strip().strip("`"))
    if _BARE_COMMAND.match(bare) and not _PROSE_SENTENCE.search(bare):
        return "bare_code"  # a command alone is no statement: the input's code goes to the fact it belongs to
    if translated(text, source):
        return "translated"
    if prompt and _copied_from(text, prompt) and not _copied_from(text, source):
        return "copied_prompt"
    words = _content_words(text)
    if prompt and words and _coverage(words, prompt) >= 0.85 and _coverage(words, source) < 0.5:
        return "copied_prompt"
    for line in instructions:
        if _copied_from(text, line) or (words and _coverage(words, line) >= 0.6):
            return "injected"
    if novel_specifics(text, source):
        return "invented"
    machine = _machine_lines(source).get(normalise(text.strip().rstrip(".")))
    if machine:
        return machine  # "Error response from daemon: ...", "payload = json.loads(msg.body)"
    if words and len(words) >= 2:
        # the fact's only source is a sentence the gates reject (a question restated): its verdict
        pieces = _source_pieces(source)
        best_good, best_junk, junk_rule = 0.0, 0.0, None
        for sentence, rule in pieces:
            cov = _coverage(words, sentence)
            if rule is None:
                best_good = max(best_good, cov)
            elif cov > best_junk and rule not in ("too_short", "dangling"):
                best_junk, junk_rule = cov, rule
        if junk_rule and best_junk >= 0.6 and best_good < 0.34:
            return junk_rule
        # its specific values (8000, redis:7.2) occur only in rejected sentences: it restates them
        specifics = _specifics(text)
        if specifics:
            homes = [rule for sentence, rule in pieces if specifics & _specifics(sentence)]
            junk_homes = [r for r in homes if r not in (None, "too_short", "dangling")]
            if junk_homes and len(junk_homes) == len(homes):
                return junk_homes[0]
    return None


# The rules a model's fact and the heuristic fallback share (one table: the gates cannot drift
# apart). An agent's tool call restated ("Bash(pytest -q) passed with 12 tests"):
_TOOL_CALL_RE = lazy_compile(r"\b(?:Bash|Read|Update|Edit|MultiEdit|Write|Grep|Glob|LS|WebFetch|WebSearch|Task"
                             r"|TodoWrite|NotebookEdit)\([^)\n]*\)")
# "Reviewers: @maria @tom", "Co-authored-by: Dana <dana@x>", "Fixes #412": metadata, not a statement
_METADATA_RE = lazy_compile(
    r"^\s*(?:[\w -]{1,30}:\s*(?:[@#][\w./-]+[\s,]*(?:and\s+)?)+$"
    r"|(?:co-authored-by|signed-off-by|reviewed-by|acked-by|reported-by|cc)\s*:"
    r"|(?:fixes|closes|resolves|refs?)\s+#\d+\W*$)",
    re.I,
)
# A conversational act reported as a fact: "Tom asked if anyone wanted lunch", "Maria thanked Priya"
_REPORTED_CHATTER_RE = lazy_compile(
    r"^\s*(?:[Tt]he\s+)?[\w'-]+(?:\s+[A-Z][\w'-]+)?\s+(?:"
    r"ask(?:ed|s)\s+(?:if|whether|about|why|how|what|when|where|who|anyone|someone|everyone)"
    r"|wondered|wants\s+to\s+know|wanted\s+to\s+know|thanked|said\s+(?:thanks|hi|hello|goodbye)|greeted"
    r"|(?:is|was)\s+(?:still\s+)?blocked|will\s+look\s+into|(?:is|was)\s+looking\s+into|offered\s+to"
    r"|(?:completed|finished|started)\s+\w+ing|confirmed\s+(?:that\s+)?(?:it|the\s+change)\s+(?:is|was)\s+done)\b",
)
# ... and chat the other gates let through: thanks ("🙏 thanks priya"), an agent's next step ("I'll
# look at the test first."), a speaker's status ("still blocked on ..."), a traceback frame.
_CHAT_RULES = (
    (_TOOL_CALL_RE, "tool_output"),
    (_METADATA_RE, "metadata"),
    (_REPORTED_CHATTER_RE, "reported_chatter"),
    (lazy_compile(r"^\W*(?:thanks|thank\s+you|thx|ty|cheers)\b(?:\W+\w+){0,6}\W*$", re.I), "pleasantry"),
    (lazy_compile(r"^\W*(?:i'll|i\s+will|let\s+me|i'm\s+going\s+to|i\s+am\s+going\s+to)\s+(?:first\s+)?"
                  r"(?:look|check|read|start|investigate|take\s+a\s+look|try|see|examine|inspect|dig)\b", re.I),
     "status"),
    (lazy_compile(r"^\W*(?:still\s+)?blocked\s+on\b|^\W*will\s+look\s+into\b", re.I), "reported_chatter"),
    (lazy_compile(r"^\s*(?:File\s+[\"'][^\"']+[\"'],\s+line\s+\d+|Traceback\s+\(most\s+recent\s+call\s+last\))"),
     "traceback"),
)


def _chat_rule(text: str) -> str | None:
    """The shared chat rule ``text`` trips, whichever extractor produced it."""
    return next((rule for pattern, rule in _CHAT_RULES if pattern.search(text)), None)


_EN_FUNCTION = frozenset(
    "the a an and or of to in on at is are was were be been will would should must not no for with from this that "
    "these those it its we our you your they their there here by as but if then than every each all any".split()
)
_WORDS_RE = lazy_compile(r"[^\W\d_]{2,}")


def _english_share(text: str) -> float:
    words = [w.lower() for w in _WORDS_RE.findall(text)]
    return sum(w in _EN_FUNCTION for w in words) / len(words) if words else 0.0


def translated(text: str, source: str) -> bool:
    """Whether a fact is the model's English translation of an input in another language (its own
    words are lost): the input has almost no English function words, the fact many, few words shared."""
    prose = _strip_fences(source)
    if len(_WORDS_RE.findall(prose)) < 6 or _english_share(prose) >= 0.06 or _english_share(text) < 0.15:
        return False
    words = _content_words(text)
    return bool(words) and _coverage(words, prose) < 0.5


# A "specific" token: a number, version, path or identifier (a digit, or one of - _ . / : = inside).
# A fact carrying one the input does not have was made up.
_SPECIFIC = lazy_compile(r"(?<![\w-])(?=[\w./:=-]*(?:\d|\w[_./:=]\w))[\w][\w./:=-]*\w|\b\d\b")
_QUOTED = lazy_compile(r"`([^`\n]{3,120})`|(?<!\w)'([^'\n]{3,120})'(?!\w)|\"([^\"\n]{3,120})\"")


def _specifics(text: str) -> set[str]:
    return {t.lower().rstrip(".:") for t in _SPECIFIC.findall(text)} - {""}


def novel_specifics(text: str, source: str, *, small_numbers: bool = False) -> list[str]:
    """Specific tokens of ``text`` absent from ``source``; one- and two-digit numbers only with
    ``small_numbers`` (a model writes "2" for "two"; in a decision "16" against "15" is the point)."""
    low = source.lower()
    compact = re.sub(r"\s+", "", low)
    out = []
    for m in _QUOTED.finditer(text):
        span = next(g for g in m.groups() if g is not None).lower()
        if span not in low and re.sub(r"\s+", "", span) not in compact:
            out.append(span)
    for tok in _SPECIFIC.findall(text):
        t = tok.lower().rstrip(".:")
        if t and t not in low and t not in compact and (small_numbers or not re.fullmatch(r"\d{1,2}", t)):
            out.append(tok)
    return out


_NAME = lazy_compile(r"(?<=[\w,;:)] )[A-Z][\w.+#-]*[\w+#]|(?<=[\w,;:)] )[A-Z]")


def _has_token(token: str, text: str) -> bool:
    """Whether ``token`` occurs in ``text`` as a whole token (not inside a longer word or dotted name)."""
    return re.search(rf"(?<![\w.]){re.escape(token)}(?![\w])", text) is not None


def news(fact: str, memory: str) -> list[str]:
    """What ``fact`` says that ``memory`` does not (specific tokens, capitalised names): a decision
    that would lose them (NONE, DELETE, an UPDATE text without them) is overruled."""
    low = memory.lower()
    found = [t for t in novel_specifics(fact, memory, small_numbers=True) if not _has_token(t.lower(), low)]
    for m in _NAME.finditer(fact):
        word = m.group().lower()
        if word not in low and word not in (n.lower() for n in found):
            found.append(m.group())
    return found


def _stems(text: str) -> set[str]:
    return {w.rstrip("s") if len(w) > 3 else w for w in _content_words(text)}


# Words that frame a statement rather than add to it ("Reminder: port 8443 is ...", "FYI, ...").
_DISCOURSE = frozenset("reminder remind note fyi btw remember again heads ps nb quick also still just".split())


def says_nothing_new(fact: str, memory: str) -> bool:
    """Whether (nearly) every content word of ``fact`` is in ``memory`` (a paraphrase); framing words
    ("Reminder:", "FYI") do not count."""
    words = _stems(fact) - _DISCOURSE
    return bool(words) and len(words & _stems(memory)) / len(words) >= 0.75


_SENTENCE_JUNK = ("question", "pleasantry", "request", "filler", "status")


def trim_junk_sentences(text: str) -> tuple[str, str | None]:
    """``text`` without the sentences the gates reject ("How do I run the tests? Run make test." ->
    "Run make test.") and the first one's rule; ("", rule) when every sentence is junk."""
    parts = [p for p in re.split(r"(?<=[.!?])\s+", text.strip()) if p.strip()]
    if len(parts) < 2:
        return text, None
    rules = [junk_reason(p) for p in parts]
    kept = [p for p, r in zip(parts, rules) if r not in _SENTENCE_JUNK]
    first = next((r for r in rules if r in _SENTENCE_JUNK), None)
    if not kept:  # all junk: the whole text's own verdict when it has one ("Done. I changed ... for you")
        first = junk_reason(text) or first
    return " ".join(kept), first


_CHANGE_RE = lazy_compile(
    r"\b(?:no longer|not anymore|any ?more|now|instead|switched|switching|moved|moving|migrated|migrating"
    r"|replaced|replacing|upgraded|downgraded|changed|renamed|deprecated|dropped|stopped|retired|removed"
    r"|from now on|going forward|actually|correction|rather than|superseded?s?)\b",
    re.I,
)


def states_change(text: str) -> bool:
    """Whether a fact says that something changed ("no longer", "now", "instead", "moved to")."""
    return bool(_CHANGE_RE.search(text))


# -------------------------------- Code: taken from the input, attached to the fact it belongs to
_FENCE_LINE = lazy_compile(r"^\s*(`{3,}|~{3,})")
_BARE_COMMAND = lazy_compile(
    r"^\s*(?:sudo\s+)?(?:git|npm|npx|pnpm|yarn|pip3?|uv|poetry|python3?|pytest|make|docker(?:-compose)?|kubectl"
    r"|helm|memcli|curl|cargo|go|terraform|aws|gcloud|gh|ruff|psql|mysql|redis-cli|alembic|vault|ansible"
    r"|systemctl|ssh|scp|rsync|export|brew|apt(?:-get)?|openssl|createdb|dropdb|pg_dump|pg_restore|tar|chmod"
    r"|ln|mkdir|cp|mv|rm|sed|jq)\s+\S[^\n]*$"
)
_REFERS_TO_CODE = lazy_compile(
    r"\b(?:following|below|these|those|this|the)\s+(?:commands?|steps?|snippet|config(?:uration)?|block|code"
    r"|settings|lines?)\b|\bas follows\b|:\s*$",
    re.I,
)
_PROSE_SENTENCE = lazy_compile(r"[a-z]{3,}\s+[a-z]{3,}\s+[a-z]{3,}.*[.!?]$")


def _mark_command_lines(source: str) -> str:
    """Bare command lines outside fences become ``$`` lines, so the heuristic attaches them too."""
    out: list[str] = []
    fence: str | None = None
    for line in source.splitlines():
        m = _FENCE_LINE.match(line)
        if m:
            fence = None if fence and m.group(1).startswith(fence) else (fence or m.group(1))
            out.append(line)
            continue
        if fence is None and _BARE_COMMAND.match(line) and not _PROSE_SENTENCE.search(line.strip()):
            out.append(f"$ {line.strip()}")
        else:
            out.append(line)
    return "\n".join(out)


def _identifier_parts(text: str) -> set[str]:
    """Content words with identifiers split ("PRICING_TIMEOUT_S" -> pricing, timeout), so code and
    prose about it can be matched."""
    return {p for w in _content_words(text) for p in re.split(r"[_./:=-]+", w) if len(p) >= 3 and p not in _STOP}


def _code_part(fact: Fact) -> tuple[str, str]:
    """(prose, rendered code) of a heuristic fact that carries code."""
    code = fact.code_pattern or ""
    text = fact.text
    cut = text.find("\n")
    if "```" in text or (cut >= 0 and code and code.splitlines()[0] in text[cut:]):
        return text[:cut].strip() if cut >= 0 else text, text[cut + 1:] if cut >= 0 else ""
    return text, ""  # inline `command` in the sentence itself


def _with_code(text: str, code: str, rendered: str) -> str:
    """``text`` carrying ``code`` verbatim (its own partial copy of a block replaced)."""
    if code in text:
        return text
    if "```" in text:  # the model copied (part of) the block: the input's copy wins
        text = text[: text.index("```")].rstrip()
    if rendered:
        return f"{text.rstrip()}\n{rendered}"
    return f"{text.rstrip().rstrip('.:')}: `{code}`"


def _says_something(prose: str, code: str) -> bool:
    """Whether a heuristic code carrier's prose is a statement, not just its command again."""
    return len(_content_words(prose) - _content_words(code)) >= 2


def orphan_blocks(texts: list[str], source: str, carried: str) -> list[tuple[int, str, str]]:
    """(index of its text, code, rendered block) for each fenced block of ``source`` that no sentence
    introduces (not in ``carried``; a block after "## Diff") and that a text names two identifier
    parts of ("PRICING_TIMEOUT_S" and "the pricing timeout")."""
    out = []
    for lang, code in _fenced_blocks(source):
        if not code.strip() or code in carried:
            continue
        parts = _identifier_parts(code)
        scores = [len(parts & _identifier_parts(t)) for t in texts]
        if scores and max(scores) >= 2:
            out.append((scores.index(max(scores)), code, f"```{lang}\n{code}\n```"))
    return out


def with_orphan_blocks(facts: list[Fact], source: str) -> list[Fact]:
    """Heuristic ``facts`` with the input's unintroduced blocks attached (see :func:`orphan_blocks`)."""
    carried = "\n".join(f.code_pattern or "" for f in facts) + "\n" + "\n".join(f.text for f in facts)
    for i, code, rendered in orphan_blocks([f.text for f in facts], source, carried):
        f = facts[i]
        f.text = f"{f.text.rstrip()}\n{rendered}"
        f.code_pattern = f"{f.code_pattern}\n{code}" if f.code_pattern else code
    return facts


def attach_code(texts: list[str], source: str) -> list[Fact]:
    """Facts for the model's ``texts`` with the input's code attached, plus the heuristic facts whose
    code no text claimed. The heuristic extractor knows which sentence introduces which block: its
    code carriers go to the model's text sharing most words ("the following commands" needs fewer)."""
    carriers = [f for f in heuristic_extract(_mark_command_lines(source)).facts if f.code_pattern]
    machine = _machine_lines(source)
    code_of: dict[int, list[tuple[str, str]]] = {}
    extra: list[Fact] = []
    for i, code, rendered in orphan_blocks(texts, source, "\n".join(f.code_pattern or "" for f in carriers)):
        code_of.setdefault(i, []).append((code, rendered))
    for carrier in carriers:
        code = carrier.code_pattern or ""
        prose, rendered = _code_part(carrier)
        pwords = _content_words(prose) | _content_words(code)
        best, best_score = None, 0.0
        for i, text in enumerate(texts):
            if code in text:
                best, best_score = i, 2.0
                break
            shared = pwords & _content_words(text)
            score = len(shared) / max(1, len(_content_words(prose)))
            if _REFERS_TO_CODE.search(text):
                score += 0.25
            if len(shared) >= 2 and score > best_score:
                best, best_score = i, score
        if best is not None and best_score >= 0.4:
            code_of.setdefault(best, []).append((code, rendered))
        elif _says_something(prose, code) and normalise(prose.strip().rstrip(".")) not in machine:
            extra.append(carrier)
        # else: a command line no sentence introduces (shell history) is no statement alone
    facts: list[Fact] = []
    for i, text in enumerate(texts):
        codes = code_of.get(i, [])
        for code, rendered in codes:
            text = _with_code(text, code, rendered)
        pattern = "\n".join(code for code, _ in codes) or None
        facts.append(fact_from_text(text, pattern))
    return facts + extra


def fallback_problem(fact: Fact, source: str = "") -> str | None:
    """Why a heuristic fact standing in for an unusable reply must not be stored, or None: the LLM
    path stores nothing that fails its own gates (a whole chat turn, tool lines, metadata)."""
    prose = fact.text.split("\n```")[0].split("\n$ ")[0].strip()
    if fact.code_pattern and prose.rstrip().endswith(":"):
        return None  # an intro with its code: the code is the fact
    if prose.startswith("$ ") or (fact.code_pattern and not _says_something(prose, fact.code_pattern)):
        return "bare_code"  # a shell-history line alone
    machine = _machine_lines(source).get(normalise(prose.rstrip("."))) if source else None
    if machine:
        return machine
    said = _SPEAKER_PREFIX.sub("", prose, count=1)
    for text in (prose, said):
        if text[:1] in "⏺●⎿" and junk_reason(text):
            return "tool_output"  # a transcript's tool glyph in front of a junk line
        rule = _chat_rule(text)
        if rule:
            return rule
        rule = junk_reason(text)
        if rule and rule not in ("dangling", "too_short") and not (fact.code_pattern and rule == "request"):
            return rule
    return None


# ---------------------------------------------------------------- Merge: what the merged text must keep
_INLINE = lazy_compile(r"(?<!`)`([^`\n]{2,200})`(?!`)")


def _code_spans(text: str) -> list[str]:
    """The code of ``text``: each fenced block's body, and each inline `span` outside them."""
    blocks = [m.group(3).strip("\n") for m in _FENCED_RE.finditer(text)]
    prose = _strip_fences(text)
    return [b for b in blocks if b.strip()] + [m.group(1) for m in _INLINE.finditer(prose)]


def _first_word(code: str) -> str:
    words = code.split()
    return words[0].lstrip("$").lower() if words else ""


def without_superseded_code(texts: list[str]) -> list[str]:
    """``texts`` (oldest first) without each older block a newer one replaces (same first word)."""
    out = []
    for i, text in enumerate(texts):
        newer = {_first_word(c) for n in texts[i + 1:] for c in _code_spans(n)}
        if newer:
            text = _FENCED_RE.sub(lambda m, newer=newer: "" if _first_word(m.group(3)) in newer else m.group(0),
                               text).strip()
        out.append(text)
    return out


def _identifiers(text: str) -> list[str]:
    """Name-like specific tokens (a letter and one of - _ . / inside: db-billing-1, etl/config.py)."""
    return [t.rstrip(".:") for t in _SPECIFIC.findall(text)
            if re.search(r"[A-Za-z]", t) and re.search(r"\w[-_./]\w", t)]


_VERSION_MARK = lazy_compile(r"^\s*---(?:\s*version\s+\d+.*?---)?\s*$", re.M | re.I)


def strip_version_marks(merged: str, texts: list[str]) -> str:
    """The merged text without the prompt's "--- version n of N ---" separators (small models copy
    them), unless a version has such a line itself."""
    if any(_VERSION_MARK.search(t) for t in texts):
        return merged
    return re.sub(r"\n{3,}", "\n\n", _VERSION_MARK.sub("", merged)).strip()


def merge_problem(merged: str, texts: list[str]) -> str | None:
    """Why a model's merge of ``texts`` (oldest first) must not replace them, or None: it must keep
    every code span no newer one replaces, the prose, older names, the newest values, and invent none."""
    if not merged.strip() or _PLACEHOLDER_RE.search(merged.strip()):
        return "placeholder"
    newest, older = texts[-1], texts[:-1]
    code_needed = list(_code_spans(newest))
    for i, t in enumerate(older):
        # an older span is superseded by a newer one of the same command ("make test -j4"); a
        # superseded block must not come back ("line-length = 100" beside "= 110")
        newer_spans = [c for n in texts[i + 1:] for c in _code_spans(n)]
        newer = {_first_word(c) for c in newer_spans}
        for c in _code_spans(t):
            if _first_word(c) not in newer:
                code_needed.append(c)
            elif c not in newer_spans and "\n" in c and c in merged:
                return "stale_code"
    compact = re.sub(r"\s+", "", merged)
    for code in code_needed:
        if code not in merged and re.sub(r"\s+", "", code) not in compact:
            return "code_lost"
    prose_words = set().union(*(_content_words(_strip_fences(t)) for t in texts))
    if prose_words and _coverage(prose_words, _strip_fences(merged)) < 0.5:
        return "prose_lost"  # the code block alone
    for i, t in enumerate(older):
        # an older name, host or path (db-billing-1) no newer version replaces is a unique fact
        newer_parts = set().union(*(_identifier_parts(" ".join(_identifiers(n))) for n in texts[i + 1:]))
        for ident in _identifiers(t):
            if ident.lower() not in merged.lower() and not (_identifier_parts(ident) & newer_parts):
                return "older_fact_lost"
    new_values = novel_specifics(newest, "\n".join(older), small_numbers=True) if older else []
    low = merged.lower()
    for value in new_values:
        if value.lower().rstrip(".:") not in low:
            return "newest_value_lost"
    if novel_specifics(merged, "\n".join(texts), small_numbers=True):
        return "invented"
    return None


# ----------------------------------------------- Ask: which memories an answer that cites none draws on
def supporting(answer: str, memories: list[tuple[str, str]]) -> list[str]:
    """Ids of the memories an answer that cites none draws on (their specific values repeated, or
    most of their words), best first."""
    low = answer.lower()
    words = _content_words(answer)
    scored: list[tuple[float, str]] = []
    for mid, text in memories:
        specifics = _specifics(text)
        shared = {s for s in specifics if _has_token(s, low)}
        mwords = _content_words(text)
        overlap = len(words & mwords) / len(mwords) if mwords else 0.0
        if shared and overlap >= 0.2:
            scored.append((1.0 + len(shared) + overlap, mid))
        elif overlap >= 0.6:
            scored.append((overlap, mid))
        elif words and len(words) <= 3 and words <= mwords:
            scored.append((0.5, mid))  # a short answer ("Bob") that one memory holds whole
    return [mid for _, mid in sorted(scored, key=lambda x: -x[0])]
