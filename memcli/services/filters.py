"""One junk filter for every path that turns conversation text into memories.

`add`, `import --from claude-code|chatgpt` and `capture claude-code` all ask `junk_class`, so a
sentence is never filler on one path and a memory on another (classes: narration, injected,
tool_output, git_output, ui_chatter, api_error, filler, request, fragment). `strip_injected` removes
a harness's injected blocks from a turn first. Regexes only: this runs on every sentence of long
transcripts.
"""

from __future__ import annotations

import re

__all__ = ["junk_class", "strip_injected", "is_request"]

# Blocks a harness or an IDE wraps into a user turn: dropped with their content.
_INJECTED_BLOCK = re.compile(
    r"<(system-reminder|task-notification|ide_opened_file|user-prompt-submit-hook|local-command-stdout"
    r"|local-command-stderr|command-name|command-message|command-args|event|summary)\b[^>]*>.*?</\1>",
    re.S,
)
# An IDE selection is what the user pointed at: its text stays, the wrapper goes.
_SELECTION_BLOCK = re.compile(r"<ide_selection>(.*?)</ide_selection>", re.S)
_SELECTION_TAG = re.compile(r"</?ide_selection>|^The user selected the lines \d+ to \d+ from \S+:\s*"
                            r"|\s*This may or may not be related to the current task\.?", re.M)
_INJECTED = re.compile(
    r"<(?:/?(?:task-notification|system-reminder|task-id|tool-use-id|output-file|status)|summary>|/?event>)"
    r"|\[Request interrupted by user|^Caveat: The messages below|^Base directory for this skill"
    r"|^This session is being continued from a previous conversation|Monitor event:"
    r"|This may or may not be related to the current task",
    re.I,
)
_API_ERROR = re.compile(r"^(?:API Error: |\{\"type\":\s*\"error\")|^(?:Error: )?(?:Request timed out|Overloaded)\b")

