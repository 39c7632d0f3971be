"""Commit messages into memories (memcli/services/commits.py and the add pipeline's commit path):
junk skipped by named rules, short knowledge kept, grouped bumps split per package, and values of
one subject ordered by the commit date on the batch path and the git hook's path alike.

Messages are quoted from public repositories (repo @ short sha); bodies are trimmed where marked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memcli.rules.relate import DISTINCT, SUPERSEDES, relate
from memcli.services.commits import bumps, commit_facts, junk_reason
from tests.conftest import listed

# encode/httpx@7df47ce4 (body trimmed to two of its eight packages)
GROUPED = """Bump the python-packages group with 8 updates (#3129)

Bumps the python-packages group with 8 updates:

| Package | From | To |
| --- | --- | --- |
| [mkdocs-material](https://github.com/squidfunk/mkdocs-material) | `9.5.6` | `9.5.12` |
| [twine](https://github.com/pypa/twine) | `4.0.2` | `5.0.0` |


Updates `mkdocs-material` from 9.5.6 to 9.5.12
- [Release notes](https://github.com/squidfunk/mkdocs-material/releases)
- [Commits](https://github.com/squidfunk/mkdocs-material/compare/9.5.6...9.5.12)

Updates `twine` from 4.0.2 to 5.0.0
- [Release notes](https://github.com/pypa/twine/releases)

Signed-off-by: dependabot[bot] <support@github.com>
"""
# jazzband/pip-tools@700aabc1
PRE_COMMIT = """[pre-commit.ci] pre-commit autoupdate

updates:
- [github.com/psf/black: 24.1.1 → 24.2.0](https://github.com/psf/black/compare/24.1.1...24.2.0)
- [github.com/asottile/pyupgrade: v3.15.0 → v3.15.1](https://github.com/asottile/pyupgrade/compare/v3.15.0...v3.15.1)
"""
# encode/httpx@0cb7e5a2: a grouped bump whose message names no package
NO_VALUES = """Bump the python-packages group with 11 updates (#3434)

Co-authored-by: dependabot[bot] <49699333+dependabot[bot]@users.noreply.github.com>
"""


@pytest.mark.parametrize(("message", "rule"), [
    # Textualize/rich's and simonw/sqlite-utils' terse subjects: a word or two that name no subject
    ("changelog", "vague"), ("bump", "vague"), ("faqs", "vague"), ("mypy fix", "vague"), ("for MyPy", "vague"),
    ("flake8 fixes", "vague"), ("Initial plan", "vague"), ("Changelog updates", "vague"),
    ("bump to v13.8.0", "release"), ("Applied Black, refs #445", "formatter_run"), ("Ran cog", "formatter_run"),
    ("Fix flake8 error", "lint_only"), ("remove debug", "dead_code"), ("docs: rename OSX to macOS", "docs_edit"),
    ("Add regression tests for #3115.", "tests_only"),
    ("Merge pull request #2463 from jazzband/pre-commit-ci-update-config", "merge_commit"),  # jazzband/pip-tools
    ("fix typo (#3519)", "typo"),  # encode/httpx@4189b7f0
    ("docs: fix typo 'with in' to 'within' in parameters page", "typo"),  # pallets/click@63ab1531
    ("[pre-commit.ci lite] apply automatic fixes", "formatter_run"),  # pallets/click@2be9c4c4
    ("Apply suggestions from code review", "review_suggestions"),  # pallets/click
    ("Release version 8.4.2 (#3631)", "release"),  # pallets/click@df2e5ed8
    ("Version 0.28.1 (#3445)", "release"),  # encode/httpx@26d48e06
    ("Update _client.py", "file_only"),  # encode/httpx@e486fbce
    ("update dev dependencies", "no_values"),  # pallets/click
    ("wip", "wip"),
    (NO_VALUES, "no_values"),
    # the version in development is the changelog's unreleased section, not a commit's fact
    ("start version 8.5.0", "release"),  # pallets/click@4e869f3a
    ("docs: fix msgspec URL", "docs_edit"),  # hynek/structlog@f168bda8
    ("Clarify custom auth (#2202)", "docs_edit"),  # encode/httpx@2b264128
    ("Make chinese README better (#2366)", "docs_edit"),  # encode/httpx@27db3529
    ("Try if test PyPI will deduct the correct license with lower 2.3 metadata", "experiment"),  # hynek/structlog
    ("Add path normalization edge-cases, verify `shlex.split` behavior", "tests_only"),  # pallets/click@b5529479
    ("Expand API type-checking (#760)", "typing_only"),  # hynek/structlog@52898bf8
    ("Further normalize the style in the changelog", "changelog_edit"),  # jazzband/pip-tools@9478cdf7
    # fastapi/typer: 216 of its last 450 commits, by a bot, each merged into one catch-all memory
    ("📝 Update release notes\n\n[skip ci]", "changelog_edit"),
    ("docs: make TL link more accessible", "docs_edit"),  # python-attrs/attrs, merged with "docs: make it a link"
    # a gitmoji outside the emoji blocks (U+2B06) still leaves the subject to the rules (fastapi/typer@aaae748c)
    ("⬆ Bump the python-packages group with 6 updates (#1917)\n\nSigned-off-by: dependabot[bot] <support@github.com>",
     "no_values"),
    ("Format docstrings according to PEP 257", "formatter_run"),  # jazzband/pip-tools@385a9752
])
def test_junk_is_skipped_by_a_named_rule(message, rule):
    assert junk_reason(message) == rule
    assert commit_facts(message) == ([], rule)


@pytest.mark.parametrize("message", [
    "Delete setup.py (#2516)",  # encode/httpx@10a3b68a
    "Drop stalebot (#2412)",  # encode/httpx@9e97d7d4
    "use uv",  # pallets/click (labelled knowledge: tooling switched to uv)
    "pin httpcore==1.*",
    "Upgrade to black>=25.1.0",
    "sqlite-utils>=3.37",
    "bump for Python3.14",  # Textualize/rich
    "Bump to latest black",
    "Update progress.py\n\nDon't output extraneous blank line when progress display is disabled",  # Textualize/rich
    "Added flake8-import-conventions and rule for typing",  # pallets/click
    "Fix CI (#650)\n\n* Fix CI for prereleases\n\n* Use uv tool for coverage",  # hynek/structlog
    "Add NoSuchCommand exception with suggestions for misspelled commands (#3228)",  # pallets/click
    "docs: clarify that pip-compile reads existing output file",  # jazzband/pip-tools@6dc64180
    "docs: add standalone application guide with Briefcase",  # pallets/click@b0cab0e3
    "Fix Ruff UP038 warning",  # pallets/click@38677812: the rule was dropped by ruff
    "Fix pager test race by raising before yield",  # pallets/click@7eb57cff: a cause worth knowing
])
def test_short_commits_that_state_something_are_kept(message):
    texts, why = commit_facts(message)
    assert why is None and texts == [message]


def test_a_grouped_bump_is_one_fact_per_package():
    assert bumps(GROUPED) == [("mkdocs-material", "9.5.6", "9.5.12"), ("twine", "4.0.2", "5.0.0")]
    texts, why = commit_facts(GROUPED)
    assert why is None and texts == ["Bump mkdocs-material from 9.5.6 to 9.5.12", "Bump twine from 4.0.2 to 5.0.0"]
    texts, _ = commit_facts(PRE_COMMIT)
    assert texts == ["Bump black from 24.1.1 to 24.2.0 in pre-commit",
                     "Bump pyupgrade from v3.15.0 to v3.15.1 in pre-commit"]


def test_a_versionless_bump_of_several_packages_is_one_fact_per_package():
    """gin-gonic/gin@8dd20118: "bump golang.org/x/net and golang.org/x/text to patched versions" named
    no package, so "bump golang.org/x/net to v0.55.0" stayed the live answer for x/net."""
    message = ("fix(deps): bump golang.org/x/net and golang.org/x/text to patched versions (#4807)\n\n"
               "The scheduled Trivy scan has been failing on master with two HIGH findings.")
    texts, why = commit_facts(message)
    assert why is None and [t.split("\n")[0] for t in texts] == [
        "fix(deps): bump golang.org/x/net to patched versions (#4807)",
        "fix(deps): bump golang.org/x/text to patched versions (#4807)"]
    assert all("Trivy scan" in t for t in texts)  # each keeps the reason
    assert commit_facts("Upgrade black and isort")[0] == ["Upgrade black", "Upgrade isort"]
    for old, new in [("chore(deps): bump golang.org/x/net to v0.55.0 (#4678)", texts[0])]:
        rel = relate(old, new, 0.8, strict=True)
        assert (rel.kind, rel.reason) == (SUPERSEDES, "new version: net: 0.55.0 -> a newer bump")
    assert relate("chore(deps): bump golang.org/x/net to v0.55.0 (#4678)", texts[1], 0.8, strict=True).kind == DISTINCT


def test_a_body_is_kept_with_its_subject_and_trailers_are_not():
    # pallets/click (trimmed): the body holds the cause
    message = ("Fix get_parameter_source() during type conversion and eager callbacks\n\n"
               "Record parameter source on the context immediately after consume_value(),\n"
               "before process_value() runs.\n\nCo-authored-by: A Dev <dev@example.com>\n")
    (text,), _ = commit_facts(message)
    assert text.startswith("Fix get_parameter_source()") and "consume_value()" in text
    assert "Co-authored-by" not in text


def _batch(cli, lines: list[dict]) -> list[dict]:
    out = cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in lines))
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def test_batch_commits_are_ordered_by_their_dates_not_by_arrival(cli):
    # encode/httpx@47fe956f (2023-10-01) arrives before @304433eb (2023-08-14): the older bump is
    # stored superseded, the newer stays current
    out = _batch(cli, [
        {"text": "Bump black from 23.7.0 to 23.9.1 (#2873)", "origins": ["git:47fe956f"],
         "created": "2023-10-01T22:15:01-06:00"},
        {"text": "Bump black from 23.3.0 to 23.7.0 (#2805)", "origins": ["git:304433eb"],
         "created": "2023-08-14T08:52:17-05:00"},
        {"text": GROUPED, "origins": ["git:7df47ce4"], "created": "2024-03-01T10:00:00Z"},
        {"text": "Bump twine from 5.0.0 to 5.1.0", "origins": ["git:1111111"], "created": "2024-05-01T10:00:00Z"},
        {"text": "fix typo (#3519)", "origins": ["git:4189b7f0"], "created": "2025-02-27T20:38:39+04:00"},
    ])
    assert out[-1]["memory"] == [] and out[-1]["extraction"]["skipped_pieces"][0]["rule"] == "typo"
    live = {m["text"] for m in listed(cli.store)}
    everything = {m["text"]: m for m in listed(cli.store, "--all")}
    assert "Bump black from 23.7.0 to 23.9.1 (#2873)" in live
    assert "Bump black from 23.3.0 to 23.7.0 (#2805)" not in live
    assert everything["Bump black from 23.3.0 to 23.7.0 (#2805)"]["superseded_by"]
    # one memory per package of the group; the later twine bump replaced the group's, not mkdocs'
    assert "Bump mkdocs-material from 9.5.6 to 9.5.12" in live
    assert "Bump twine from 5.0.0 to 5.1.0" in live and "Bump twine from 4.0.2 to 5.0.0" not in live
    hits = json.loads(cli("search", "--json", "--all", "which black version do we use?").stdout)["results"]
    blacks = [h["text"] for h in hits if "black" in h["text"]]
    assert blacks[0] == "Bump black from 23.7.0 to 23.9.1 (#2873)"


def test_two_options_added_in_two_commits_both_stay_current(cli):
    # the example: each newer feature hid the older one, on its issue number
    _batch(cli, [{"text": text, "origins": [f"git:aaa0{n}"], "created": f"2022-0{i + 1}-01T00:00:00Z"}
                 for i, (n, text) in enumerate([(381, "rows --limit and --offset, closes #381"),
                                                (382, "rows --where and -p, closes #382"),
                                                (469, "rows --order option, closes #469")])])
    assert len(listed(cli.store)) == 3


def test_one_switch_replaces_every_tool_it_names(cli):
    # encode/httpx, 2022-2023: pins of isort and of a flake8 plugin, then the switch to ruff; a pin of
    # another tool stays current
    _batch(cli, [
        {"text": "Bump isort from 5.11.4 to 5.12.0 (#2563)", "origins": ["git:aaa01"],
         "created": "2023-02-01T00:00:00Z"},
        {"text": "Bump flake8-bugbear from 22.7.1 to 23.1.20 (#2561)", "origins": ["git:aaa02"],
         "created": "2023-02-02T00:00:00Z"},
        {"text": "Bump mypy from 0.982 to 1.0.1 (#2611)", "origins": ["git:aaa03"], "created": "2023-03-01T00:00:00Z"},
        {"text": "Use ruff instead of flake8, autoflake and isort (#2648)", "origins": ["git:aaa04"],
         "created": "2023-04-01T00:00:00Z"},
    ])
    assert {m["text"] for m in listed(cli.store)} == {"Bump mypy from 0.982 to 1.0.1 (#2611)",
                                                      "Use ruff instead of flake8, autoflake and isort (#2648)"}
    hits = json.loads(cli("search", "--json", "--all", "flake8 isort").stdout)["results"]
    assert hits[0]["text"].startswith("Use ruff instead of flake8")  # the current state ranks first


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    base = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
            "GIT_COMMITTER_EMAIL": "dev@example.com", "HOME": str(repo)}
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, **base, **(env or {})}).stdout


def test_the_hook_path_dates_commits_and_supersedes_without_a_model(tmp_path):
    """What the post-commit hook runs (`python -m memcli.agents.capture git`), per commit; the
    commits are made out of date order (a rebase, a cherry-pick): the author date decides."""
    repo, store = tmp_path / "repo", tmp_path / "store"
    repo.mkdir()
    _git(repo, "init", "-q")
    subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "init"], check=True, capture_output=True)
    for message, date in [("Bump black from 23.7.0 to 23.9.1 (#2873)", "2023-10-01T22:15:01-06:00"),
                          ("Bump black from 23.3.0 to 23.7.0 (#2805)", "2023-08-14T08:52:17-05:00"),
                          ("Merge branch 'main' into fix", "2023-10-02T10:00:00Z")]:
        _git(repo, "commit", "-q", "--allow-empty", "-m", message,
             env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        subprocess.run([sys.executable, "-m", "memcli.agents.capture", "git", "--store", str(store),
                        "--worker", "inline"], cwd=repo, check=True, capture_output=True)
    everything = {m["text"]: m for m in listed(store, "--all")}
    assert set(everything) == {"Bump black from 23.7.0 to 23.9.1 (#2873)", "Bump black from 23.3.0 to 23.7.0 (#2805)"}
    older = everything["Bump black from 23.3.0 to 23.7.0 (#2805)"]
    assert older["created"].startswith("2023-08-14") and older["superseded_by"]
    assert [m["text"] for m in listed(store)] == ["Bump black from 23.7.0 to 23.9.1 (#2873)"]


def test_an_older_refinement_does_not_rewrite_the_newer_memory(cli):
    # the refinement is dated before the memory it refines (a changelog replayed after the commits):
    # it is kept as history, superseded, and the current text stays the newer one
    out = _batch(cli, [
        {"text": "Add a glossary to the docs", "origins": ["git:bbb0001"], "created": "2025-03-01T00:00:00Z"},
        {"text": "Add a glossary to the docs with the main terms", "origins": ["git:bbb0002"],
         "created": "2024-03-01T00:00:00Z"},
    ])
    assert out[1]["memory"][0]["event"] == "ADD"
    assert [m["text"] for m in listed(cli.store)] == ["Add a glossary to the docs"]
    assert len(listed(cli.store, "--all")) == 2


@pytest.mark.parametrize(("message", "rule"), [
    ("Fix documentation build errors.", "docs_edit"),  # pallets/click@9d7c7dce
    ("Update docs for enum choice", "docs_edit"),  # pallets/click@fb240d2d
    ("Docs restructuring. (#3049)\n\n* Tweak docs layout\n\n* Move client docs into folder", "docs_edit"),  # httpx
    ("Remove broken link", "links_only"),  # hynek/structlog
    ("Add missing closing issue ref", "links_only"),  # pallets/click
    ("type-hint out varibale", "typing_only"),  # pallets/click
    ("Add comments about the test cases\n\nRefs:\nhttps://github.com/pallets/click/pull/3030/files", "comments_only"),
    ("Streamline option flag management", "refactor"),  # pallets/click
    ("Sponsors: add emsys\n\ncc @sscherfke", "sponsors"),  # hynek/structlog
    ("Drop private imports from test_main.py (#2574)", "tests_only"),  # encode/httpx
    # the names say what was tested or annotated, not a behaviour: pallets/click, encode/httpx
    ("Test `show_default` set as string and its display in prompt", "tests_only"),
    ("Apply class-body annotations to `KeepOpenFile` for consistency", "typing_only"),
    ("Fix `extensions` type annotation. (#3380)", "typing_only"),
    ("Use more legible syntax", "readability"),  # hynek/structlog
    # pallets/click@b39590fd: a review's link is no prose of its own
    ("Make the source selection logic clearer\n\nAddress: https://github.com/pallets/click/pull/3030", "readability"),
    ("dev: make ConsoleRenderer.get_default_column_styles more explicit", "readability"),  # hynek/structlog: a name
    ("Remove empty H1 header\n\nRefs: https://github.com/pallets/click/pull/3447", "docs_edit"),  # pallets/click
    ("Comma splice", "typo"), ("Oxford!", "typo"),  # hynek/structlog
    ("Improve punctuation/grammar with header. (#1547)", "typo"),  # jazzband/pip-tools
    ("Drop unneccessary `binascii` import (#2909)", "dead_code"),  # encode/httpx: a name, still no behaviour
    ("Removed unused sys import, refs #425", "dead_code"),  # simonw/sqlite-utils
    ("Let's grow it", "vague"), ("Custom, too", "vague"),  # hynek/structlog: what "it" is goes unsaid
    # the version is the comment's, not the project's (jazzband/pip-tools@dc4b5e7d)
    ("Add missing pragma comments for pip v26.2", "comments_only"),
    ("Add `pragma: no branch` in `middleware/exceptions.py`", "comments_only"),  # encode/starlette@672cd427
])
def test_work_that_names_nothing_is_skipped_by_a_named_rule(message, rule):
    assert commit_facts(message) == ([], rule)


@pytest.mark.parametrize("message", [
    # the body's squashed commit names what was fixed (hynek/structlog@#758)
    "Refactor terminal initialization into separate function (#758)\n\n* Refactor terminal initialization into "
    "separate function\n\n* Fix FORCE_COLOR on Windows",
    "Improve RTD and run Cog on docs build (#632)",  # names a tool: hynek/structlog
    "Add test: transform does not cascade-delete referencing records (#792)",  # states a behaviour: sqlite-utils
    # encode/httpx: the body holds the value
    "Update docs to reflect supported python versions (#2338)\n\nReplaces Python 3.6 references with Python 3.7",
    "Add thread-safety note on the `Client` docstring (#2380)",  # encode/httpx: a code name
    "Test for insert CLI with multiple --pk, refs #621",  # simonw/sqlite-utils: a test of a feature
    "Fix docs build\n\nSphinx 7 no longer accepts the html_theme_path setting, so it is dropped.",  # a cause
    # a rule's keyword inside what is really a package, a packaging step, CI work or changelog tooling
    "Add missing dependency on typing-extensions",  # jazzband/pip-tools: a package, not typing work
    "Add tests and requirements.txt to sdist (#2927)",  # encode/httpx: what the sdist ships
    "Update CI to test both Intel and ARM macOS",  # jazzband/pip-tools: what CI runs on
    "Add script to make sure CHANGELOG is always in sync with `__version__` (#2297)",  # encode/httpx: a check
    "Add a pre-commit hook for changelog filenames",  # jazzband/pip-tools: a hook the project runs
    "Bump docs constraints pip-tools runtime to 3.13",  # jazzband/pip-tools: names the value it bumps to
    "Fix header parsing",  # a header of HTTP, not of a page
    "Drop 3.8 too",  # the version is said, whatever "too" points at
    "Remove unused dependency on six",  # a dependency dropped is a fact
])
def test_the_same_kinds_of_work_that_name_or_explain_something_are_kept(message):
    texts, why = commit_facts(message)
    assert why is None and texts


def test_a_squashed_pull_requests_editor_titles_and_review_commits_are_dropped():
    # expressjs/express@4c4f3ea1: the body only GitHub's web-editor titles; with them the commit's
    # vector fell below the search floor for "Which serve-static version does Express depend on?"
    assert commit_facts("fix(deps): serve-static@^2.2.0 (#6418)\n\n* Update package.json\n\n* Update History.md") \
        == (["fix(deps): serve-static@^2.2.0 (#6418)"], None)
    # encode/httpx@59914c76: among other bullets, an edited file says where the change went
    texts, _ = commit_facts("Add `NetRCAuth()` class. (#2535)\n\n* NetRCAuth class\n\n* Update httpx/_auth.py\n\n"
                            "* Apply suggestions from code review\n\n* Merge branch 'master' into netrc-auth\n\n"
                            "PR-URL: https://github.com/encode/httpx/pull/2535")
    assert texts == ["Add `NetRCAuth()` class. (#2535)\n\n* NetRCAuth class\n\n* Update httpx/_auth.py"]
