"""Commit messages into facts: the rules that say which commits carry knowledge, and in what pieces.

A commit message is not a chat: "Delete setup.py" or "use uv" is short and still a fact, so the
extractor's sentence gates do not apply. What is skipped is skipped by a *named* rule, reported as
the skip reason (merge commits, typo and formatter runs, releases, "wip", docs/tests/lint work that
states no value, ...).

One memory per commit (the subject with the body's prose, which often holds the cause), except
grouped bumps: one memory per package, so the newer bump of a package supersedes only its own.
Used by the add pipeline for dated inputs with a `git:<sha>` origin (the post-commit hook,
`add --batch`); with a model, junk is still skipped here and the model extracts the rest.
"""

from __future__ import annotations

import re

from memcli.core.facts import Fact
from memcli.core.lazy_re import lazy_compile
from memcli.core.refs import strip_refs
from memcli.core.text import NO_NUMBER_WORDS
from memcli.services.extract import fact_from_text

MAX_FACT_CHARS = 1500  # a long body is cut at a paragraph: the embedding reads only its start anyway

# (rule name, pattern on the lowered subject with its references removed)
_JUNK_RULES: tuple[tuple[str, str], ...] = (
    ("merge_commit", r"^merge (?:branch|pull request|remote-tracking|remote|tag|(?:\S+ )?into)\b|^merge \S+$"
                     r"|^revert \"(?:revert \")?merge\b|^fix (?:a )?bad merge\b|^fix merge conflicts?\b"),
    ("experiment", r"^(?:try|trying|attempt(?:ing)?|experiment(?:ing)?)\b(?! to fix)"),
    ("wip", r"^(?:wip|work in progress|tmp|temp|checkpoint|save)\b[\s:!.]*"),
    ("typo", r"\btypos?\b|\bspelling\b|^fix(?:e[sd])? (?:a |the )?(?:misspell\w*|grammar)\b|\bpunctuation\b"
             r"|\bcomma splices?\b|^oxford(?: commas?)?\W*$"),
    ("formatter_run", r"^\[pre-commit\.ci(?: lite)?\] (?:apply )?auto(?:matic)? ?fix|^(?:run |apply |applied |ran )?"
                      r"(?:black|isort|ruff format|prettier|autopep8|yapf|pre-commit|formatter|auto-?format|cog)"
                      r"(?: on \S+| again| formatting| fixes)?$"
                      r"|^(?:fix |apply |more )?(?:re)?format(?:ting)?(?: \S+){0,3}$|^(?:fix )?(?:indentation"
                      r"|whitespace|lint)$"
                      r"|^apply format guidelines\b"),
    ("review_suggestions", r"^(?:apply|applied|address(?:ed)?|incorporate[sd]?) (?:\w+ )?(?:suggestions?|review|"
                           r"comments?|feedback)\b|^(?:code )?review (?:suggestions|comments|feedback|fixes)$"
                           r"|^(?:\w+ ){0,2}(?:adjustments|changes|fixes|tweaks) (?:from|per"
                           r"|after) (?:the )?(?:code |pr )?"
                           r"(?:review|feedback)\b"),
    ("changelog_edit", r"^(?!.*\b(?:scripts?|hooks?|ci|jobs?|workflows?|gitignore)\b)"
                       r"(?:further |also )?(?:add|adds|added|update|updated|adjust|polish|fix|fixes|tidy"
                       r"|tidy up|refine|improve|sharpen|sharper|link|edit|reword|normalize)\b"
                       r"(?:(?! markdown| myst| rename| convert| sdist).)*\b(?:changelogs?|"
                       r"change ?notes?|release ?notes?|news fragments?|changes\.(?:md|rst)|changelog\.d\S*)"
                       r"(?: entry| entries)?\b"),
    ("tests_only", r"^(?:add|adds|added)(?: a| some| more| missing| the| new)* (?:unit |integration |regression )?"
                   r"tests?\b(?!:)"
                   r"(?!.*\bto (?:the )?(?:sdist|wheels?|manifest|package|distribution|tarball)\b)"
                   r"|^(?:update|split up|split|restructure|parametrize|refactor|reorganize)"
                   r"(?: \w+){0,2}(?<! to) tests?\b"),
    ("release", r"^(?:release|releasing|release version|prepare(?: for)? release|preparing release|prepare|version|"
                r"bump version|"
                r"bump to version|bump to|tag|new version|set version)\b(?: to)? ?v?\d+(?:\.\d+)+\S*$"
                r"|^v?\d+(?:\.\d+)+\S*$|^(?:backfill(?:ed)? |backport(?:ed)? )?release notes? (?:for )?v?\d"
                r"|^(?:release|prepare release|bump version|version bump)(?: \S+)?$"
                r"|\b(?:new|next|start(?:ing)?|begin) (?:the )?development (?:cycle|version)\b|^back to development\b"
                r"|^(?:prepare|preparing|prep) (?:for )?(?:the )?(?:next )?release\b"
                r"|^change (?:update )?release date\b"
                r"|^(?:start|begin)(?:ing)? (?:version |release )?v?\d+(?:\.\d+)+\S*$"),
    ("dead_code", r"^(?:remove|removed|drop|dropped|delete|deleted|clean ?up|get rid of)\b (?:an? |the |some )?"
                  r"(?:unused|unnecessary|unneccessary|unneeded|redundant|superfluous|extraneous|stray|dead)"
                  r" (?:\S+ )?(?:imports?|variables?|arguments?|args?|parameters?|code|lines?|statements?|casts?"
                  r"|assignments?)$|^(?:remove|removed|drop|delete) (?:an? |the )?(?:imports?|debug(?:ging)?(?: code"
                  r"| prints?| output| statements?)?)$"),
    # adding oneself or a name to the credits: "Add myself to CONTRIBUTORS.md", "Adding named to CONTRIBUTORS.md"
    ("credits", r"^(?:add|adds|added|adding|update|updated)\b.{0,30}\bto (?:the )?(?:contributors|authors|credits"
                r"|thanks)(?:\.\w+)?$"),
    ("file_only", r"^(?:update|updated|edit|change|modify|tweak|fix) [\w./-]+\.(?:py|md|rst|txt|yml|yaml|toml|cfg|"
                  r"json|ini|html|js|ts|sh)$"),
    ("no_values", r"^pre-?commit (?:auto)?updates?$|^(?:update|updated|upgrade|bump|refresh"
                  r"|sync) (?:the )?(?:dev |development |docs |test |ci )?"
                  r"(?:dependencies|deps|requirements|lock ?files?|pre-?commit(?: hooks| config)?|hooks|"
                  r"pins|versions|(?:\w+ )?actions?|(?:package )?metadata)\.?$"),
)
_JUNK = tuple((name, lazy_compile(rx)) for name, rx in _JUNK_RULES)
# Work on the project's own prose that states nothing a developer could later ask about: skipped only
# when the subject names nothing (no option, code name, package, file or version) and the body has
# no prose of its own (a body often holds the cause: "Refactor terminal initialization" fixed FORCE_COLOR)
_BARE_RULES: tuple[tuple[str, str], ...] = (
    ("docs_edit", r"^(?:fix|fixe[sd]|update[sd]?|improve[sd]?|correct(?:s|ed)?|clarif(?:y|ies|ied)|rewrite|rewrote"
                  r"|revise[sd]?|polish(?:es|ed)?|tweak(?:s|ed)?|rough(?:ed)? out|fill(?:ed)? in|more|make)\b[^;]{0,60}"
                  r"\b(?:docs?|documentation|docstrings?|readme|read ?the ?docs|rtd)\b[^;]{0,40}$"
                  r"|^(?:docs?|documentation) (?:restructur\w*|clean ?up|fix(?:es)?|updates?|improvements?|tweaks?"
                  r"|wording)$|^(?:mention|describe|document|cross[- ]?link|clarif(?:y|ies|ied))\b(?!.*\bthat\b)"
                  r"|^add(?:s|ed)? (?:a |an |some )?(?:\w+ )?(?:doc )?notes? (?:about|on|for|to)\b|\(documentation\)"
                  r"|^(?!revert).*\b(?:docstrings?|docs? (?:page|section|title|build)s?|examples?|headings?"
                  r"|sections?|cross[- ]?(?:links?|references?)|wording|markup|myst|rst|directives?|code[- ]blocks?"
                  r"|toc|logos?|icons?|badges?|edit button|house style|h[1-6] headers?)\b"),
    ("links_only", r"^(?:add|fix|update|remove|get rid of|avoid|correct)\w*\b(?: (?:a|the|missing|bad|broken|dead"
                   r"|closing|old|pr|issue|more|some))* (?:links?|refs?|references?|urls?|link artifacts)\b"
                   r"(?: (?:to|in|on|for)"
                   r" \S+)?(?:,? and (?:update|fix) (?:the )?style)?$"),
    ("typing_only", r"^(?:add|fix|improve|apply|update|expand)\w*\b[^;]{0,40}\b(?:type[- ]?(?:annotations?|hints?"
                    r"|check(?:ing|s)?)|annotations?|typing)\b(?![-.])|^type[- ]hint"),
    # (a coverage pragma is a comment too: "Add `pragma: no branch` in `middleware/exceptions.py`")
    ("comments_only", r"^(?:add|relocate|move|update|fix|improve|clarify|describe)\w*\b[^;]{0,30}"
                      r"\b(?:comments?|pragmas?)\b"),
    ("refactor", r"^(?:refactor(?:ed|ing|s)?|streamline[sd]?|simplif(?:y|ies|ied)|tidy|tidied|clean ?up|cleanup"
                 r"|regroup(?:ed|s)?|reorganiz(?:e|ed|es)|restructur(?:e|ed|es))\b[^;]*$"),
    ("readability", r"^make\b[^;]{0,80}\b(?:clearer|more (?:explicit|readable|legible|obvious)"
                    r"|easier to (?:read|follow))$|^use more (?:legible|readable|explicit)\b"),
    ("sponsors", r"^sponsors?:|\bsponsor(?:ship|s)?\b(?: logos?)?$"),
    ("tests_only", r"^tests?(?:\([^)]*\))?:|^drop private imports? (?:of \S+ )?(?:from|in) \S*test"
                   r"|^test `|^(?:restore[sd]?|improve[sd]?|expand|extend|use|ensure|check|verify|describe|skip"
                   r"|parametrize|rename|split|update|refactor|rewrite|simplify)\b"
                   r"[^;]{0,60}(?:(?<!\bto )\btests?\b|\btest suite\b|\btest[- ]cases?\b|\btest_\w+|\bfixtures?\b"
                   r"|\bedge[- ]cases?\b|\bpytest\b|\btmp_path\b|\bconftest\b)"
                   r"|^add\w*\b[^;]{0,60}\b(?:edge[- ]cases?|fixtures?|test_\w+)"),
    ("lint_only", r"^make (?:\S+ ){0,2}happy$|^(?:adjust|fix|silence)\w* (?:for |a )?(?:mypy|pyright|flake8|pylint|"
                  r"ruff|linter?|zizmor)\b(?! \d)"),
)
_BARE = tuple((name, lazy_compile(rx)) for name, rx in _BARE_RULES)
#: what a subject names that makes it knowledge whatever its verb: a version, "instead", "now"...
_STATES_RE = lazy_compile(r"\d|\b(?:instead|now|no longer|switch\w*|replac\w*|deprecat\w*|from \S+ to)\b")
#: body lines that are no prose of their own: squashed commits' subjects, references, mentions
_NOT_PROSE_RE = lazy_compile(r"^\s*(?:(?:refs?|see|cc|links?)\b:?.*|(?:[\w -]{1,20}:\s*)?\S+://\S+|@\S+(?:\s+@\S+)*)\s*$",
                             re.I)
