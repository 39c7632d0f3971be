"""Subject identity on real developer text: what a fact is about, and what is only provenance.

Commit subjects and changelog items share one shape ("Add `--where` option (#382)") and differ in a
name. Two things go wrong when such texts are compared word by word:

- **Reference numbers read as values.** `#382` vs `#381`, `GH-12`, `(#693)`, PR/issue links and
  commit shas say where a statement came from, never what it says; compared as values, every pair
  of commits "changes a value" and the newer hides the older (issue 21: 33 of 39 supersedes in one
  store rested on an issue number). `strip_refs` removes them before any comparison.
- **Names read as wording.** An option (`--where`), a code name (`` `table.transform()` ``,
  `Database()`), or a package in a pin or a bump (`black>=25.1.0`, "Bump trio from 0.21 to 0.22")
  *is* the subject: `--where` and `--limit` are two features, `black` and `isort` two pins.
  `subject_keys` reads those names; `same_subject` says whether two texts name the same ones.

Pure string work (no I/O, no model), so every decider applies the same rule.
"""

from __future__ import annotations

import functools
import re

from memcli.core.lazy_re import lazy_compile
from memcli.core.refs import strip_refs
from memcli.core.text import NO_NUMBER_WORDS, PYTHON_VERSION_ALONE_RE, camel_parts

__all__ = ["brought_back", "gives_version", "headline", "older_release", "one_versioned", "other_claim",
           "package_keys", "project_release", "range_end_asked", "release_asked", "release_change", "removal_of",
           "removes", "restated_version", "reverts", "same_pin", "same_subject", "spellings", "stated_version",
           "states_floor", "strip_refs",
           "subject_keys", "version_asked", "version_change"]

# an option or flag: `--where`, `-p` (one letter, alone), `--no-skip-false`
_FLAG_RE = lazy_compile(r"(?<![\w\-.])(--[a-z0-9][a-z0-9-]*[a-z0-9]|-[a-zA-Z])(?![\w\-])")
# inline code
_CODE_RE = lazy_compile(r"``?([^`\n]{1,60})``?")
# a called name: `Database()`, `table.transform()`, `lookup_default()`
_CALL_RE = lazy_compile(r"(?<![\w.])([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)\(\)")
# a package in a pin or a floor: `black>=25.1.0`, `httpcore==1.*`, `sqlite-utils>=3.37`, `rich<14`; npm's and
# GitHub Actions' `name@version`: `body-parser@^2.2.0`, `@types/node@20.1`, `actions/checkout@v4`
_PIN_RE = lazy_compile(r"(?<![\w.\-/@])(@?[A-Za-z][A-Za-z0-9_.\-]*[A-Za-z0-9](?:/[A-Za-z0-9_.\-]*[A-Za-z0-9])?)"
                       r"(?:\[[\w,\-]+\])?(?:\s*(?:===?|>=|<=|~=|!=|<|>)\s*v?\d|@[\^~]?v?\d)")
# a bump: "Bump black from 24.1.0 to 24.2.0", "Update httpcore requirement from ...", "Update PyPy CI
# builds to 3.11", Renovate's "update dependency ruff to v0.5.1" / "update github/codeql-action action to v3"
_BUMP_RE = lazy_compile(
    r"\b(?:bumps?|bumped|update[sd]?|upgrade[sd]?|downgrade[sd]?|pin(?:s|ned)?|unpin(?:s|ned)?|require[sd]?|allow)"
    r"\s+(?:the\s+)?(?:requirements?\s+on\s+)?(?:(?:dependency|pre-commit hook|rust crate|module|docker tag)\s+)?"
    r"\[?([A-Za-z][A-Za-z0-9_.\-/]*[A-Za-z0-9])\]?(?:\[[\w,\-]+\])?(?:\([^)]*\))?"
    r"(?:\s+(?:ci|builds?|jobs?|images?|versions?|requirement|action|minimum|floor|pin|library|module|package))*"
    r"\s+(?:from|to)\s+(?:version\s+)?(?:v?[<>=~!^]*\d|[0-9a-f]{7,40}\b)",  # a version, or a pinned sha
    re.I,
)
# "Upgrade to black 25.1", "upgrade bson dependency to mongo-driver v2" (gin-gonic/gin@ba093d19)
_BUMP_TO_RE = lazy_compile(r"\b(?:upgrade[sd]?|update[sd]?|bump(?:s|ed)?|move[sd]?|switch(?:es|ed)?)"
                           r"(?:\s+[\w.\-]+\s+(?:dependency|dep|requirement))?\s+to\s+"
                           r"([A-Za-z][A-Za-z0-9_.\-]*[A-Za-z])\s*[<>=~!]*\s*v?\d", re.I)
# a tool used at a version: "tests: ensure tox pipsupported uses pip 25.3", "Update tox
# 'pipsupported' to use pip v26.0" (jazzband/pip-tools); a dotted version, so "uses 2 workers" is none
_USES_RE = lazy_compile(r"\b(?:uses?|using)\s+(?:the\s+)?([A-Za-z][A-Za-z0-9_.\-]*[A-Za-z])\s+v?\d+(?:\.\d+)+\b", re.I)
# a package's allowed major version or its pin, in words: "Allow rich 12", "Support Django 5.0",
# "Remove temporary click version pin", "Bump rich pin to allow version 13", "Unpin click"
_ALLOW_RE = lazy_compile(r"\b(?:allow|support|require|pin)(?:s|ed|ing)?\s+(?:the\s+)?([A-Za-z][A-Za-z0-9_.\-]*[A-Za-z])"
                         r"(?:[\s-]+v?|\s+versions?\s+v?)\d+(?:\.\d+)*\b", re.I)