_LEAD = re.compile(r"^[\s>*_#⏺●•\-–—]+")
_NARRATION = re.compile(
    r"^(?:"
    # plans and steps: "Let me ...", "Now I'll ...", "Next, I ...", "I'm going to ..."
    r"let me\b|let's\b|now,? (?:i|let|we|let's|the (?:next|last))\b|next,? (?:i|let|we)\b|first,? (?:i|let)\b"
    r"|then,? i\b|i(?:'ll| will| need to| have to| am going to|'m going to| want to| should| can| could| now)\b"
    r"|i'm (?:going|now|about|ready|done|checking|looking|adding|writing|running)\b"
    r"|i(?:'ve| have) (?:now |also |just )?(?:got|gathered|collected|read|reviewed|checked|confirmed|verified"
    r"|finished|completed|enough|everything|a (?:clear|good|complete|full))\b"
    # what it just did: "I also corrected the label ...", "I reverted ..."
    r"|i (?:also |just |then |now )?(?:corrected|fixed|updated|added|changed|removed|created|wrote|ran|made|moved"
    r"|renamed|reverted|restored|committed|pushed|deployed|installed|tested|verified|checked|confirmed|found|noticed"
    r"|replaced|rewrote|split|merged|dropped|kept|left|tightened|reworded|applied|implemented|started|stopped)\b"
    # status words: "Perfect!", "Great, ...", "Done.", "All 31 tests pass."
    r"|(?:perfect|great|excellent|good|done|ok(?:ay)?|alright|got it|nice|awesome|cool|right|sure|yes|understood"
    r"|all set|all good|confirmed|verified|finished|complete|success|works)\b\s*[.!,:—–-]"
    r"|all \d+ (?:tests?|checks?|specs?|examples?|cases?)\b|(?:tests?|build|lint|ci) (?:pass|passes|passed|green)\b"
    r"|now i (?:have|see|understand|know)\b|now (?:everything|it|the app|the tests?|both|all)\b"
    # gerund progress lines: "Writing analyzer in parallel.", "Now auditing ..."
    r"|(?:now |still |first |also )?(?:writing|running|checking|starting|continuing|waiting|looking|fetching|reading"
    r"|updating|creating|adding|building|testing|verifying|installing|launching|exploring|searching|investigating"
    r"|reverting|auditing|committing|pushing|deploying|reviewing|analy[sz]ing|examining|inspecting|polling|retrying"
    r"|moving on|kicking off|spinning up|setting up|cleaning up|wrapping up)\b"
    # offers and sign-offs: "If you want, I can ...", "Let me know ..."
    r"|if you(?:'d)? (?:want|like|prefer|can|need|have)\b|want me to\b|shall i\b|should i\b|would you like\b"
    r"|feel free\b|happy to\b|hope (?:this|that) helps\b|(?:here's|here is) (?:what|the plan|a summary|my plan)\b"
    r"|(?:it )?(?:seems|looks like) (?:the )?(?:code )?(?:environment|session|sandbox)\b"
    r"|chunk \d+\b|(?:step|phase) \d+ (?:is )?(?:done|complete|finished)\s*[.!]?$"
    # "Now the progress bar partial, ...", "Ready for Phase 4 ...", "Back to the original 11 ..."
    r"|now (?:the|a|an|both|editing|deleting|smoke|wiring|on to|for|to)\b|ready (?:for|to|when)\b|remaining\b"
    r"|no code yet\b|back to\b|need from you\b|working tree\b|nothing (?:failed|else|to)\b|before (?:writing|i|we)\b"
    r"|per your\b|you only asked\b|while (?:the |that |it |fetch|we wait)|when (?:the )?\w+(?: \+ \w+)* finish"
    r"|currently (?:on|running|fetching|waiting)\b|all \d+ tasks?\b"
    r"|\d+ (?:chunks?|tasks?|steps?|pages?) (?:of \w+ )?left\b"
    r"|(?:\w+ ){0,3}(?:done|complete|finished) [—–-]|it (?:will|'ll) (?:take|auto)|(?:streamlit|render|vercel|ci)"
    r" (?:cloud )?will auto"
    r")",
    re.I,
)
# First person future anywhere in a short sentence: "When fetch finishes, I'll push an update."
# A reason or a trade-off in it ("I'll drop X and declare Y instead, which keeps Z") keeps it.
_FIRST_PERSON_PLAN = re.compile(r"\b(?:i(?:'ll| will|'m going to| am going to)|so i can|let me|i'd suggest)\b", re.I)
_REASON = re.compile(r"\b(?:because|since|instead|so that|which (?:keeps|means|avoids|makes)|otherwise|due to"
                     r"|caused by|the cause|root cause|trade-?off)\b", re.I)
# Offers and hand-backs anywhere in a sentence: "... Say the word and I'll do it.", "... if you want me to
# draft that section next.", "Next up whenever you're ready: ..."
_OFFER = re.compile(
    r"\b(?:if you want me to|if you'd like me to|say the word|whenever you(?:'re| are) ready|when you(?:'re| are) ready"
    r"|let me know (?:if|when|whether)|want me to\b|shall i\b|i didn't (?:touch|write|change)|leaving it alone"
    r"|send me the|paste it (?:here|back)|ready for (?:phase|step)|next up\b|still open:"
    r"|no (?:source|code|test) (?:or \w+ )?files? (?:touched|changed)|repo state unchanged|everything (?:works|matches)"
    r"|(?:fix|it) confirmed working|clean lint|no offenses|working through\b|one thing to flag|re-?tested end-to-end"
    r"|verified via\b|cleaned up \(|i can't (?:actually )?verify|i did not\b)",
    re.I,
)
# An assistant's sentence that opens with a gerund is a progress line ("Now updating PLAN.md so ...",
# "Deriving `complete` from the scan ..."), unless the gerund is the subject ("Running X prints Y").
#: a section heading joined to its paragraph ("Deploying to staging: Build the image ..."): a runbook
#: step, not an agent's progress line; what follows the title is judged instead
_GERUND_TITLE = re.compile(r"^[A-Z][a-z]+ing\b[^:.!?\n]{0,60}:\s+(?=(?:\S+\s+){5})")
_GERUND_LEAD = re.compile(
    r"^(?:now |also |still |first |then |next,? )?(?!using\b)[a-z]+ing\b"
    r"(?! (?:is|are|was|were|has|makes|requires|needs|means|keeps|breaks|fails|works|takes|returns|prints|gives"
    r"|causes|should|must|can|will|would|does|did)\b)",
    re.I,
)
# "I'll drop the nested block and declare the route explicitly instead, which keeps ...": a decision.
_FIRST_PERSON_DECISION = re.compile(
    r"^(?:i(?:'ll| will)|we(?:'ll| will)) (?!continue|wait|check|look|start|keep going)", re.I)