#: digits that are no value: PEP numbers, heading levels
_NOT_VALUES_RE = lazy_compile(r"\b(?:PEP ?\d+|H[1-6])\b|\bflake8(?![\w-])")
#: a docs commit that edits the docs' own text (a new guide, or "clarify that ...", says something)
_DOCS_VERB_RE = lazy_compile(r"^(?:fix|use|remove|get rid of|write|rewrite|update|improve|tweak|polish|move|link|make"
                             r"|rename|sync|mention|reword)\b(?!.*\bthat\b)")
_BULLET_RE = lazy_compile(r"^\s*[*-]\s+(.{1,80})$")
#: words that name no subject: a subject made only of them says nothing a developer could ask about
_VAGUE_WORDS = frozenset("""docs doc documentation clarify clarified polish polished consistency wording markup grammar
    semantic semantics pedantry shorten cleanup clean up tidy tweak tweaks nit nits minor update updates updated dev fix
    fixes fixed stuff misc more links link aspect it this that comments comment readme contributing improve improved
    improvements refactor refactoring simplify typing format style actually oops again test tests changes small
    some things various refine refined bump bumped changelog faq faqs words note notes credit credits ws future old
    code optimizations optimization plan initial another cases breakage defensive issues alternative mypy flake8
    pyright lint linting pyupgrade for new version rename renamed and change name debug style before after text
    message add contributor contributors""".split())