_PIN_WORDS_RE = lazy_compile(
    r"\b(?:remove[sd]?|drop(?:s|ped)?|add(?:s|ed)?|bump(?:s|ed)?|relax(?:es|ed)?|restore[sd]?|loosen(?:s|ed)?)\s+"
    r"(?:the\s+)?(?:(?:temporary|upper|lower|ci|strict|exact)\s+)*([A-Za-z][A-Za-z0-9_.\-]*[A-Za-z0-9])\s+"
    r"(?:(?:version|upper|lower)\s+)?(?:pin|bound|cap)s?\b|\bunpin(?:s|ned)?\s+(?:the\s+)?`?([A-Za-z][\w.\-]*[A-Za-z0-9])"
    r"|^\W*(?:re)?pin(?:s|ned)?\s+`?([A-Za-z][\w.\-]*[A-Za-z0-9])`?\s*$",
    re.I)
# a subject that is a tool and its version, nothing else: "Black 24", "Mypy 1.16", "uv 0.5"
_BARE_VERSION_RE = lazy_compile(r"^\W*([A-Za-z][A-Za-z0-9_.\-]*[A-Za-z])\s+v?\d+(?:\.\d+)*\W*$")
# a file named by its extension: `setup.py`, `advanced.rst`, `.github/workflows/tests.yml`
_FILE_RE = lazy_compile(r"(?<![\w.\-/])[\w\-/]*\w\."
                        r"(?:py|pyi|md|rst|txt|toml|cfg|ini|yml|yaml|json|lock|sh|js|ts|html|css)\b")
# "deps: bump ignore version", "Upgrade mypy", "deps: switch to tikv-jemallocator", "bump golang.org/x/net to
# patched versions", "upgrade Protobuf for CVE-2024-24786": a bump or a switch naming its one package and no
# version (BurntSushi/ripgrep@d7982619, @53279db4; gin-gonic/gin@8dd20118, @0d9dbbb4), the whole subject line
_NO_NUMBER_TO = (r"(?:\s+to\s+(?:the\s+)?" + NO_NUMBER_WORDS
                 + r"(?:\s+(?:stable|upstream|minor|patch))?(?:\s+(?:versions?|releases?))?)?"
                 r"(?:\s+(?:for|to\s+fix|to\s+address)\s+(?:CVE-\d{4}-\d+|GHSA(?:-\w{4}){3}|security\s+fix(?:es)?))?")
_BARE_BUMP_RE = lazy_compile(r"^\W*(?:[\w/.\-]+(?:\([^)\n]*\))?!?:\s*)?"
                             r"(?:bump(?:s|ed)?|upgrade[sd]?|(?:switch(?:es|ed)?|move[sd]?)\s+to)"
                             r"\s+(?:the\s+)?"
                             r"([A-Za-z][A-Za-z0-9_.\-/]*[A-Za-z0-9])(?:\s+(?:version|crate|dependency|package))?"
                             + _NO_NUMBER_TO + r"\W*$", re.I)
# Rust's minimum supported version: "cargo: set MSRV to 1.85" names the compiler, as "msrv: bump to Rust 1.96"
_MSRV_RE = lazy_compile(r"\bmsrv\b[^.\n]{0,20}?\bv?\d+\.\d+", re.I)
# Go's version as a project supports it: "chore: bump minimum Go version to 1.24", "support min go version 1.18",
# "Changes minimum support go version to go1.16", "ci: update Go version support to 1.25+" (gin-gonic/gin);
# not a tool run with it ("Format with Go 1.19 formatter")
_GO_RE = lazy_compile(r"\b(?:support(?:s|ed|ing)?|drop(?:s|ped)?|require[sd]?|minimum|min|add(?:s|ed)?|remove[sd]?)"
                      r"\b[^.\n]{0,30}?\bgo\s*(?:version\s*)?(?:to\s+)?(?:go)?v?(1\.\d+)"
                      r"|\bgo\s+version\s+(?:support\s+|requirements?\s+)?to\s+v?(1\.\d+)", re.I)
_PYTHON_RE = lazy_compile(r"\b(?:support(?:s|ed|ing)?|drop(?:s|ped)?|require[sd]?|minimum|add(?:s|ed)?|remove[sd]?)\b"
                          r"[^.\n]{0,30}\bpython\s*v?[23](?:\.\d+)?\b"
                          # "Python3.14 compatibility", "bump for Python3.14" (Textualize/rich 14.2.0)
                          r"|\bpython\s*v?3\.\d+\s+compatib\w*|\bbump\w*\s+for\s+python\s*v?3\.\d+", re.I)
# verbs before a version, which name no tool: "Drop 3.9" is no package `drop` at 3.9
_VERBS = frozenset("""add adds added drop drops dropped use uses used support supports supported require requires
    test tests run runs build builds remove removes deprecate deprecates fix fixes bump bumps update updates
    upgrade upgrades pin pins allow allows""".split())
_NOT_NAMES = frozenset("""from to and or than then version versions it them this that v is are was be now at least the
    a an dependency dependencies requirement requirements package packages everything all""".split())
_RELEASE_WORDS = frozenset("release released releasing prepare prepared tag tagged start version bump v".split())
_GENERIC_CODE = frozenset({"none", "true", "false", "self", "cls", "str", "int", "bytes", "list", "dict"})


def _norm_key(name: str) -> str:
    k = name.strip().strip("`'\".,:;").lower()
    k = re.sub(r"\(\)$", "", k)
    return k.replace("_", "-") if re.fullmatch(r"[a-z0-9_.\-\[\]]+", k) and "." not in k else k


_DUNDER_RE = lazy_compile(r"(?<![\w`])(__[a-z][a-z0-9_]*__)(?![\w`])")


# a short flag written as the alias of a long one: "-d/--detect-types", "-x, --extract", "--quiet (-q)"
_ALIAS_RE = lazy_compile(r"(?<![\w\-.])(-[a-zA-Z])\s*(?:/|,|\bor\b)\s*--[a-z0-9]"
                         r"|--[a-z0-9][a-z0-9-]*\s*(?:/|,|\bor\b|\()\s*(-[a-zA-Z])(?![\w\-])")
_INTERPRETER_RE = lazy_compile(r"\bpython[\d.]*\s+$", re.I)
_RUN_MODULE_RE = lazy_compile(r"\bpython[\d.]*\s+-m\s+([A-Za-z_][\w.]*)", re.I)


