"""Scrub secrets and personal data from text before it is stored or sent to an LLM.

``redact(text)`` returns the scrubbed text and the sorted kinds found; each secret becomes a
placeholder such as ``[REDACTED:email]``, so a memory still reads naturally and says what was there.

Precision first, because developer notes are full of things that *look* like secrets: versions,
dates, ports, paths and hashes must survive, so every pattern is anchored on something distinctive
(a provider prefix, a key name, an ``@``, a ``+``) and the ambiguous ones are checked in code (Luhn
for cards, digit counts for phones, octets for IPs). Names that tell where a secret was stay
(``password=[REDACTED:password]``); placeholders and code (``$DB_PASSWORD``, ``password: str``) are
left alone. Loopback, ``0.0.0.0`` and netmasks identify nothing and stay; every other IPv4 goes.
Each rule is one linear regex pass, skipped when a substring test shows it cannot match: hooks
redact on a tight time budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["KINDS", "placeholder", "redact"]

KINDS = (
    "anthropic_key", "auth_header", "aws_access_key", "aws_secret", "credit_card", "email", "github_token",
    "gitlab_token", "ipv4", "jwt", "openai_key", "password", "phone", "private_key", "secret", "slack_token",
    "url_password",
)

_NOT_PLACEHOLDER = r"(?!\[REDACTED:)"


def placeholder(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


# A value that stands for a secret rather than being one: variables, templates, masks.
_PLACEHOLDER_VALUE = re.compile(
    r"""\$\{?[A-Za-z_][\w.-]*\}?       # $VAR, ${VAR}
      | \{\{.*\}\} | \{%.*%\}           # {{ template }}, {% tag %}
      | <[^<>]*> | \{[^{}]*\}?           # <password>, {api_key} (f-strings), a lone "{"
      | (?i:your|example|dummy|fake|mock)[-_ ].*   # your-api-key, YOUR_TOKEN
      | os\.environ.*                   # litellm config: os.environ/OPENAI_API_KEY
      | %\(\w+\)s | %s                  # printf-style
      | [*•.]{2,} | [xX]{3,} | .*(?:\.\.\.|…)   # ****, xxxx, sk-... (a truncated example)
      | .*\$[({].*                      # shell substitutions: sk-$(openssl rand -hex 32)
      | \[REDACTED:\w+\]
    """,
    re.X,
)
# An unquoted value that is code or a type, not a secret: `password: str`, `token=None`,
# `api_key=os.environ["KEY"]`, `secret=get_secret()`, `token=self.token`.
_CODE_WORDS = frozenset(
    "str string int bool bytes none null nil undefined true false optional any object number "
    "secretstr required optional env environ getenv await lambda self cls new or and not is in if else "
    "function".split()
)
_CODE_VALUE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|.*[()\[\]].*|[A-Z][A-Za-z]*\[.*")


def _is_placeholder(value: str) -> bool:
    return not value.strip() or _PLACEHOLDER_VALUE.fullmatch(value.strip()) is not None


# (replacement, kind) for a match, or None to leave it unchanged (a false positive)
Replacement = tuple[str, str] | None


def _whole(kind: str) -> Callable[[re.Match[str]], Replacement]:
    return lambda m: (placeholder(kind), kind)


def _replaced(m: re.Match[str], start: int, end: int, kind: str) -> Replacement:
    """The match with only `start:end` (positions in the text) replaced, keeping what surrounds it."""
    base, whole = m.start(), m.group(0)
    return whole[: start - base] + placeholder(kind) + whole[end - base :], kind


def _swap(m: re.Match[str], kind: str, group: str = "value") -> Replacement:
    """Replace only the named group (key names, schemes, users stay)."""
    return None if _is_placeholder(m.group(group)) else _replaced(m, *m.span(group), kind)


# -- provider tokens ---------------------------------------------------------------------------
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
    # A whole block (the body stops at the next "-----", so a run of BEGINs stays linear) ...
    r"(?:(?:(?!-----)[\s\S]){0,20000}-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
    # ... or, when the END line is missing, the key lines that follow.
    r"|(?:\r?\n(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+:[^\n]*)[ \t]*)*)"
)
_JWT = re.compile(r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*(?![\w-])")
_ANTHROPIC = re.compile(r"(?<![\w-])sk-ant-(?:[a-z]+\d*-)?[A-Za-z0-9_-]{20,}")
_OPENAI = re.compile(r"(?<![\w-])sk-(?:proj-|svcacct-|admin-|None-)?(?=[A-Za-z0-9_-]{0,250}\d)[A-Za-z0-9_-]{20,}")
_GITHUB = re.compile(r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{22,255})(?!\w)")
_GITLAB = re.compile(r"(?<![\w-])gl(?:pat|dt|rt|ptt|ft|cbt|oas)-[A-Za-z0-9_-]{20,}")
_SLACK = re.compile(r"(?<![\w-])(?:xox[baprs]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})")
_AWS_KEY = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])")
_AWS_SECRET = re.compile(
    r"(?i)\b(?:aws_?)?secret_?(?:access_?)?key(?:_id)?[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?P<value>" + _NOT_PLACEHOLDER + r"[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)

# -- credentials next to their names -----------------------------------------------------------
_URL_PASSWORD = re.compile(
    r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/?#@\[\]\"'<>`]*:(?P<value>" + _NOT_PLACEHOLDER + r"[^\s/?#\"'<>`]+)@"
)
_AUTH_HEADER = re.compile(
    r"(?i:\b(?:proxy-)?authorization)[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*"
    r"(?P<scheme>(?i:bearer|basic|token|digest|negotiate|apikey|key)[ \t]+)?"
    r"(?P<value>" + _NOT_PLACEHOLDER + r"[^\s\"',;`]{6,})"
    # Without the header name, only a credential-looking value after a capitalised scheme, so
    # "Basic authentication" or "Bearer tokens expire" stay.
    r"|\b(?:Bearer|Basic)[ \t]+(?P<bare>" + _NOT_PLACEHOLDER + r"(?=[A-Za-z0-9._~+/-]*[0-9+/=])"
    r"[A-Za-z0-9._~+/-]{16,}=*)"
)

_SECRET_KEY_NAME = (
    r"(?:[A-Za-z0-9]+[_.-])*?"
    r"(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey"
    r"|(?:secret|private|access|signing|encryption|master|client)[_-]?key"
    r"|(?:db|database|mysql|postgres|pg|redis|smtp|admin|root|user|ftp)[_-]?(?:pass|pwd))"
)
_ASSIGNMENT = re.compile(
    r"(?<![\w$.-])(?P<key>" + _SECRET_KEY_NAME + r")(?![\w-])[\"']?"
    r"(?P<sep>[ \t]*[:=](?![=])[ \t]*|[ \t]+(?=[\"']))"
    r"(?:\"(?P<dq>[^\"\n]{1,300})\"|'(?P<sq>[^'\n]{1,300})'|(?P<bare>(?![=\"'`])[^\s\"',;`]{1,300}(?<![)}\]])))",
    re.I,
)
_FLAG = re.compile(
    r"(?<![\w-])--(?P<key>password|passwd|token|api-key|secret|client-secret)(?:=|[ \t]+)"
    r"(?P<value>" + _NOT_PLACEHOLDER + r"(?!-)[^\s\"'`]+)",
    re.I,
)

# -- credentials in words ----------------------------------------------------------------------
# "the admin password is letmein", "log in as admin with s3cret": no key=value shape. The value
# must not be an ordinary word ("the password is stored in Vault").
_IN_WORDS = re.compile(
    r"\b(?P<key>pass(?:word|wd|phrase|code)|pwd|pin(?:\s+code)?)"
    r"(?:\s+(?:for|of|on|to)\s+(?:the\s+)?[\w.@-]+(?:\s+(?:account|user|server|box|db|database))?)?"
    r"(?:\s*[:=]\s*|\s+(?:(?:has\s+been|was|is|got)\s+(?:changed|set|reset|updated)\s+to|is|was|will\s+be"
    r"|remains|stays)\s+)(?:now\s+|still\s+|currently\s+|just\s+)?[\"'`]?"
    r"(?P<value>" + _NOT_PLACEHOLDER + r"[^\s\"'`,;]{3,200})"
    r"|\blog(?:\s?in|\s?on)?\s+(?:(?:to|on|into)\s+\S+\s+)?as\s+[\"'`]?[^\s,\"'`]+[\"'`]?\s+(?:with|using|and)\s+"
    r"(?:(?:the\s+)?(?:password|pass|pw|pwd)\s+)?[\"'`]?(?P<login>" + _NOT_PLACEHOLDER + r"[^\s\"'`,;]{3,200})"
    r"|\b(?P<tkey>(?:api|access|secret|deploy|auth|bearer|bot|personal\s+access)\s+(?:key|token)|token)"
    r"\s+(?:is|was|=|:)\s+[\"'`]?(?P<token>" + _NOT_PLACEHOLDER + r"[^\s\"'`,;]{8,300})",
    re.I,
)
_ORDINARY = frozenset(
    "the a an in on at to from via into stored kept managed rotated required set changed reset not never "
    "always only saved shared available expired same different too still now being generated random strong "
    "weak long short hashed encrypted sent given provided listed located defined configured also either "
    "empty blank optional mandatory necessary needed there here this that it your our their my his her its "
    "whatever unknown missing wrong correct valid invalid secret secure public private used unused none null "
    "known unchanged in-vault vault 1password bitwarden keepass lastpass documented printed written what which "
    "case-sensitive sensitive updated disabled enabled off on see check ask use read get find look contact "
    "request".split()
)


def _word_like(value: str) -> bool:
    """An ordinary word, not a credential: in the stop list, or letters ending like a word does."""
    v = value.rstrip(".!?)").lower()
    return v in _ORDINARY or (v.isalpha() and v.endswith(("ed", "ing", "ly", "ion", "ment", "able")))


def _in_words(m: re.Match[str]) -> Replacement:
    group = next(g for g in ("value", "login", "token") if m.group(g) is not None)
    core = m.group(group).rstrip(".!?)")
    if _is_placeholder(core) or _word_like(core) or (group != "token" and _code_like(core, ":")):
        return None
    start = m.start(group)
    after = m.string[start + len(core): start + len(core) + 40]
    if core.isalpha() and re.match(r"[ \t]+(?:the|a|an|in|on|at|for|from|with|your|our|it|that|this|them)\b",
                                   after, re.I):
        return None  # "password: see the vault": prose goes on after the "value"
    if group == "token" and not (re.search(r"[\d_\-/+=]", core) and re.search(r"[A-Za-z]", core)):
        return None  # "the token is refreshed hourly": a token needs the shape of one
    return _replaced(m, start, start + len(core), "secret" if group == "token" else "password")


# "sets the password to "Snoppy23"", "your password "Snoppy23" works": a password in a sentence,
# quoted, or shaped like one (a digit or a symbol in it).
_PASSWORD_IN_PROSE = re.compile(
    r"\b(?:set|sets|setting|change[sd]?|changing|reset|resets|resetting|update[sd]?|updating|use[sd]?|using)\s+"
    r"(?:the\s+|a\s+|an\s+|its\s+|their\s+|his\s+|her\s+|my\s+|our\s+|your\s+)?(?:[\w-]+\s+){0,2}?"
    r"(?:password|passphrase|passcode|passwd|pwd)\s+(?:to|as|=|:)\s*[\"'`“‘]?(?P<value>" + _NOT_PLACEHOLDER
    + r"[^\s\"'`”’,;]{3,200})"
    r"|\b(?:password|passphrase|passcode|passwd)\b[^\"'`“‘\n.;]{0,40}?[\"“‘`](?P<quoted>" + _NOT_PLACEHOLDER
    + r"[^\s\"'`”’]{4,128})[\"”’`]"
    r"|\b(?:password|passphrase|passcode)\s+(?P<shaped>" + _NOT_PLACEHOLDER
    + r"(?=[^\s\"'`]*\d)(?=[^\s\"'`]*[A-Za-z])[^\s\"'`,;]{4,128})",
    re.I,
)


def _password_in_prose(m: re.Match[str]) -> Replacement:
    group = next(g for g in ("value", "quoted", "shaped") if m.group(g) is not None)
    core = m.group(group).rstrip(".!?)")
    if _is_placeholder(core) or _word_like(core) or core.startswith(("$", "{", "%", "<", "/")):
        return None
    if group == "quoted" and not re.search(r"[\d\W_]|[a-z][A-Z]", core):
        return None  # a quoted word ("the "Forgot password" link") is a label, not a secret
    if group == "quoted" and re.search(r"\b(?:in|into|for|of|with|by|from|on|at|via|when|after|before)\W*\Z",
                                       m.string[m.start():m.start(group)], re.I):
        return None  # "Fix replacing password to asterisks in `pip-compile`" (jazzband/pip-tools): code named
    if group == "value" and _code_like(core, ":") and not re.search(r"\d", core):
        return None
    start = m.start(group)
    return _replaced(m, start, start + len(core), "password")


# -- personal data -----------------------------------------------------------------------------
_FILE_TLDS = frozenset(
    "png jpg jpeg gif svg webp ico bmp tif tiff pdf js mjs cjs ts tsx jsx py pyc rb rs go java kt "
    "md rst txt json yaml yml toml ini cfg conf lock css scss html htm xml csv log sh zsh bash ps1 "
    "so dll exe bin wasm zip gz tgz tar whl vue svelte php swift lua sql".split()
)
_EMAIL = re.compile(
    r"(?<![\w.%+/-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+(?P<tld>[A-Za-z]{2,24})\b"
    r"(?!:[\w~/])(?![-@])"  # not an SSH remote (git@github.com:org/repo)
)
_CARD = re.compile(r"(?<![\w.+-])[2-6]\d{3}(?:[ -]?\d){9,15}(?![\w-]|\.\d)")
_PHONE_INTL = re.compile(r"(?<![\w+])\+(?:\d{8,15}|\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]\d{1,5}){1,6})(?![\w]|[.-]\d)")
_PHONE_US = re.compile(r"(?<![\w+.$-])(?:\([2-9]\d\d\)[ \t]?|[2-9]\d\d[-. ])\d{3}[-. ]\d{4}(?![\w-]|\.\d)")
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_VERSION_BEFORE = re.compile(r"(?i)(?:\b(?:version|release|build|ver\.?|rev\.?)[ \t:]*|(?:==|>=|<=|~=|!=)[ \t]*)\Z")
# a bump's values ("Bump types-chardet from 5.0.3 to 5.0.4.2", encode/httpx@978e5bbe); a bare
# "from 10.0.0.1 to 10.0.0.2" is a move of hosts and stays redacted
_BUMP_BEFORE = re.compile(r"(?i)\b(?:bumps?|bumped|updates?|updated|upgrades?|upgraded|downgrades?|downgraded)[ \t]+"
                          r"(?!(?:the|a|our|host|server|ip|address|addr|db|database|proxy|dns|gateway|endpoint|node|vm)\b)"
                          r"\[?`?[a-z][\w.\-\[\]/]*`?\]?(?:\([^)\s]*\))?[ \t]+(?:requirement[ \t]+)?from[ \t]+`?"
                          r"(?:v?\d[\w.+-]*`?[ \t]+to[ \t]+`?)?\Z")
_BUMP_TABLE_ROW = re.compile(r"[ \t]*\|[ \t]*\[[\w.\-]+\]\(https?://[^)\s]*\)[ \t]*\|")
_IPV4 = re.compile(r"(?<![\w.])" + _OCTET + r"(?:\." + _OCTET + r"){3}(?![\w]|\.\d)")


def _aws_secret(m: re.Match[str]) -> Replacement:
    # 40 hex characters is a SHA-1 (a git commit), never an AWS secret in practice.
    return None if re.fullmatch(r"[0-9a-f]{40}", m.group("value")) else _swap(m, "aws_secret")


_AUTH_SCHEMES = frozenset("bearer basic token digest negotiate apikey key".split())


def _auth_header(m: re.Match[str]) -> Replacement:
    group = "value" if m.group("value") is not None else "bare"
    value = m.group(group)
    if value.lower() in _AUTH_SCHEMES or value.lower() == "authorization":
        return None  # "Authorization: Bearer" at the end of a line: the scheme, no credential
    if group == "value" and not m.group("scheme") and _code_like(value, ":"):
        return None  # `authorization: Optional[str]`, `authorization = request.headers[...]`
    return _swap(m, "auth_header", group)


# Identifiers: a secret is random, these are names (`api_key=dynamic_api_key`, `API_KEY=ENV_NAME`).
_SNAKE = re.compile(r"_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)+|_*[A-Z][A-Z0-9]*(?:_+[A-Z0-9]+)+")
_CAMEL_TYPE = re.compile(r"_*(?:[A-Z][a-z0-9]+){2,}(?:\[.*)?")
_FLOAT = re.compile(r"[-+]?\d*\.\d+(?:e[-+]?\d+)?", re.I)


def _code_like(v: str, sep: str) -> bool:
    """Whether an unquoted value is code (a type, a name, an expression, a number), not a secret."""
    v = v.rstrip(".")
    return bool(
        v.lower() in _CODE_WORDS
        or _CODE_VALUE.fullmatch(v)
        or _SNAKE.fullmatch(v)
        or (":" in sep and _CAMEL_TYPE.fullmatch(v))  # a type annotation: `token: AccessToken`
        or _FLOAT.fullmatch(v)
        or re.fullmatch(r"\d{1,5}", v)  # a count, a length, a port
        or v.startswith(("/", "~/", "./", "../", "{", "("))  # a key file's path, a dict, a tuple
    )


# Key parts that make a "token"/"key" name a setting rather than a credential.
_NOT_CREDENTIAL_PARTS = frozenset(
    "max min num n total count next prev page pad bos eos unk sep cls mask cost per limit size len "
    "length ttl expires expiry".split()
)


def _assignment(m: re.Match[str]) -> Replacement:
    key = m.group("key")
    kind = "password" if re.search(r"pass|pwd", key, re.I) else "secret"
    low = key.lower()
    parts = re.split(r"[_.-]", low)
    if _NOT_CREDENTIAL_PARTS.intersection(parts[:-1]):
        return None  # max_token=512, pad_token="[PAD]", input_cost_per_token=...: settings
    group = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
    value = m.group(group)
    if _is_placeholder(value) or low.endswith(value.strip().lower()):
        return None  # API_KEY = "api_key", "MEMCLI_API_KEY": "api_key": names, not values
    if group == "bare":
        v = value.strip()
        if _code_like(v, m.group("sep")):
            return None
        # "token: expires hourly" is prose; after a colon ask for something secret-looking.
        if ":" in m.group("sep") and not (re.search(r"[\d\W_]", v) or len(v) >= 12):
            return None
    return _swap(m, kind, group)


def _flag(m: re.Match[str]) -> Replacement:
    return _swap(m, "password" if "pass" in m.group("key").lower() else "secret")


def _email(m: re.Match[str]) -> Replacement:
    return None if m.group("tld").lower() in _FILE_TLDS else (placeholder("email"), "email")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_CARD_GROUPS = {(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 4, 4, 4, 2), (4, 4, 4, 4, 1), (4, 6, 5), (4, 6, 4), (4, 4, 5)}


def _card(m: re.Match[str]) -> Replacement:
    raw = m.group(0)
    digits = re.sub(r"\D", "", raw)
    if not 13 <= len(digits) <= 19 or not _luhn(digits) or len(set(digits)) == 1:
        return None
    seps = set(re.findall(r"[ -]", raw))
    if len(seps) > 1:
        return None
    if seps:
        groups = re.split(r"[ -]", raw)
        if tuple(len(g) for g in groups) not in _CARD_GROUPS:
            return None  # cards are printed 4-4-4-4 (Amex 4-6-5); "1234 56789 ..." is something else
        steps = {int(groups[i + 1]) - int(groups[i]) for i in range(len(groups) - 1)}
        if len(groups) >= 4 and len(steps) == 1 and steps != {0}:
            return None  # "3000 3001 3002 3003": a list of ports or IDs, not a card
    return placeholder("credit_card"), "credit_card"


def _phone_intl(m: re.Match[str]) -> Replacement:
    return (placeholder("phone"), "phone") if 8 <= sum(c.isdigit() for c in m.group(0)) <= 15 else None


def _ipv4(m: re.Match[str]) -> Replacement:
    ip = m.group(0)
    if ip.startswith(("127.", "255.")) or ip == "0.0.0.0":
        return None  # loopback, "any address" and netmasks identify nothing
    before = m.string[max(0, m.start() - 160):m.start()]
    if _VERSION_BEFORE.search(before) or _BUMP_BEFORE.search(before):
        return None  # "version 1.2.3.4", "build 10.0.1.2", "==1.2.3.4", "Bump x from 5.0.4.1 to 5.0.4.2"
    if _BUMP_TABLE_ROW.match(before[before.rfind("\n") + 1:]):
        return None  # a grouped bump's table row: "| [types-pyyaml](https://…) | `6.0.12.12` | …"
    return placeholder("ipv4"), "ipv4"


# (pattern, replace, hints): a rule is skipped when none of its hints occurs in the lowercased
# text (no hints: always run). Order matters: prefixed tokens first (so `api_key=sk-...` is an
# OpenAI key), then credentials found by their names, then personal data.
_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Replacement], tuple[str, ...]], ...] = (
    (_PRIVATE_KEY, _whole("private_key"), ("private key-----",)),
    (_JWT, _whole("jwt"), ("eyj",)),
    (_ANTHROPIC, _whole("anthropic_key"), ("sk-ant-",)),
    (_OPENAI, _whole("openai_key"), ("sk-",)),
    (_GITHUB, _whole("github_token"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    (_GITLAB, _whole("gitlab_token"), ("gl",)),
    (_SLACK, _whole("slack_token"), ("xox", "xapp-")),
    (_AWS_KEY, _whole("aws_access_key"), ("akia", "asia", "abia", "acca")),
    (_AWS_SECRET, _aws_secret, ("secret",)),
    (_URL_PASSWORD, lambda m: _swap(m, "url_password"), ("://",)),
    (_AUTH_HEADER, _auth_header, ("authorization", "bearer", "basic")),
    (_ASSIGNMENT, _assignment, ("pass", "pwd", "secret", "token", "key")),
    (_FLAG, _flag, ("--",)),
    (_IN_WORDS, _in_words, ("pass", "pwd", "pin", "log", "token", "key")),
    (_PASSWORD_IN_PROSE, _password_in_prose, ("pass", "pwd")),
    (_EMAIL, _email, ("@",)),
    (_CARD, _card, ()),
    (_PHONE_INTL, _phone_intl, ("+",)),
    (_PHONE_US, _whole("phone"), ()),
    (_IPV4, _ipv4, (".",)),
)


def redact(text: str) -> tuple[str, list[str]]:
    """``text`` with secrets and personal data replaced by ``[REDACTED:<kind>]``, and the sorted kinds found."""
    if not text:
        return text, []
    found: set[str] = set()
    low = text.lower()
    for pattern, replace, hints in _RULES:
        if hints and not any(h in low for h in hints):
            continue

        def sub(m: re.Match[str], replace: Callable[[re.Match[str]], Replacement] = replace) -> str:
            out = replace(m)
            if out is None:
                return m.group(0)
            found.add(out[1])
            return out[0]

        text = pattern.sub(sub, text)
    return text, sorted(found)