#: a lone "update <tool>" that names no version ("update ruff"): the version is the knowledge
_UNVERSIONED_RE = lazy_compile(r"^(?:update|updated|bump|bumped|upgrade|upgraded) [\w.\-]+$")
# leading emoji and gitmoji (⬆ U+2B06 and ⏪ U+23EA sit outside the emoji blocks)
_EMOJI_RE = lazy_compile(r"^(?:[\u2190-\u21ff\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\ufe0f\u200d]+"
                         r"\s*)+")
_TRAILER_RE = lazy_compile(r"^(?:signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by|"
                           r"suggested-by|helped-by|cc|change-id|fixes|closes|refs|see-also|issue|pr|"
                           r"dependabot-\S+|updated-dependencies|dependency-\S+|update-type|pr-url)\s*:", re.I)
# a squashed pull request's own commits that say nothing: review and merge commits, and a body of
# only GitHub's web-editor titles (expressjs/express: "fix(deps): serve-static@^2.2.0" over "* Update
# package.json" / "* Update History.md" no longer matched "Which serve-static version ...?"; among
# other bullets, "* Update httpx/_auth.py" says where a change went, and stays)
_SQUASHED_RE = lazy_compile(r"^[*-]\s+(?:apply suggestions?\s+from\s+(?:code review|@\S+)|merge (?:remote-tracking )?"
                            r"branch\s.*|merge \S+ into \S+)\s*$", re.I)