@functools.lru_cache(maxsize=65536)
def subject_keys(text: str) -> frozenset[str]:
    """The names `text` is about: options/flags, code names (inline code, called names) and the
    packages of pins and bumps, normalised (case, `_` vs `-`, a trailing `()`); empty for plain
    prose, which the wording rules of `relate` then judge."""
    text = strip_refs(text)
    keys: set[str] = set()
    for m in _FLAG_RE.finditer(text):
        if m.group(1) in ("-m", "-c") and _INTERPRETER_RE.search(text, 0, m.start()):
            continue  # `python -m rich.syntax`: the interpreter's switch, the module is the subject
        keys.add(m.group(1).lower() if m.group(1).startswith("--") else m.group(1))
    for m in _RUN_MODULE_RE.finditer(text):
        keys.add(_norm_key(m.group(1)))
    keys -= {a or b for a, b in _ALIAS_RE.findall(text)}  # "-d/--detect-types" is one option, the long name
    for m in _CODE_RE.finditer(text):
        code = m.group(1).strip()
        if not code or code.lower() in _GENERIC_CODE or " " in code.strip() and not code.startswith("-") \
                or re.fullmatch(r"[<>=~^!]*v?\d+(?:\.\d+)+[\w.*+\-]*", code):  # "to `0.0.18`": a value
            continue
        flag = _FLAG_RE.match(code)
        if flag:
            keys.add(flag.group(1).lower() if flag.group(1).startswith("--") else flag.group(1))
            continue
        pin = _PIN_RE.match(code)
        keys.add(_norm_key(pin.group(1) if pin else re.split(r"[=<>~!\s]", code)[0]))
    for m in _CALL_RE.finditer(text):
        keys.add(_norm_key(m.group(1)))
    for m in _DUNDER_RE.finditer(text):  # "deprecate __version__ attribute": a dunder is code, quoted or not
        keys.add(_norm_key(m.group(1)))
    for m in _FILE_RE.finditer(text):
        keys.add(m.group(0).lower())
    bare = _BARE_VERSION_RE.match(headline(text))
    if bare and bare.group(1).lower() not in _NOT_NAMES | _RELEASE_WORDS | _VERBS:
        keys.add(_norm_key(bare.group(1)))
    if _PYTHON_RE.search(text) or PYTHON_VERSION_ALONE_RE.search(headline(text)):  # "Require Python 3.9+", "Drop 3.9"
        keys.add("python")
    if _MSRV_RE.search(text):
        keys.add("rust")
    if _GO_RE.search(text):
        keys.add("go")
    for rx in (_PIN_RE, _BUMP_RE, _BUMP_TO_RE, _ALLOW_RE, _PIN_WORDS_RE, _USES_RE, _BARE_BUMP_RE):
        for m in rx.finditer(headline(text) if rx is _BARE_BUMP_RE else text):  # (a body does not end the line)
            name = m.group(1) or m.group(m.lastindex or 1)
            if name.lower() in _NOT_NAMES:
                continue
            keys.add(_package_key(rx, name))
    keys.discard("")
    return frozenset(keys)


@functools.lru_cache(maxsize=65536)
def package_keys(text: str) -> frozenset[str]:
    """The packages a text pins or bumps ("Bump flake8-bugbear from 22.7.1 to 23.1.20"): the
    subject keys that name a distribution, not a code name (`command_class` is no plugin of `command`)."""
    text = strip_refs(text)
    return frozenset(_package_key(rx, m.group(1)) for rx in (_PIN_RE, _BUMP_RE, _BUMP_TO_RE, _BARE_BUMP_RE)
                     for m in rx.finditer(headline(text) if rx is _BARE_BUMP_RE else text)
                     if m.group(1).lower() not in _NOT_NAMES)


def _package_key(rx: re.Pattern[str], name: str) -> str:
    """The key of a name a pattern read: a bumped module path's last part ("Bump github.com/quic-go/quic-go
    ..." is quic-go), but for Go's major-version suffix (".../validator/v10" is validator); GitHub
    Actions and pre-commit hooks keep their owner."""
    if rx in (_BUMP_RE, _BARE_BUMP_RE) and "/" in name and "[" not in name \
            and not name.startswith(("actions/", "pre-commit/")):
        name = re.sub(r"/v\d+$", "", name).rsplit("/", 1)[-1]
    return _norm_key(name)


def headline(text: str) -> str:
    """The first line of a multi-line text (a commit's subject), else the text."""
    first = text.strip().split("\n", 1)[0].strip()
    return first or text


def same_subject(old: str, new: str) -> tuple[bool | None, str]:
    """Whether two texts name the same subject: True/False when both name one (options, code names,
    packages), None when one of them names none (the wording rules decide then); with a reason."""
    ko, kn = subject_keys(old), subject_keys(new)
    if not ko or not kn:
        return None, ""
    if ko == kn:
        return True, ""
    gone, new_ = sorted(ko - kn), sorted(kn - ko)
    return False, f"different subject: {', '.join(gone[:3]) or '-'} vs {', '.join(new_[:3]) or '-'}"


# the version a text gives its one package: "Bump black from 24.1.1 to 24.2.0", "black>=25.1.0",
# "pin httpcore==1.*", "Upgrade to black 25.1", "deps: body-parser@^2.2.0"
_TO_VERSION_RE = lazy_compile(r"\bto\s+`?v?[<>=~!^]*\s*(\d[\w.*+\-]*)|(?:===?|>=|<=|~=|<|>)\s*v?(\d[\w.*+\-]*)"
                              r"|(?<=[\w])@[\^~]?v?(\d[\w.*+\-]*)")


_VERSION_RE = lazy_compile(r"(?<![\w.])v?\d+(?:\.\d+)+\w*|(?<![\w.])\d(?![\w.])")
_WORDS_RE = lazy_compile(r"[a-z][a-z0-9_\-]*")


#: verbs that all set a package's version: "Upgrade mypy" and "Bump mypy to 1.4" make one claim
_SET_VERBS = frozenset("bump bumps bumped update updates updated upgrade upgrades upgraded pin pins pinned require "
                       "requires required use uses used move moves moved switch switches switched set sets allow allows"
                       .split())