# "Models and migrations are written and lint-clean.", "README is updated with the live URL."
_STATUS = re.compile(
    r"^[^.!?]{0,80}?\b(?:is|are|was|were|has been|have been|now)\s+(?:now\s+|all\s+|fully\s+)?"
    r"(?:complete|completed|done|ready|updated|written|verified|lint-clean|passing|green|committed|pushed|in place"
    r"|finished|implemented|fixed|working)\b(?: and (?:fully |all )?[\w-]+| now)?[.!]?$",
    re.I,
)
# CJK narration and filler: Korean polite plans ("정리해드릴게요"), Chinese progress ("我來...").
_CJK_NARRATION = re.compile(
    r"(?:드릴게요|드리겠습니다|할게요|볼게요|하겠습니다|해볼게요|해 ?보겠습니다|알려드릴게요|정리해드릴게요)\W*$"
    r"|^(?:좋아요|좋습니다|완벽합니다|네[,!.]|알겠습니다|맞아요|정확합니다)"
    r"|^(?:我(?:來|来|先|會|会|現在|现在)|讓我|让我|現在來|现在来|好的[,，!！]|完成[。!！]|接下來|接下来)"
    # offers: "필요하시면 ... 만들어드릴 수 있습니다", "원하면 ... 정리해줄게"
    r"|^(?:필요하시면|필요하면|원하시면|원하면|원한다면|궁금하시면)"
    r"|(?:드릴 수 있습니다|드릴까요|해줄게|줄게요?|할까요|볼까요)\W*$"
    r"|^我.{0,12}(?:會|会|來|来|先|再|拿到)|(?:停 ?timer|可以提交了|已更新|已 ?push|收尾)"
)
# Chat filler of a chatty assistant: jokes, coaching, one-line morals ("유머 한 스푼", "코치의 조언").
_FILLER = re.compile(
    r"유머|농담|코치의 조언|한 (?:문장|줄) 요약|마지막 (?:짧은 )?한 줄|비유하자면|재밌게 정리하면|😄|😂|🤣"
    r"|\b(?:fun fact|a bit of humou?r|in a nutshell|tl;dr)\b",
    re.I,
)
# Numbered Q/A labels of a chat log ("질문3 : ...", "**답변71 / 요지: ...**") and user questions
# in Korean ("... 뭐하는 프로그램이야", "... 입력방법은").
_CJK_LABEL = re.compile(r"^\W*(?:질문|답변|답|요지|question|answer)\s*\d*\s*[:/：]", re.I)
_CJK_QUESTION = re.compile(r"(?:이야|인가요|나요|까요|니\?|냐|뭐야|방법은|어떻게 해|알려줄래)\W*$")
_GIT_OUTPUT = re.compile(
    r"^(?:Enumerating objects|Counting objects|Compressing objects|Writing objects|Delta compression using"
    r"|Total \d+ \(delta|remote: |To (?:https?://|git@)\S+|\[remote rejected\]|! \[rejected\]|\d+ files? changed"
    r"|On branch \S+|Your branch is|Changes (?:not staged|to be committed)|Untracked files:|\(use \"git"
    r"|no changes added to commit|nothing to commit|warning: in the working copy|create mode \d+"
    r"|error: failed to push|hint: |Date:\s+\w{3} \w{3} \d|Author: .*<|commit [0-9a-f]{40}|\[[\w/.-]+ [0-9a-f]{7,}\] )",
)
_TOOL_OUTPUT = re.compile(
    r"^(?:\(\w+\)\s*)?PS [A-Z]:\\|^[\w.-]+@[\w.-]+:\S*[$#] |^>>> |^\s*at [\w.$<>]+\(|^(?:npm (?:warn|err)|Collecting "
    r"|Successfully installed|Requirement already satisfied|Downloading |Installing collected|\d+ passed|\d+ failed"
    r"|=+ (?:test session|FAILURES|\d+ passed)|PASS |FAIL |ok \d+ |not ok \d+|added \d+ packages"
    r"|Started (?:GET|POST)|Processing by|Completed \d{3}|Rendered |\s*File \".*\", line \d+)",
)
_UI_CHATTER = re.compile(
    r"^(?:the |each |a )?(?:\w+ )?(?:blue|red|green|orange|purple|gray|grey|black|yellow|dashed|dotted|solid|colou?red)"
    r"\b[^.]{0,40}\b(?:lines?|bars?|curves?|dots?|points?|areas?|regions?)\b.{0,40}\b(?:shows?|represents?|is|are|marks?)\b"
    r"|^here(?:'s| is) the (?:updated |re-run |new |final )?(?:graph|chart|plot|figure|image|visuali[sz]ation)\b"
    r"|^the (?:graph|chart|plot|figure) (?:now )?(?:shows|includes|displays)\b|^sign (?:in|up) with\b"
    r"|^(?:click|tap|press) (?:the|on)\b.{0,40}$",
    re.I,
)
# Words that make a short line a fact: a number, code, a path or URL, a name in CamelCase or snake_case.
_SPECIFIC = re.compile(
    r"\d|`|https?://|\w/\w|\.\w{1,4}\b|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w*|\b[A-Z]{2,}\b|--\w|[<>=]=?\s*\w",
)
_EMOJI_LEAD = re.compile("^[\U0001F300-\U0001FAFF\u2600-\u27BF\u2B50\u2705\u274C]")
_CODEISH = re.compile(r"`|https?://|[\w-]+\.(?:py|md|json|env|ya?ml|ps1|log|txt|toml|html|js|ts)\b|\b[A-Za-z]+_[A-Za-z_]+\b"
                      r"|\b(?:git|pip|python|npm|cd|uvicorn|docker)\b")