_EDITOR_TITLE_RE = lazy_compile(r"^[*-]\s+(?:update|create|delete|rename)\s+[\w./-]+\.\w+\s*$", re.I)
_BOT_LINE_RE = lazy_compile(r"^\s*(?:-\s*\[(?:release notes|changelog|commits|upgrade guide)\]|\.\.\.|---|"
                            r"<details>|</details>|<summary>|</summary>|<blockquote>|</blockquote>|<p>|</p>|"
                            r"<h\d>|<ul>|</ul>|<li>|\||commits$|release notes$|changelog$|sourced from|"
                            r"\[!\[dependabot|dependabot will|you can trigger|dependabot commands)", re.I)

# one package's bump, wherever a bot writes it
_BUMP_LINES = (
    # "Bumps [black](https://...) from 23.3.0 to 23.7.0." / "Updates `build` from 1.0.3 to 1.1.1"
    lazy_compile(r"^(?:bumps|updates|bump|update)\s+(?:the requirements on\s+)?(?:\[([^\]]+)\]\([^)]*\)|`([^`]+)`|"
                 r"([A-Za-z][\w.\-\[\]/]*))(?: requirement)?\s+from\s+`?(\S+?)`?\s+to\s+`?([^\s`]+?)`?\.?$", re.I),
    # "| [mkdocs-material](https://...) | `9.5.6` | `9.5.12` |"
    lazy_compile(r"^\|\s*\[([^\]]+)\]\([^)]*\)\s*\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|$"),
    # pre-commit.ci: "- [github.com/psf/black: 24.1.1 → 24.2.0](https://...)"
    lazy_compile(r"^-\s*\[?(?:https?://)?(?:github\.com|gitlab\.com)/[\w.-]+/([\w.-]+?)(?:-pre-commit(?:-mirror)?)?(?:\.git)?:"
                 r"\s*(\S+)\s*(?:→|->)\s*([^\s\]]+)\]?"),
)
_SUBJECT_BUMPS_RE = lazy_compile(r"\b([A-Za-z][\w.\-\[\]/]*) from (v?\d[\w.\-+]*) to (v?\d[\w.\-+]*)", re.I)
_GROUP_RE = lazy_compile(r"^(?:bump|update)s? the [\w-]+ group\b|pre-commit autoupdate|^bump (?:the )?(?:dev|test|"
                         r"ci|docs|python|github[- ]actions)", re.I)


def is_commit_origin(origins: list[str] | tuple[str, ...]) -> bool:
    """An input that is a commit message (the hook's or `add --batch`'s `git:<sha>` origin)."""
    return any(o.startswith("git:") for o in origins)


def _clean_subject(subject: str) -> str:
    return _EMOJI_RE.sub("", subject).strip()