_CLAIM_STOP = frozenset("a an the to from of for and or in on at with by version versions v now".split())


def _claim_words(key: str, text: str) -> set[str]:
    words = _WORDS_RE.findall(_VERSION_RE.sub(" ", text.lower()))
    return {"set" if w in _SET_VERBS else w.rstrip("s") for w in words if w not in _CLAIM_STOP and w != key}


def _same_claim(key: str, old: str, new: str) -> bool:
    """Two versions of one package make the same claim when the rest of the texts share half their
    words: "Drop Python 3.8 support" / "Drop support for EOL Python 3.9" do; "Fully support Python
    3.13, including CI testing and wheel building" / "Add CI coverage for Python 3.15" do not (3.13
    is still supported: a newer Python in CI adds one)."""
    wo, wn = _claim_words(key, headline(old)), _claim_words(key, headline(new))
    if not wo or not wn:
        return True  # "Black 24": the version is all it says
    return len(wo & wn) / max(len(wo), len(wn)) >= 0.5


def _same_shape(old: str, new: str) -> bool:
    """The two texts say the same thing but for their version numbers ("Drop support for Python 2
    and 3.5" / "Drop support for Python 3.7 and 3.8"): nearly the same words once versions are gone."""
    wo = set(_WORDS_RE.findall(_VERSION_RE.sub(" ", old.lower())))
    wn = set(_WORDS_RE.findall(_VERSION_RE.sub(" ", new.lower())))
    return bool(wo and wn) and len(wo & wn) / len(wo | wn) >= 0.75


def _version_of(key: str, text: str) -> str | None:
    """The version a text gives `key` (its one package): a bump's or a pin's "to" value, else the
    number right after the name or after "version" ("Allow rich 12", "to allow version 13"); npm's
    `key@version` first, as a line may list several packages."""
    go = _GO_RE.search(text) if key == "go" else None  # "to go1.16"
    if go:
        return go.group(1) or go.group(2)
    m = re.search(rf"(?<![\w.\-/@]){re.escape(key)}@[\^~]?v?(\d[\w.*+\-]*)", text, re.I)
    if m:
        return m.group(1).rstrip(".,")
    m = _TO_VERSION_RE.search(text)
    if m:
        return (m.group(1) or m.group(2) or m.group(3)).rstrip(".,")
    gap = "*" if key == "python" else "+"  # "Python3.14" (Textualize/rich); "sqlite3" is no sqlite 3
    m = re.search(rf"(?<![\w.-]){re.escape(key)}[\s-]{gap}v?(\d+(?:\.\d+)*)\b|\bversions?\s+v?(\d+(?:\.\d+)*)\b",
                  text, re.I)
    if m:
        return m.group(1) or m.group(2)
    bare = PYTHON_VERSION_ALONE_RE.search(text) if key == "python" else None  # "Drop 3.9": its one number
    return re.search(r"(?:2\.7|3\.\d{1,2})\b", bare.group(0)).group(0) if bare else None


@functools.lru_cache(maxsize=65536)
def _versions(old: str, new: str) -> tuple[str, str | None, str | None] | None:
    """The one subject both texts name, and the version each gives it; None when they do not name
    one and the same subject. Shared by `version_change`, `same_pin` and `other_claim`, which
    `relate` asks of one pair in turn."""
    ko = subject_keys(old)
    if len(ko) != 1 or ko != subject_keys(new):
        return None
    key = next(iter(ko))
    return key, _version_of(key, strip_refs(old)), _version_of(key, strip_refs(new))


def version_change(old: str, new: str) -> str | None:
    """When both texts give one and the same package a version and the versions differ: the
    reason ("black: 24.1.1 -> 24.2.0"); a bump's "from" value is history, its "to" value the
    current one. None otherwise."""
    found = _versions(old, new)
    if found is None:
        return None
    key, vo, vn = found
    if vo and vn and (_other_line(key, vo, vn) or _edition_and_release(vo, vn)):
        return None
    old, new = strip_refs(old), strip_refs(new)
    # dropping a version and adding one are two ends of a range ("Drop Python 3.8" and "Add Python
    # 3.13" are both true): versions compare only between two statements of one kind
    # two bumps or pins of one package set its version, whatever else they say ("Upgrade mkdocs to
    # 1.3.0 to fix scripts/docs failure" / "Bump mkdocs from 1.3.0 to 1.3.1")
    set_both = key in package_keys(old) and key in package_keys(new)
    if set_both and not (vo and vn) and (_BARE_BUMP_RE.match(headline(old)) or _BARE_BUMP_RE.match(headline(new))):
        return f"{key}: {vo or 'no version'} -> {vn or 'a newer bump'}"  # a newer bump of one package
    floors = (bool(_MIN_RE.search(old)), bool(_MIN_RE.search(new))) if key in _RUNTIMES else (False, False)
    if vo and vn and bool(_DROP_RE.search(old)) == bool(_DROP_RE.search(new)) and floors[0] == floors[1] and (
            set_both or all(floors) or _same_claim(key, old, new)):  # (two floors of one runtime: one claim)
        return f"{key}: {vo} -> {vn}" if vo != vn else None
    so, sn = sorted(set(_VERSION_RE.findall(old))), sorted(set(_VERSION_RE.findall(new)))
    if so and sn and so != sn and _same_shape(old, new):
        return f"{key}: {', '.join(so)} -> {', '.join(sn)}"
    return None


def same_pin(old: str, new: str) -> str | None:
    """Both texts set their one package to the same version ("deps: body-parser@^2.2.0 (#6419)" and the
    changelog's "deps: `body-parser@^2.2.0`"): the package and version, or None."""
    found = _versions(old, new)
    if found is None or found[0] not in package_keys(old) or found[0] not in package_keys(new):
        return None
    key, vo, vn = found
    return f"{key} {vo}" if vo and vo == vn else None


#: runtimes released in major lines that projects test side by side (Node.js 16, 18, 20 in one CI matrix)
_LINE_RUNTIMES = frozenset({"node", "node.js", "nodejs", "deno", "bun", "java", "jdk", "openjdk"})
#: the languages a project supports a range of (a floor, a newest version)
_RUNTIMES = _LINE_RUNTIMES | {"python", "go", "rust"}