_ASCII_NAME = re.compile(r"\b[A-Za-z][A-Za-z0-9.+-]{2,}\b")
_CHAT_WORDS = frozenset("gpt chatgpt donald step ok yes auto-mode".split())
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")  # ChatGPT's citation markers
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_WORD = re.compile(r"[A-Za-z0-9_][\w'./+#-]*")
_HEADING_LIKE = re.compile(r"^(?:\*\*[^*]{1,80}\*\*|__[^_]{1,80}__|#{1,6} .*|[^.!?]{1,120}:(?:\*\*|__)?)\s*$")
#: a quoted example string alone, or a sentence cut at a comma: nothing said that stands alone
_QUOTED_OR_CUT = re.compile(r'^["“][^"“”]{3,}["”][.!?]?$|[,，、]$')
_TOC_LINE = re.compile(r"^_{2,}|^\d{1,2}-\d{1,2} |^\d{1,2}장[ .]")
_GLOSSARY = re.compile(r"^\*\*[^*]{1,40}\*\*\s*[:：]\s*")
_REQUEST = re.compile(
    r"^(?:please|pls|can you|could you|would you|will you|help me|explain|tell me|show me|give me|look into"
    r"|make sure|go ahead|continue|proceed|try|check|fix|add|remove|update|change|implement|write|create|build"
    r"|run|deploy|commit|push|now,? (?:let's|lets|do|make|add|fix|write|run|implement)|let's|lets|do not|don't"
    r"|go through|comb through|walk me|simplify|map each|record any|look at|review|verify|finish|export"
    r"|start|first|next|ok(?:ay)?,? (?:now|let's|lets|do|go)|i want (?:you|to see)|i need you|i'd like you)\b"
    r"|(?:알려줘|해줘|줘|주세요|해봐|할래|하자|해 ?주라|알려주세요|설명해줘)\W*$|^(?:請|请|幫我|帮我)",
    re.I,
)