def junk_reason(message: str) -> str | None:
    """The named rule that says a commit carries no knowledge, or None to keep it."""
    subject = _clean_subject(message.strip().split("\n", 1)[0]) if message.strip() else ""
    if not subject:
        return "empty_message"
    raw = subject.lower().strip()
    low = _NOT_VALUES_RE.sub("", strip_refs(subject)).lower().strip().rstrip(".!")
    # a conventional prefix says nothing by itself: judge what follows it ("docs: fix typo")
    prefix = re.match(r"^([a-z]+)(?:\([^)]*\))?!?:\s*", low)
    low = low[prefix.end():] if prefix else low
    for name, rx in _JUNK:
        if (rx.search(low) or rx.search(raw)) and not (name == "file_only" and _body_says(message)):
            # (a web editor's "Update progress.py" over "Don't output extraneous blank line when progress
            # display is disabled" says it in the body, Textualize/rich)
            return name
    docs_prefix = prefix is not None and prefix.group(1) in ("docs", "doc", "style")
    if docs_prefix and _DOCS_VERB_RE.match(low) and not _STATES_RE.search(low):
        return "docs_edit"  # "docs: fix msgspec URL", "style: use native": work on the docs' own text
    bare = _bare_reason(subject, raw, low, message)
    if bare:
        return bare
    if _GROUP_RE.search(subject) and not bumps(message) and not re.search(r"\bto v?\d", low):
        return "no_values"  # "Bump the python-packages group with 11 updates" and no package named
    words = re.findall(r"[\w'.\-/]+", low)
    if len(words) <= 3 and all(w.strip(".") in _VAGUE_WORDS for w in words):
        return "vague"
    if (len(words) <= 3 and words[-1] in ("it", "too", "them", "this", "that") and "\n" not in message.strip()
            and not _names_something(subject) and not _STATES_RE.search(low)):
        return "vague"  # "Let's grow it", "Custom, too": the subject points at what it does not say
    if _UNVERSIONED_RE.match(low) and not re.search(r"\d", message) and not _body_says(message):
        return "no_values"
    return None


# a name in a subject: inline code, a call, an option, an identifier or path, a file, a proper noun
# after the first word ("run Cog on docs build")
_NAME_RE = lazy_compile(r"`|\w\(\)|(?<![\w-])--?[a-z]|\w[._/]\w|(?<=\s)[A-Z][\w-]*")
_TEST_FILE_RE = lazy_compile(r"^(?:tests?/)?(?:\S*/)?(?:test_\w+|conftest)\.py\W*$|^tests?/\S*$")
_COMMON_CAPS = frozenset("README URL URLs PR PRs RTD CI RST MD TOC H1 API".split())


def _names_something(subject: str) -> bool:
    """Whether a subject names a thing (see `_NAME_RE`): the first word is judged by its shape
    only, since it is capitalised anyway."""
    words = _clean_subject(strip_refs(subject)).split()
    if not words:
        return False
    rest = " ".join(w for w in words[1:] if w.strip(".,:;!?()") not in _COMMON_CAPS
                    and not _TEST_FILE_RE.match(w))  # a test file names the tests, no thing a user meets
    return bool(re.search(r"`|\(\)|\w[._/]\w", words[0]) or _NAME_RE.search(" " + rest))


def _body_says(message: str) -> bool:
    """The body has prose of its own (see `_is_prose`)."""
    body = "\n".join(_body_paragraphs(message.partition("\n")[2]))
    return any(_is_prose(line) for line in body.splitlines())


def _is_prose(line: str) -> bool:
    """A body line that says something: not a reference or a mention, nor a squashed commit's
    subject that names nothing ("* Tweak docs layout"; "* Fix FORCE_COLOR on Windows" says something)."""
    if not line.strip() or _NOT_PROSE_RE.match(line):
        return False
    bullet = _BULLET_RE.match(line)
    return not bullet or bool(_STATES_RE.search(bullet.group(1)) or _names_something(bullet.group(1)))


def _bare_reason(subject: str, raw: str, low: str, message: str) -> str | None:
    """The `_BARE_RULES` rule for a subject that states no value, else None. A name in the subject
    or prose in the body keeps a commit, except where the work itself is the test suite, type
    annotations, comments or linters (`_WORK_ONLY`): `test_x` or `KeepOpenFile` there names what
    was annotated or tested, and the body says how, no behaviour."""
    states = bool(_STATES_RE.search(low))
    plain = not _names_something(subject) and not _body_says(message)
    for name, rx in _BARE:
        if states and name != "comments_only":  # (a version in a comment's subject is the comment's)
            continue
        if (plain or name in _WORK_ONLY) and (rx.search(low) or rx.search(raw)):
            return name
    return None