def _other_line(key: str, vo: str, vn: str) -> bool:
    """Two versions of a runtime on different major lines where one pins a release within its line:
    "build: Node.js@16.17" and "build: Node.js@18.7" (expressjs/express) keep two CI lines current,
    and "support Node.js 18.x" is not ended by "Node.js@16.15"; "support Node.js 17.x" -> "18.x" (both
    whole lines, as is "Node.js 23.0") is the newest line moving on."""
    if key not in _LINE_RUNTIMES or vo.split(".")[0] == vn.split(".")[0]:
        return False
    return any(re.fullmatch(r"\d+\.\d+[\w.]*", v) and not v.endswith((".x", ".*", ".0")) for v in (vo, vn))


def _edition_and_release(vo: str, vn: str) -> bool:
    """A year and a dotted release are two kinds of version of one name: "rust: move to Rust 2024"
    (the edition) is not ended by "msrv: bump to Rust 1.96" (the compiler), BurntSushi/ripgrep."""
    years = [bool(re.fullmatch(r"(?:19|20)\d\d", v)) for v in (vo, vn)]
    return years[0] != years[1] and not any(re.match(r"(?:19|20)\d\d\.", v) for v in (vo, vn))


def other_claim(old: str, new: str) -> str | None:
    """Both texts give their one subject a version, the versions differ, yet `version_change` finds
    no new value: two claims about one thing ("Drop support for Python 3.7" / "Support Python 3.12",
    the two ends of a range; a real uvicorn pair the wording rules read as "3.7 -> 3.12"). The
    reason, or None."""
    found = _versions(old, new)
    if found is None or version_change(old, new):
        return None
    key, vo, vn = found
    return f"two claims about {key} ({vo}, {vn})" if vo and vn and vo != vn else None


def one_versioned(old: str, new: str) -> str | None:
    """Both texts name one subject and only one gives it a version: "build: Node.js@14.19" / "build: use
    64-bit Node.js in AppVeyor" (expressjs/express) say two things of Node.js, and a word swapped between
    them ("14.19" -> "64-bit") is no new value of either. A versionless bump ("deps: bump ignore
    version") still moves the version on. The reason, or None."""
    found = _versions(old, new)
    if found is None or bool(found[1]) == bool(found[2]):
        return None
    # (two bumps or pins both set it, though a sha's "to ac868b9..." reads as no version)
    if found[0] in package_keys(old) and found[0] in package_keys(new) or any(
            _BARE_BUMP_RE.match(headline(strip_refs(t))) for t in (old, new)):
        return None
    key, vo, vn = found
    return f"two claims about {key} (one gives it {vo or vn}, the other no version)"


# "Which websockets version ...?", "What is the minimum supported Python version?", "Which version of
# actions/checkout does CI use?": the name before "version", or after "version of"
_ASKED_VERSION_RE = lazy_compile(
    r"\b(?:which|what)\b(?:\s+[\w'-]+){0,4}?\s+(?:versions?\s+of\s+(?:the\s+)?`?([A-Za-z][\w.\-/]*[A-Za-z0-9])"
    r"|`?([A-Za-z][\w.\-/]*[A-Za-z0-9])`?\s+versions?\b)", re.I)
_NOT_ASKED = frozenset("""minimum maximum min max latest newest oldest current lowest highest supported support
    release major minor patch new old same this that which what the a an default required""".split())


_FLOOR_ASKED_RE = lazy_compile(r"\b(?:oldest|minimum|min|lowest|earliest|floor|at least|required)\b", re.I)
_CEILING_ASKED_RE = lazy_compile(r"\b(?:newest|latest|highest|maximum|max|most recent)\b", re.I)


def stated_version(key: str, text: str) -> str | None:
    """The version `text` gives `key` ("Drop support for EOL Python 3.9 (#4842)": 3.9), or None."""
    return _version_of(key, strip_refs(text)) if key in subject_keys(text) else None


def spellings(key: str) -> frozenset[str]:
    """The subject keys one runtime is written as ("Node.js 14", "node@18", "nodejs"): one answer
    to a question about its version, though no rule joins their statements."""
    return _NODE_KEYS if key in _NODE_KEYS else frozenset({key})


_NODE_KEYS = frozenset({"node", "node.js", "nodejs"})


def range_end_asked(query: str, key: str) -> str | None:
    """"floor" or "ceiling" when the question asks one end of a runtime's supported range ("What is
    the oldest Python version ...?", "... the newest Python version rich supports?"), else None."""
    if key not in _RUNTIMES:
        return None
    floor, ceiling = bool(_FLOOR_ASKED_RE.search(query)), bool(_CEILING_ASKED_RE.search(query))
    return "floor" if floor and not ceiling else "ceiling" if ceiling and not floor else None


def states_floor(text: str) -> bool:
    """The text moves a runtime's floor ("Drop support for Python 3.8", "requires Python 3.10 or
    higher"), not its newest supported version ("Add support for Python 3.13")."""
    said = headline(strip_refs(text))  # (a body's "drop" or "require" is about its own details)
    return bool(_FLOOR_RE.search(said) or _DROP_RE.search(said))


# (not "3.14+", which may be a condition: "Adjust the 'piplowest' version for py3.14+", jazzband/pip-tools)
_FLOOR_RE = lazy_compile(r"\b(?:min(?:imum|imal)?|at least|require[sd]?|requiring|floor"
                         r"|or (?:higher|newer|later|above)|no longer (?:support\w*|runs?)"
                         r"|last (?:release|version) (?:that|to) supports?)\b|>=", re.I)


def version_asked(query: str) -> str | None:
    """The package or tool a question asks the version of (its subject key), or None."""
    m = _ASKED_VERSION_RE.search(query)
    name = (m.group(1) or m.group(2)) if m else None
    if not name or name.lower() in _NOT_ASKED | _NOT_NAMES:
        return None
    return _norm_key(name)