def strip_injected(text: str) -> str:
    """A turn without the blocks its harness or IDE added; an IDE selection keeps its text, not its wrapper."""
    text = _PRIVATE_USE.sub("", text)
    if "<" in text:
        text = _INJECTED_BLOCK.sub(" ", text)
    if "<ide_selection>" in text:  # what the user typed first, then what they pointed at
        inside = "\n\n".join(_SELECTION_BLOCK.findall(text))
        text = f"{_SELECTION_BLOCK.sub(' ', text).strip()}\n\n{inside}"
    if "ide_selection" in text or "The user selected" in text or "may or may not be related" in text:
        text = _SELECTION_TAG.sub("", text)
    return text.strip()


def is_request(text: str) -> bool:
    """A user's instruction to the agent ("fix this ui", "...해줘"): the answer is what is kept."""
    return bool(_REQUEST.search(_LEAD.sub("", text).strip()))


def junk_class(text: str, *, role: str | None = None) -> str | None:
    """Why `text` is not worth a memory (a class name), or None to keep it; `role` "user" adds the
    request rule, "assistant" the progress-line rule."""
    flat = " ".join(_PRIVATE_USE.sub("", text).split())
    if not flat:
        return "fragment"
    if _INJECTED.search(flat):
        return "injected"
    if _API_ERROR.match(flat):
        return "api_error"
    body = _LEAD.sub("", flat)
    if not body:
        return "fragment"
    if body.startswith("remote: error:") and re.search(r"exceeds|limit|declined|denied", body):
        return None  # why a push failed: a failure and its cause
    if _GIT_OUTPUT.match(body):
        return "git_output"
    if _TOOL_OUTPUT.match(body):
        return "tool_output"
    prose = body.split("```", 1)[0].strip() or body
    if "```" in body and len(_WORD.findall(prose)) >= 2 and text.count("\n") >= 2:
        return None  # a statement with the code or output it introduces

    first_line = prose.split("\n", 1)[0]
    unbold = prose.replace("**", "")
    titled = _GERUND_TITLE.match(unbold)
    if titled:
        unbold = unbold[titled.end():]
    if _NARRATION.match(unbold) and not _worth_despite_narration(prose, body):
        return "narration"
    if _CJK_NARRATION.search(first_line):
        return "narration"
    if (_FIRST_PERSON_PLAN.search(prose) and not _REASON.search(prose) and len(_WORD.findall(prose)) < 30
            and "```" not in body):
        return "narration"
    if len(prose) < 160 and _STATUS.match(unbold) and not re.search(r"`|https?://", prose):
        return "narration"
    if _OFFER.search(prose):
        return "narration"
    if role == "assistant" and _GERUND_LEAD.match(unbold) and (
            re.match(r"^(?:now|also|still|first|then|next)\b", prose, re.I)
            or (len(_WORD.findall(prose)) < 14 and not _REASON.search(prose))):
        return "narration"
    if _UI_CHATTER.match(prose):
        return "ui_chatter"
    if _FILLER.search(prose[:80]):
        return "filler"
    if (_EMOJI_LEAD.match(prose) and len(_CJK.findall(prose)) >= 8 and not _CODEISH.search(prose)
            and len({w.lower() for w in _ASCII_NAME.findall(prose)} - _CHAT_WORDS) < 2):
        return "filler"  # a chatty tutor's emoji-headed advice with nothing to run, name or look up
    if _CJK.search(prose) and re.search(r"(?:원하시면|원하면|필요하시면).{0,80}(?:까요|드릴게요|줄게)", prose):
        return "narration"  # an offer inside a closing line: "정리 요약: 원하시면 ... 알려드릴까요?"
    if role == "user" and (is_request(prose) or _CJK_QUESTION.search(prose)):
        return "request"
    if _CJK_LABEL.match(unbold):
        return "fragment"
    if _TOC_LINE.match(flat.lstrip("\"'“ ")) or _TOC_LINE.match(body):
        return "pasted_code"  # a pasted table of contents ("__04-3 ...", "03장 ...")
    if prose.startswith(("→", "⇒", "➡")) and not _CODEISH.search(prose):
        return "fragment"  # "→ for example: reports, charts": the rest of a point made in the line before
    if _CJK.search(prose) and (m := _GLOSSARY.match(prose)) and len(prose) - m.end() < 45:
        return "fragment"  # "**시리즈**: 1차원 자료.": a glossary line of a tutorial
    return "fragment" if _is_fragment(prose) else None