#: the work is on the tests, annotations, comments or linters: a name or a body there says what was
#: tested or annotated, no behaviour a user meets
_WORK_ONLY = frozenset({"tests_only", "typing_only", "comments_only", "sponsors", "lint_only", "readability"})


def _body_paragraphs(body: str) -> list[str]:
    """The body's prose: trailers, bot boilerplate and separators dropped."""
    keep: list[str] = []
    for line in body.splitlines():
        s = line.strip()
        if _TRAILER_RE.match(s) or _BOT_LINE_RE.match(s) or _SQUASHED_RE.match(s):
            continue
        keep.append(line.rstrip())
    if all(_EDITOR_TITLE_RE.match(line.strip()) for line in keep if line.strip()):
        return []
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def bumps(message: str) -> list[tuple[str, str, str]]:
    """(package, from, to) of every package the commit bumps, in order, once each."""
    found: dict[str, tuple[str, str, str]] = {}
    lines = message.splitlines()
    for line in lines[1:]:
        s = line.strip()
        for rx in _BUMP_LINES:
            m = rx.match(s)
            if m:
                groups = [g for g in m.groups() if g is not None]
                pkg, old, new = groups[0], groups[-2], groups[-1]
                found.setdefault(pkg.lower(), (pkg, old, new))
                break
    if not found and lines:
        subject = strip_refs(lines[0])
        if re.match(r"^\W*(?:build\(deps[^)]*\):\s*)?(?:bump|update|upgrade)s?\b", subject, re.I):
            for m in _SUBJECT_BUMPS_RE.finditer(subject):
                found.setdefault(m.group(1).lower(), (m.group(1), m.group(2), m.group(3)))
    return list(found.values())


# a versionless bump of several packages: "fix(deps): bump golang.org/x/net and golang.org/x/text to patched
# versions" (gin-gonic/gin@8dd20118): the verb and prefix, the names, the rest
_BARE_BUMPS_RE = lazy_compile(r"^(\W*(?:[\w/.\-]+(?:\([^)\n]*\))?!?:\s*)?(?:bump|upgrade)(?:s|ed)?\s+(?:the\s+)?)"
                              r"((?:[A-Za-z][\w.\-/]*\w,?\s+)+and\s+[A-Za-z][\w.\-/]*\w)"
                              r"(\s+to\s+(?:the\s+)?" + NO_NUMBER_WORDS + r"\s+versions?)?"
                              r"\W*$", re.I)


def commit_facts(message: str) -> tuple[list[str], str | None]:
    """The texts to remember from one commit message, and the skip rule when there are none.

    A bump of several packages: one text per package ("Bump black from 24.1.1 to 24.2.0"). A
    grouped bump that names no package is skipped ("no_values"). Anything else: one text, the
    subject (emoji and references kept as written) with the body's prose.
    """
    message = message.strip()
    why = junk_reason(message)
    if why:
        return [], why
    subject, _, body = message.partition("\n")
    subject = _clean_subject(subject)
    found = bumps(message)
    if len(found) > 1 or (found and _GROUP_RE.search(subject)):
        where = " in pre-commit" if "pre-commit" in subject.lower() else ""
        return [f"Bump {p} from {a} to {b}{where}" for p, a, b in found], None
    if found:  # one package: its subject says it ("Bump black from 23.3.0 to 23.7.0 (#2805)")
        return [subject], None
    several = _BARE_BUMPS_RE.match(strip_refs(subject))
    names = re.split(r",?\s+(?:and\s+)?", several.group(2)) if several else []
    if len(names) > 1 and len(set(names)) == len(names):  # one text per package, each with the body's reasons
        verb, tail = several.group(1), (several.group(3) or "") + "".join(re.findall(r" \(#\d+\)", subject))
        return [_with_body(f"{verb}{name}{tail}", body) for name in names], None
    return [_with_body(subject, body)], None


def _with_body(text: str, body: str) -> str:
    """`text` and the body's prose paragraphs that fit in one fact."""
    for para in _body_paragraphs(body):
        if len(text) + len(para) + 2 > MAX_FACT_CHARS:
            break
        text = f"{text}\n\n{para}"
    return text


def commit_fact(text: str, type: str | None = None) -> Fact:
    """A Fact for one commit text: memcli's tags, flags and confidence for it; a commit records a
    change, so its type is episodic unless the caller says otherwise."""
    fact = fact_from_text(text)
    fact.type = type or "episodic"
    return fact