# "What is the latest httpx release?", "What's the newest version?", "which release is current?"
_LATEST_RELEASE_RE = lazy_compile(r"\b(?:latest|newest|current|most recent|last)\b(?:\s+[\w.\-']+){0,2}?\s+"
                                  r"(?:releases?|released|versions?)\b|\b(?:releases?|versions?)\s+(?:is|are)\s+"
                                  r"(?:the\s+)?(?:latest|newest|current)\b", re.I)


def release_asked(query: str) -> bool:
    """The question asks for the project's latest release (its release statements answer it, the
    newest first), whatever it calls the project."""
    return bool(_LATEST_RELEASE_RE.search(query))


def project_release(text: str) -> str | None:
    """The version of a project release statement ("Version 0.28.1 was released on 2024-12-06"), else None."""
    found = _release(text)
    return found[1] if found and not found[0] else None


def gives_version(key: str, text: str) -> bool:
    """`text` gives `key` a version ("Bump rich from 14.3.3 to 15.0.0", "Drop Python 3.8"), or says it
    moved on ("deps: bump ignore version": the newest statement, though it names no number)."""
    return stated_version(key, text) is not None or key in subject_keys(text) \
        and bool(_BARE_BUMP_RE.match(headline(strip_refs(text))))


_FIX_RE = lazy_compile(r"\b(?:fix\w*|bug\w*|crash\w*|error\w*|warn\w*|issue\w*|regression\w*|work(?:s|ed)? around"
                       r"|avoid\w*|prevent\w*|handl\w*|broken|fail\w*)\b", re.I)


def restated_version(old: str, new: str) -> str | None:
    """Two one-shape texts that say the same words but for their version numbers ("Build docs on
    3.12" / "Build docs on 3.14"): the reason, the versions old -> new; None otherwise."""
    old, new = strip_refs(headline(old)), strip_refs(headline(new))
    so, sn = sorted(set(_VERSION_RE.findall(old))), sorted(set(_VERSION_RE.findall(new)))
    wo = _WORDS_RE.findall(_VERSION_RE.sub(" ", old.lower()))
    wn = _WORDS_RE.findall(_VERSION_RE.sub(" ", new.lower()))
    if not so or not sn or so == sn or len(wo) < 2 or wo != wn or _FIX_RE.search(old):
        return None  # (two fixes on two versions are two fixes: "Fix crash on Python 3.11" / "... 3.12")
    return f"{' '.join(wo[:4])}: {', '.join(so)} -> {', '.join(sn)}"


# a runtime's floor and its newest supported version are two ends of a range ("chore(go): Add support go
# 1.19" / "chore: support min go version 1.18", gin-gonic/gin); a package's pin and floor are one claim
_MIN_RE = lazy_compile(r"\b(?:min(?:imum|imal)?|at least|require[sd]?|floor)\b|>=|\d\+", re.I)
_DROP_RE = lazy_compile(r"\b(?:drop|remov|deprecat|end of|eol)\w*", re.I)


#: what may come before a text's first verb: a conventional-commit type ("refactor: remove X",
#: "chore(deps): drop foo") or a changelog category ("Changed: Removed `typing_extensions` ...")
_LEAD = r"^\W*(?:[a-z][\w\-]*(?:\([^)\n]{0,40}\))?!?:\s+)?"
#: a text that starts by removing something ("Remove ...", "chore: drop ...", "Unpin ...")
_REMOVE_VERB = _LEAD + r"(?:remove[ds]?|drop(?:ped|s)?|delete[ds]?|unpin(?:s|ned)?)\b"
_REMOVED_RE = lazy_compile(
    r"\b(?:(?:has|have|is|are|was|were)\s+(?:now\s+)?(?:been\s+)?(?:fully\s+|finally\s+|completely\s+)?"
    r"|now\s+(?:fully\s+)?)(?:removed|dropped|deleted)\b|\bno longer (?:supported|available|exists?|exported)\b"
    r"|" + _REMOVE_VERB,
    re.I,
)


def removal_of(old: str, new: str) -> str | None:
    """`new` says a name was removed ("The deprecated `proxies` argument has now been removed") and
    `old` is a statement about that name (it names it first: its deprecation, its addition): the
    name. The removal is the name's newest state, so it supersedes the older statement. None when
    `new` names no removal, or `old` is about something else, or says the removal itself.

    The old text may name it in plain words: "Use sqlean if available" / "Remove sqlean.py support",
    ".convert(skip_false) option" / "Removed convert skip_false and --skip-false", "Experimental TUI
    powered by Trogon" / "Removed trogon feature" (simonw/sqlite-utils); names both texts give and
    the removal leaves (the project's own name) are context, not what the old text is about."""
    said = strip_refs(new)
    verb = _REMOVED_RE.search(said)
    if not verb or _REMOVED_RE.search(strip_refs(old)):
        return None
    # dropping some versions of a name is a new version range, not its removal: "Drop Python 3.8",
    # "remove node <11, all failing permanently now" (expressjs/express) ends no "Node@18 minimum"
    kn = frozenset(k for k in subject_keys(new) - {"python"}
                   if not re.search(rf"(?<![\w.-]){re.escape(k)}[\s@]*(?:[<>=~^!]+\s*|(?:below|under|before|older than"
                                    r"|prior to)\s+)?v?\d", said, re.I))
    ko = subject_keys(old)
    low = strip_refs(old).lower().replace("_", "-")
    if not _same_place(said, low):
        return None
    if kn and kn <= ko:
        if not _removes_a_name(said, verb, kn):
            return None
        first = min(ko, key=lambda k: (low.find(k) if low.find(k) >= 0 else len(low)))
        return first if first in kn and not _replaces(low, first) else None
    # the old text names it in plain words, or the new one names more: the removed thing must be
    # that name alone, said right after the verb ("Remove mypy skip flags" removes flags)
    named = (set(ko) | {w.lower() for w in _PROPER_NOUN_RE.findall(strip_refs(headline(old)))}) - _RUNTIMES
    for k in kn:  # the new text's name as the old one writes it: `--skip-false` as skip_false, sqlean.py as sqlean
        plain = _EXT_RE.sub("", k.lstrip("-"))
        if "-" in plain:  # "typing extensions" for `typing_extensions`
            low = re.sub(rf"(?<![\w.-]){re.escape(plain.replace('-', ' '))}(?![\w.-])", plain, low)
        if _has_word(low, plain):
            named.add(plain)
    words = _removed_words(said)
    # (`--no-skip-false` is the other half of the `--skip-false` flag pair: removed with it)
    removed = {n for n in named if _removes_plainly(words, re.sub(r"^--no-", "", n), low)}
    said_low = said.lower().replace("_", "-")
    context = {n for n in named - removed if n in kn or _has_word(said_low, n)}
    first = min((n for n in named - context if _has_word(low, n)), key=low.find, default=None)
    return first if first in removed and not _replaces(low, first) else None