def _worth_despite_narration(prose: str, body: str) -> bool:
    """An agent's report that still carries a finding: a reason, a shown result (a code block), or
    a long list of what was done ("Phase 1 is done: Tailwind installed, baseline linted clean.")."""
    if _REASON.search(prose) and len(_WORD.findall(prose)) >= 10 and _FIRST_PERSON_DECISION.match(prose):
        return True
    if "```" in body and body.count("```") >= 2 and len(body) - len(prose) > 60:
        return True
    return bool(re.match(r"^(?:phase|step) \d+ (?:is )?done\s*[:—–-]\s*\S.{40,}", prose.replace("**", ""), re.I))


def _is_fragment(prose: str) -> bool:
    """A heading, a label or a half sentence: too little said to stand alone."""
    plain = prose.replace("**", "").replace("__", "").strip()
    if (_HEADING_LIKE.match(prose) and "`" not in prose) or _QUOTED_OR_CUT.search(plain):
        return True
    cjk = len(_CJK.findall(plain))
    if cjk >= 4:  # Chinese / Korean / Japanese: words are not space separated
        return len(plain) < (28 if not _SPECIFIC.search(plain) else 16)
    words = len(_WORD.findall(plain))
    if words < 4:
        return True
    if words < 7 and not _SPECIFIC.search(plain) and not (words >= 5 and plain.endswith(".")):
        return True
    return False


_FINDING = re.compile(
    r"\b(?:because|since|instead|so that|caused?|cause[sd]?|root cause|fix(?:ed|es)?|bug|error|fails?|failed|failing"
    r"|broke|breaks|blocked|blocks|stale|crash(?:es|ed)?|missing|wrong|conflicts?|rejected|denied|timeout|timed out"
    r"|must|never|always|required?|requires|decided|decision|chose|choose|prefer|avoid|don't|do not"
    r"|works?|worked|returns?|means|uses?|used|deployed|deploy|limit|exceeds?|expected|default|only|not)\b"
    r"|[=→]|->|:\s",
    re.I,
)
_SPECIFIC_ALL = re.compile(r"`[^`\n]+`|https?://\S+|\b\w+\.\w{1,5}\b|\b\w+_\w+\b|\b[a-z]+[A-Z]\w+\b|\b[A-Z]{2,}\w*\b"
                           r"|\b[a-z]+-[a-z]+(?:-[a-z]+)*\b"
                           r"|--?\w[\w-]*|\d+(?:\.\d+)?%?")


def substance(text: str) -> float:
    """How much a candidate says, to rank one session's candidates: specifics (code, names, numbers)
    and finding words (a cause, a fix, a decision) count; length helps up to a paragraph."""
    flat = " ".join(text.split())
    prose = flat.split("```", 1)[0]
    words = len(_WORD.findall(prose)) + len(_CJK.findall(prose)) / 2
    specifics = len(_SPECIFIC_ALL.findall(prose))
    findings = len(_FINDING.findall(prose))
    return min(words, 60) / 12 + min(specifics, 8) + 1.5 * min(findings, 4) + (1.5 if "```" in flat else 0)