_EXT_RE = lazy_compile(r"\.(?:py|js|rs|go|rb)$")
_FROM_RE = lazy_compile(r"^[^\n]*?\bfrom\s+(?:the\s+)?([^\n,;:(]{3,60})", re.I)


def _same_place(said: str, old_low: str) -> bool:
    """A removal from a place beside the code (docs, tests, packaging, CI) or from the dependencies
    ends only what the old text says of that place: "remove history.md from being packaged on
    publish" ends no "update history.md for ...", "remove `chunk_size` from api docs" no "Read
    upload files using `read(CHUNK_SIZE)`" (encode/httpx, expressjs/express), "Removed
    `typing_extensions` from runtime dependencies" no "Move `typing_extensions` into
    `TYPE_CHECKING` block" (Textualize/rich)."""
    m = _FROM_RE.match(said)
    place = {w[:5] for w in _WORDS_RE.findall(m.group(1).lower())} if m else set()
    if not place & _PLACES:  # "from insert and upsert": the name's own home
        return True
    return bool(place & {w[:5] for w in _WORDS_RE.findall(old_low)})


#: places a removal may name, by their first five letters: docs, tests, examples, packaging, CI, dependencies
_PLACES = frozenset("docs doc docum readm api test tests examp packa publi wheel sdist ci workf chang docst "
                    "comme depen requi".split())


def _replaces(old_low: str, name: str) -> bool:
    """The old text already removes the name in other words ("chore: replace `methods` dependency
    with standard library", "use node:buffer instead of safe-buffer", "nuke 'simd-accel' from
    orbit"): a later removal of it (the release's "deps: remove `methods`") is that change again."""
    n = re.escape(name.lstrip("-"))
    return re.search(rf"\b(?:replac\w*|nuk\w*|get rid of|got rid of|instead of|drop\w*|remov\w*|delet\w*)"
                     rf"\s+(?:the\s+|all\s+)?[`'\"]?-*{n}(?![\w-])", old_low) is not None


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w.-])", text) is not None


#: what a removed name may be called beside it: "Remove sqlean.py support", "Removed trogon feature"
_REMOVAL_HEADS = frozenset("the a an all support feature features integration dependency module package backend "
                           "workaround shim and".split())


def _removed_words(said: str) -> list[str]:
    """The words `said` removes when it starts with a removal verb: those after the verb, up to
    "in", "from", "as"..., without dashes or a file extension ("Remove sqlean.py support": sqlean,
    support); [] for any other text."""
    start = _REMOVE_FIRST_RE.match(said)
    if not start:
        return []
    tail = _SUPPORT_FOR_RE.sub(" ", said.lower().replace("_", "-")[start.end():start.end() + 80])
    after = re.split(r"\b(?:in|from|of|for|on|at|when|because|so|to|as|with|since)\b|[,;:(]", tail, maxsplit=1)[0]
    return [_EXT_RE.sub("", w.strip(".`'\"").lstrip("-")) for w in after.split()]


def _removes_plainly(words: list[str], name: str, old_low: str) -> bool:
    """The removed `words` (`_removed_words`) are `name` and nothing else: the name, heads like
    "support" or "feature", and words of the old text ("Removed convert skip_false and --skip-false"
    after ".convert(skip_false) option"); a code name maybe after a qualifier or two ("Removed convert
    skip_false" after "--no-skip-false option")."""
    name = _EXT_RE.sub("", name.lstrip("-"))
    if name not in words[:3] or words.index(name) and not re.search(r"[_\-.]", name):
        return False
    # (up to two words before a code name qualify it, "Removed convert skip_false"; words after it
    # must not be a head of their own, "Remove mypy skip flags" removes flags)
    return all(w == name or w in _REMOVAL_HEADS or re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", old_low)
               for w in words[words.index(name):] if w)


#: a capitalised word after a sentence's first (a proper noun: "powered by Trogon"), not an acronym
_PROPER_NOUN_RE = lazy_compile(r"(?<=[a-z,] )[A-Z][a-z][\w-]{2,}")


def _removes_a_name(text: str, verb: re.Match[str], names: frozenset[str]) -> bool:
    """The removed thing is one of the names: right after "Remove" ("Remove `foo`", "Delete
    setup.py", "Unpin Sphinx"), before "in"/"from", or just before "has been removed". "Remove
    duplicate index urls in generated `requirements.txt`" removes duplicates, not the file."""
    low = text.lower().replace("_", "-")
    start = _REMOVE_FIRST_RE.match(text)
    if start:
        after = re.split(r"\b(?:in|from|of|for|on|at|when|because|so|to)\b", low[start.end():start.end() + 80],
                         maxsplit=1)[0]
        # "Remove `--no-cache` docs example": an example (a test, a mention) of the name goes, not the name
        return any(k in after for k in names) and not _ABOUT_A_NAME_RE.search(after)
    return any(k in low[max(0, verb.start() - 80):verb.start()] for k in names)


def removes(text: str) -> bool:
    """The text's first line starts by removing something ("Remove ...", "drop ...", "Unpin ...")."""
    return bool(_REMOVE_FIRST_RE.match(strip_refs(headline(text))))


_ABOUT_A_NAME_RE = lazy_compile(r"\b(?:docs?|documentation|examples?|mentions?|sections?|notes?|links?|badges?"
                                r"|comments?|tests?|warnings?|snippets?|references?|entry|entries)\W*$")
_SUPPORT_FOR_RE = lazy_compile(r"^\s*(?:the\s+)?(?:support|compatibility)\s+(?:for|of|with)\s+(?:using\s+)?")
_REMOVE_FIRST_RE = lazy_compile(_REMOVE_VERB, re.I)


_BACK_RE = lazy_compile(r"\b(?:again|back|restor\w*|re-?add\w*|re-?introduc\w*|re-?pin\w*)\b", re.I)


def brought_back(old: str, new: str) -> str | None:
    """`old` removed or unpinned a name and `new` brings it back: pins it again ("Unpin Sphinx
    again" then "Add sphinx<9 pin") or says so ("restore", "re-add", "... back"). The name."""
    ko, kn = subject_keys(old), subject_keys(new)
    said = strip_refs(old)
    verb = _REMOVED_RE.search(said)
    if not ko or ko != kn or not verb or _REMOVED_RE.search(strip_refs(new)):
        return None
    if not _removes_a_name(said, verb, ko):
        return None  # "Remove support for Click 7" removed a version, not Click (fastapi/typer 0.12.0)
    key = next(iter(ko)) if len(ko) == 1 else None
    if (key and _PIN_RE.search(strip_refs(new))) or _BACK_RE.search(strip_refs(headline(new))):
        return ", ".join(sorted(ko))
    return None


# git's `Revert "<subject>"`, perhaps with a why after it ('Revert "Pass through gunicorn timeout
# config." due to unexpected side effects.', a changelog item of encode/uvicorn 0.11.5)
_REVERT_RE = lazy_compile(r'^\s*revert(?:s|ed)?:?\s+"(.+)"(?:[\s.,;:].*)?$', re.I)


def reverts(old: str, new: str) -> bool:
    """`new` is the revert of `old`: `Revert "<old's subject>"` as git writes it, or in prose
    ("Revert the `8.3.3` change that exposed the original file descriptor via `fileno()`" of
    "Expose original file descriptor in `CliRunner`"): what `old` did is undone, so the revert is
    the current state of that subject."""
    m = _REVERT_RE.match(strip_refs(headline(new)))
    if m:
        # (a gitmoji the quoted subject kept, "⏪ Revert \"✨ Add X\"", is no word of it)
        said = " ".join(strip_refs(re.sub(r"^[^\w\"'`]+", "", m.group(1))).lower().split()).rstrip(".")
        return bool(said) and said == " ".join(strip_refs(headline(old)).lower().split()).rstrip(".")
    prose = _PROSE_REVERT_RE.search(strip_refs(headline(new)))
    if not prose or _PROSE_REVERT_RE.search(old):
        return False
    # (a changelog category and "fix" are no words of the change: "Fixed: Fixed deadlock in live" is not
    # undone by "Reverted thread-safety fix for Live that introduced deadlock potential", Textualize/rich)
    stated = _stems(re.sub(r"^\s*[A-Z][a-z]+:\s+", "", strip_refs(headline(old))))
    undone = _stems(prose.group(1))
    shared = undone & stated
    return len(shared) >= 3 and len(shared) >= 0.5 * len(stated)


_PROSE_REVERT_RE = lazy_compile(r"\brevert(?:s|ed|ing)?\s+(?!\")(.{10,200})", re.I)
_STEM_STOP = frozenset("""the a an to of in on for and or that which this was were is are be by with via from as it its
    change changes changed commit pr default fix fixed fixes""".split())


def _stems(text: str) -> set[str]:
    """Content words, crudely stemmed ("exposed" and "Expose" are one), for the prose revert."""
    out = set()
    # (a camel-case name is its words: "revert iteration speed column" undoes "Add new column object:
    # IterationSpeedColumn", Textualize/rich)
    words = [w.lower() for tok in re.findall(r"[A-Za-z][A-Za-z0-9_]+", text.replace("`", ""))
             for w in (camel_parts(tok) or [tok])]
    for w in words:
        if len(w) < 2 or w in _STEM_STOP:
            continue
        out.add(re.sub(r"(?:ing|ed|es|e|s)$", "", w) if len(w) > 4 else w)
    return out


# (a product's name before it, "Gin version 1.12.0 was released", is still the project's own release)
_RELEASE_RE = lazy_compile(r"^(?:[A-Za-z][\w.\-]*\s+)?version (\S+) was released\b", re.I)
# a workspace crate's release commit, the whole text: "ignore-0.4.33", "grep-cli-0.1.12" (BurntSushi/ripgrep)
_CRATE_RELEASE_RE = lazy_compile(r"^([A-Za-z][\w.\-]*?)-v?(\d+(?:\.\d+)+[\w.\-+]*)$")


def _release(text: str) -> tuple[str, str] | None:
    """(package, version) of a release statement: memcli.services.changelog's "Version X was released"
    (the project's own, package "") or a workspace crate's release commit; None otherwise."""
    text = text.strip()
    m = _RELEASE_RE.match(text)
    if m:
        return "", m.group(1)
    m = _CRATE_RELEASE_RE.match(text)
    return (m.group(1).lower(), m.group(2)) if m else None


def release_change(old: str, new: str) -> str | None:
    """Both texts are releases of one package: the newer release is the current one ("0.27.0 ->
    0.28.0"); which is newer is the dates' business (add orders by them)."""
    ro, rn = _release(old), _release(new)
    if not ro or not rn or ro[0] != rn[0] or ro[1] == rn[1]:
        return None
    return f"{ro[0]} {ro[1]} -> {rn[1]}".lstrip()


def version_key(version: str) -> tuple[int, ...]:
    """"0.27.2" -> (0, 27, 2): release versions compared as numbers."""
    return tuple(int(x) for x in re.findall(r"\d+", version)[:4])


def older_release(old: str, new: str) -> bool:
    """Both are releases of one package and `new` names the lower version (two releases of one day)."""
    ro, rn = _release(old), _release(new)
    return bool(ro and rn) and ro[0] == rn[0] and version_key(rn[1]) < version_key(ro[1])
