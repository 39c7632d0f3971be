"""Subject identity on real commit subjects and changelog lines (memcli/rules/subjects.py, and the
decision rules of memcli/rules/relate.py that read it).

The texts are quoted from public repositories (repo @ short sha, or the changelog's version); the
similarities passed to `relate` are high on purpose (0.9): these pairs share one sentence shape,
which is why an embedding cannot tell them apart, and the rules must."""

from __future__ import annotations

import pytest

from memcli.rules.relate import DISTINCT, SAME, SUPERSEDES, relate
from memcli.rules.subjects import gives_version, removal_of, same_subject, strip_refs, subject_keys, version_change


@pytest.mark.parametrize(("text", "stripped"), [
    ("Bump black from 23.3.0 to 23.7.0 (#2805)", "Bump black from 23.3.0 to 23.7.0"),  # encode/httpx@304433eb
    ("table.transform(rename=...) now preserves indexes, closes #822",  # simonw/sqlite-utils@57192ef
     "table.transform(rename=...) now preserves indexes"),
    (".transform() preserves check constraints, refs #762",  # simonw/sqlite-utils@2303b80
     ".transform() preserves check constraints"),
    ("Fix #3084: Correct flag optional value behavior", "Correct flag optional value behavior"),  # pallets/click
    ("see https://github.com/simonw/sqlite-utils/issues/114 for details", "see for details"),
    ("reverts 0f71fe7 from GH-12", "reverts from"),
    # pallets/flask@be508c61: a pinned action's shas are the bump's values, not its provenance
    ("Bump pypa/gh-action-pypi-publish from 68e62d4871ad9d14a9d55f114e6ac71f0b408ec0 to "
     "81e9d935c883d0b210363ab89cf05f3894778450 (#5440)",
     "Bump pypa/gh-action-pypi-publish from 68e62d4871ad9d14a9d55f114e6ac71f0b408ec0 to "
     "81e9d935c883d0b210363ab89cf05f3894778450"),
])
def test_reference_numbers_are_provenance_not_words(text, stripped):
    assert strip_refs(text) == stripped


@pytest.mark.parametrize(("text", "keys"), [
    ("rows --where and -p, closes #382", {"--where", "-p"}),  # the issue's example
    ("llm logs -x/--extract option (#693)", {"--extract"}),  # -x is its short alias: one option
    ("Remove the no-op -d/--detect-types flag", {"--detect-types"}),  # simonw/sqlite-utils
    ("--quiet (-q) or -n, --nl", {"--quiet", "--nl"}),
    ("Bump actions/setup-python from 4 to 5 (#3036)", {"actions/setup-python"}),  # encode/httpx
    ("Update httpcore requirement from <0.17.0,>=0.15.0 to >=0.15.0,<0.18.0 (#2642)", {"httpcore"}),  # encode/httpx
    ("pin httpcore==1.*", {"httpcore"}),
    ("Upgrade to black>=25.1.0", {"black"}),
    ("sqlite-utils>=3.37", {"sqlite-utils"}),
    ("Add `NetRCAuth()` class. (#2535)", {"netrcauth"}),  # encode/httpx
    ("Hide `Sentinel.UNSET` values as `None` in `lookup_default()`", {"sentinel.unset", "lookup-default"}),  # click
    ("Delete setup.py", {"setup.py"}),  # encode/httpx@10a3b68a: a file is a subject too
    ("Enable WAL mode by default", set()),
    # Renovate's wording: the package after "dependency", "pre-commit hook", "rust crate", and an action
    ("chore(deps): update dependency ruff to v0.5.1 (#101)", {"ruff"}),
    ("chore(deps): update pre-commit hook astral-sh/ruff-pre-commit to v0.4.4", {"ruff-pre-commit"}),
    ("fix(deps): update rust crate serde to 1.0.200", {"serde"}),
    ("chore(deps): update github/codeql-action action to v3.25.3", {"codeql-action"}),
])
def test_names_an_option_code_name_or_package_as_the_subject(text, keys):
    assert subject_keys(text) == keys


def test_two_options_are_two_subjects_whatever_their_issue_numbers():
    # the issue's first example: the newer feature hid the older one ("new value: #381 -> #382")
    rel = relate("rows --limit and --offset, closes #381", "rows --where and -p, closes #382", 0.9)
    assert rel.kind == DISTINCT and "--where" in rel.reason
    rel = relate("llm logs -u/--usage option", "llm logs -x/--extract option (#693)", 0.9)
    assert rel.kind == DISTINCT
    rel = relate("Documentation for Just, closes #494", "--no-skip-false option, plus docs - closes #527", 0.9)
    assert rel.kind != SUPERSEDES and "#" not in rel.reason


def test_the_same_commit_with_another_reference_is_the_same_fact():
    # pallets/click: a commit and its squash-merge differ only in the PR number
    assert relate("Release version 8.4.2", "Release version 8.4.2 (#3631)", 0.95).kind == SAME
    assert relate("fix the pager (#3501)", "fix the pager (#3502)", 0.95).kind == SAME


def test_a_newer_bump_of_one_package_supersedes_its_older_bump():
    # encode/httpx@304433eb then @47fe956f: two bumps of black
    older, newer = "Bump black from 23.3.0 to 23.7.0 (#2805)", "Bump black from 23.7.0 to 23.9.1 (#2873)"
    rel = relate(older, newer, 0.9)
    assert rel.kind == SUPERSEDES and "23.9.1" in rel.reason
    # two versions apart (several "slots" changed at once): still the one package's new version
    assert relate(older, "Bump black from 23.9.1 to 24.1.0", 0.9).kind == SUPERSEDES
    assert version_change("Upgrade to black>=25.1.0", "Bump black from 25.1.0 to 25.11.0") == "black: 25.1.0 -> 25.11.0"


def test_bumps_of_two_packages_never_merge_or_supersede():
    # encode/httpx@b871b4b8 and @47fe956f
    rel = relate("Bump mkdocs-material from 9.4.14 to 9.5.3 (#3035)", "Bump black from 23.7.0 to 23.9.1 (#2873)", 0.9)
    assert rel.kind == DISTINCT
    assert same_subject("Bump black from 23.7.0 to 23.9.1", "Bump isort from 5.12 to 5.13")[0] is False


def test_a_stated_switch_supersedes_the_statement_of_the_old_value():
    old = "We publish to PyPI with trusted publishing, so no API token is needed."
    rel = relate(old, "We switched the release workflow from trusted publishing to a PYPI_TOKEN secret", 0.6)
    assert rel.kind == SUPERSEDES and "trusted publishing" in rel.reason
    rel = relate("Enable WAL mode by default", "Decision: WAL mode is no longer enabled by default in Database()", 0.8)
    assert rel.kind == SUPERSEDES
    # the switch names a value the old text does not hold: no bearing on it
    assert relate(old, "We switched the docs build from Sphinx to MkDocs", 0.6).kind != SUPERSEDES
    # a changelog's "Changed:" category is no switch verb, and "to better render" is a purpose (Textualize/rich)
    assert relate("Changed: Rebuilt SVG export to create a simpler SVG that is more portable (version 12.4.0)",
                  "Changed: Removed excess margin from SVG, tweaked cell sizes to better render block characters "
                  "(version 12.4.2)", 0.66, strict=True).kind != SUPERSEDES


def test_a_later_release_removing_a_deprecated_name_supersedes_its_deprecation():
    # encode/httpx CHANGELOG.md: 0.26.0 deprecates `proxies`, 0.28.0 removes it; 0.27.0 deprecates `app=...`
    deprecated = ("The `proxies` argument is now deprecated. It will still continue to work, but it will be "
                  "removed in the future. (#2879)")
    rel = relate(deprecated, "The deprecated `proxies` argument has now been removed.", 0.8)
    assert rel.kind == SUPERSEDES and "proxies" in rel.reason
    app = ("The `app=...` shortcut has been deprecated. Use the explicit style of "
           "`transport=httpx.WSGITransport()` or `transport=httpx.ASGITransport()` instead.")
    assert relate(app, "The deprecated `app` argument has now been removed.", 0.8).kind == SUPERSEDES
    # a statement that only mentions `proxies` on the way (it is about `proxy`) is not superseded by it
    added = ("The `proxy` argument was added. You should use the `proxy` argument instead of the deprecated "
             "`proxies`, or use `mounts=` for more complex configurations. (#2879)")
    assert relate(added, "The deprecated `proxies` argument has now been removed.", 0.8).kind == DISTINCT


def test_a_revert_supersedes_the_commit_it_reverts():
    # pallets/click@6c4a77ba, then its revert @bb7be1f6
    original = "Use `default=True` as a sentinel for non-boolean flags"
    revert = f'Revert "{original}"\n\nThis reverts commit 6c4a77ba24854dab793a8ff72110a0a24c403c9f.'
    assert relate(original, revert, 0.9).kind == SUPERSEDES
    assert relate("Use `flag_value` for boolean flags", revert, 0.9).kind != SUPERSEDES
    # a gitmoji the quoted subject kept is no word of it (the fastapi projects' style)
    assert relate("Add a --frob option to typer run (#12)", 'Revert "✨ Add a --frob option to typer run (#12)" (#13)',
                  0.8, strict=True).kind == SUPERSEDES
    # a changelog's revert says why after the quoted subject (encode/uvicorn 0.11.4, then 0.11.5)
    assert relate("Pass through gunicorn timeout config. (version 0.11.4)",
                  'Revert "Pass through gunicorn timeout config." due to unexpected side effects. (version 0.11.5)',
                  0.8, strict=True).kind == SUPERSEDES


def test_a_reverted_change_made_again_supersedes_the_revert():
    # encode/starlette@67f473d4 reverted #2435; @af1c709a (ten months later) made the change again
    revert = ('Revert "Add support for ASGI `pathsend` extension" (#2649)\n\n'
              "This reverts commit 7936e86f0a0eb7494aee8a1094b0ccda31c67a72.")
    again = "Add support for ASGI `pathsend` extension (#2671)"
    rel = relate(revert, again, 0.9, strict=True)
    assert rel.kind == SUPERSEDES and "again" in rel.reason
    assert relate(revert, "Add support for ASGI `websocket.http.response` extension (#2672)", 0.85,
                  strict=True).kind != SUPERSEDES


def test_the_supported_python_versions_are_one_subject():
    # pallets/click CHANGES.md 8.0.0 then 8.2.0
    rel = relate("Drop support for Python 2 and 3.5.", "Drop support for Python 3.7 and 3.8.", 0.8)
    assert rel.kind == SUPERSEDES and "3.7" in rel.reason
    # adding a new Python is not dropping an old one (encode/httpx@... "Add support for Python 3.13 (#3460)")
    assert relate("Add support for Python 3.13 (#3460)", "Drop support for Python 3.7 (#2813)", 0.8).kind == DISTINCT


@pytest.mark.parametrize(("old", "new"), [
    # simonw/sqlite-utils, replayed oldest first: each pair was a wrong supersede before `strict`
    ("Preserve AUTOINCREMENT through transforms", "Preserve composite UNIQUE constraints in transforms"),
    ("Test against Python 3.12", "Test against Python 3.13 pre-release (#619)"),
    ("Resolve implicit primary key references in table.foreign_keys",
     "Compound primary keys now resolve in PRIMARY KEY declaration order"),
    ("Pin the Database context manager contract",
     "Explain why the Database context manager rolls back instead of committing"),
])
def test_commit_subjects_of_one_shape_do_not_supersede_by_wording(old, new):
    assert relate(old, new, 0.8, strict=True).kind != SUPERSEDES


def test_strict_still_reads_stated_changes():
    assert relate("Use flake8 for linting", "Switch from flake8 to ruff", 0.6, strict=True).kind == SUPERSEDES
    assert relate("Bump black from 23.3.0 to 23.7.0", "Bump black from 23.7.0 to 23.9.1", 0.9, strict=True).kind \
        == SUPERSEDES


def test_a_changelog_item_restating_a_commit_is_not_a_new_value():
    # pallets/click@c69643b6 and CHANGES.md 8.4.0; encode/httpx@18d7721c and CHANGELOG.md 0.25.0
    assert relate("Add file-like pager: `click.get_pager_file()` (#1572)",
                  "Add `click.get_pager_file` for file-like access to an output pager. (version 8.4.0)",
                  0.8, strict=True).kind != SUPERSEDES
    said = "Use Mozilla documentation instead of `httpstatuses.com` for HTTP error reference (#2768)"
    assert relate(said, f"Fixed: {said} (version 0.25.0)", 0.8, strict=True).kind != SUPERSEDES
    # pallets/click CHANGES.md 7.0 then 8.3.x: "instead of `help`" is a word on the way, not the subject
    assert relate("Better handling of help text for dynamic default option values. (version 7.0)",
                  "The automatic help option stores its value under the reserved name `_click_default_help` "
                  "instead of `help`, so a parameter named `help` no longer breaks parsing", 0.8,
                  strict=True).kind != SUPERSEDES


@pytest.mark.parametrize(("old", "new", "why"), [
    # encode/httpx@ab8177c5 -> @7ecd8282: an extra is the same package
    ("Bump coverage from 7.2.1 to 7.2.2 (#2641)", "Bump coverage[toml] from 7.2.7 to 7.3.0 (#2839)", "7.2.2 -> 7.3.0"),
    # encode/httpx@2146c75f -> @7c53d99d: an allowed major version, said in words
    ("Allow rich 12 (#2122)", "Bump rich pin to allow version 13 (#2546)", "12 -> 13"),
    ("Allow rich-11 (#2057)", "Allow rich 12 (#2122)", "11 -> 12"),
])
def test_a_package_named_with_an_extra_or_a_major_in_words_is_one_subject(old, new, why):
    rel = relate(old, new, 0.9, strict=True)
    assert rel.kind == SUPERSEDES and why in rel.reason


def test_removing_a_pin_supersedes_the_pin():
    # encode/httpx@2c49a151 -> @f6866ce3
    rel = relate("Pin CI version of `click` to resolve mypy error (#2769)",
                 "Remove temporary click version pin (#2771)", 0.7, strict=True)
    assert rel.kind == SUPERSEDES and "click" in rel.reason


@pytest.mark.parametrize("old", [
    "Bump isort from 5.11.4 to 5.12.0 (#2563)",  # encode/httpx
    "Bump flake8-bugbear from 22.7.1 to 23.1.20 (#2561)",  # a plugin of a replaced tool goes with it
])
def test_each_tool_of_an_instead_of_list_is_replaced(old):
    rel = relate(old, "Use ruff instead of flake8, autoflake and isort (#2648)", 0.5, strict=True)  # httpx@daec2bdc
    assert rel.kind == SUPERSEDES


@pytest.mark.parametrize(("old", "new", "why"), [
    # encode/starlette@b68a142a, encode/uvicorn@94593f3b, encode/httpx@e27d1b83: commit subjects say it
    # in the imperative ("Replace X by Y"), which the stated-switch pattern read only as "replaced"
    ("Bump mkautodoc from 0.1.0 to 0.2.0 (#1881)", "Replace `mkautodoc` by `mkdocstrings` (#2776)",
     "mkautodoc -> mkdocstrings"),
    ("Bump black from 23.3.0 to 23.7.0 (#2066)", "Replace `Black` with `ruff` formatter (#2150)",
     "black -> ruff formatter"),
    ("Update pytest-asyncio (#2511)", "replace pytest-asyncio and pytest-trio with anyio (#2512)",
     "pytest-asyncio -> anyio"),
])
def test_an_imperative_replace_supersedes_what_named_the_replaced_tool(old, new, why):
    rel = relate(old, new, 0.5, strict=True)
    assert rel.kind == SUPERSEDES and why in rel.reason
    # the tool that replaced it is no bearing on another tool's memory
    assert relate("Bump mypy from 1.0 to 1.1 (#1900)", new, 0.5, strict=True).kind == DISTINCT


def test_a_bump_to_a_pinned_sha_is_a_new_value_not_a_repeat():
    # pallets/flask: the later sha pin was merged into "1.8.10 to 1.8.11" as nothing new
    rel = relate("Bump pypa/gh-action-pypi-publish from 1.8.10 to 1.8.11",
                 "Bump pypa/gh-action-pypi-publish from 68e62d4871ad9d14a9d55f114e6ac71f0b408ec0 to "
                 "81e9d935c883d0b210363ab89cf05f3894778450", 0.86, strict=True)
    assert rel.kind == SUPERSEDES and "81e9d935" in rel.reason
    # from one sha to another, then back to a version number: each is the newer value
    shas = ("Bump pypa/gh-action-pypi-publish from f946db0f765b9ae754e44bfd5ae5b8b91cfb37ef to "
            "2f6f737ca5f74c637829c0f5c3acd0e29ea5e8bf")
    assert relate(shas, "Bump pypa/gh-action-pypi-publish from 68e62d4871ad9d14a9d55f114e6ac71f0b408ec0 to "
                  "81e9d935c883d0b210363ab89cf05f3894778450", 0.9, strict=True).kind == SUPERSEDES
    assert relate(shas, "Bump pypa/gh-action-pypi-publish from 1.8.14 to 1.9.0", 0.9, strict=True).kind == SUPERSEDES


def test_one_verb_apart_a_removal_is_the_newer_state():
    # pallets/flask@40b78fa2 then @c77b099c: read as a rewording (0.93) and merged
    rel = relate("fix min python for pip-compile", "remove min python for pip-compile", 0.93, strict=True)
    assert rel.kind == SUPERSEDES
    # removing a mention from the docs removes a mention, not the thing (pallets/flask@30427a20)
    assert relate("deprecate FLASK_ENV", "remove FLASK_ENV from docs", 0.8, strict=True).kind == DISTINCT
    # and a text after the removal is not the removal said again (pallets/click@74546476, @13f075c4)
    assert relate("remove colorama", "Update documentation following Colorama removal", 0.8,
                  strict=True).kind == DISTINCT


def test_a_fix_of_a_feature_is_another_change_and_sphinx_roles_are_references():
    # pallets/flask CHANGES.rst 3.1.0 / 3.1.1: the fix had joined the commit that added the feature
    fix = ("Fix signing key selection order when key rotation is enabled via ``SECRET_KEY_FALLBACKS``. "
           ":ghsa:`4grg-w6v8-c28g` (version 3.1.1)")
    assert relate("enable secret key rotation", fix, 0.63, strict=True).kind == DISTINCT
    # ":pr:`5496`" cites a pull request as "(#5496)" does: the item and its commit are one change
    item = "Provide a configuration option to control automatic option responses. :pr:`5496` (version 3.1.0)"
    assert strip_refs(item) == "Provide a configuration option to control automatic option responses."
    rel = relate("Provide a configuration option to control automatic option responses (#5496)", item, 0.9,
                 strict=True)
    assert rel.kind == SAME and "5496" in rel.reason


def test_a_removal_supersedes_a_bare_dunder_name_too():
    # pallets/flask@293041a2, CHANGES.rst 3.2.0: "__version__" unquoted is the same code name
    assert subject_keys("deprecate __version__ attribute") == subject_keys("update `__version__` deprecation")
    rel = relate("deprecate __version__ attribute",
                 "Remove previously deprecated code: ``__version__``. :pr:`5648` (version 3.2.0)", 0.5, strict=True)
    assert rel.kind == SUPERSEDES and "removal" in rel.reason


def test_two_releases_items_worded_as_a_change_stay_two_changes():
    # pallets/flask CHANGES.rst: neither replaces a value of the other, whatever "changed" or "instead" says
    assert relate("Sessions can be set to be permanent now on a per-session basis. (version 0.2)",
                  "Changed logic for picking defaults for cookie values from sessions to work better with "
                  "Google Chrome. (version 0.10)", 0.6, strict=True).kind == DISTINCT
    assert relate("View functions can now return a tuple with the first instance being an instance of "
                  "``Response``. (version 0.9)", "View functions can return generators directly instead of "
                  "wrapping them in a ``Response``. :pr:`4629` (version 2.2.0)", 0.6, strict=True).kind == DISTINCT
    # a value replaced between releases still supersedes
    assert relate("Require Werkzeug >= 2.3.7. (version 2.3.3)", "Require Werkzeug >= 3.0.0. (version 3.0.0)", 0.9,
                  strict=True).kind == SUPERSEDES


def test_adding_and_dropping_python_versions_are_two_ends_of_a_range():
    # encode/httpx@c7c13f18, @4fb9528c: the newest and the oldest supported Python, both true
    assert relate("Add support for Python 3.13 (#3460)", "Drop Python 3.8 support (#3592)", 0.9,
                  strict=True).kind == DISTINCT
    assert relate("Bump isort from 5.11.4 to 5.12.0", "Use ruff instead of black", 0.5, strict=True).kind == DISTINCT


@pytest.mark.parametrize(("old", "new"), [
    ("Black 24", "Bump black from 24.4.2 to 24.8.0 in pre-commit"),  # hynek/structlog: a tool and its version
    ("Add sphinx<9 pin", "Unpin Sphinx again"),  # hynek/structlog: unpinning ends the pin
    ("Build docs on 3.12", "Build docs on 3.14 (#801)"),  # hynek/structlog: the same words, a newer version
])
def test_a_version_said_in_few_words_is_still_a_value_of_its_subject(old, new):
    assert relate(old, new, 0.7, strict=True).kind == SUPERSEDES


@pytest.mark.parametrize(("old", "new"), [
    ("Fix crash on Python 3.11", "Fix crash on Python 3.12"),  # two fixes, not a new value
    ("Release 1.2", "Release 1.3"),  # release commits are skipped as junk; never a subject "release"
])
def test_one_shape_with_other_versions_is_not_always_a_new_value(old, new):
    assert relate(old, new, 0.9, strict=True).kind == DISTINCT


def test_a_revert_said_in_prose_supersedes_what_it_undoes():
    # pallets/click CHANGES.md 8.3.3 -> 8.3.4, and the commit that made the change
    revert = ("Revert the `8.3.3` change that exposed the original file descriptor via `fileno()` on the "
              "redirected streams. (version 8.3.4)")
    for old in ("Expose original file descriptor in `CliRunner`\n\nFix #2865",
                "`CliRunner`'s redirected streams now expose the original file descriptor via `fileno()`, so "
                "that faulthandler works. (version 8.3.3)"):
        assert relate(old, revert, 0.6, strict=True).kind == SUPERSEDES
    assert relate("Add a glossary to the docs", "Revert adding space between option help text that wraps.", 0.5,
                  strict=True).kind == DISTINCT


def test_a_code_name_with_an_underscore_is_no_plugin_of_a_replaced_word():
    # pallets/click CHANGES.md 8.1.4 / 8.4.2: "`[COMMAND]` instead of `COMMAND`" says nothing of `command_class`
    rel = relate("`@group.command` does not fail if the group was created with a custom `command_class`. (version "
                 "8.1.4)", "A `Group` with `invoke_without_command=True` marks its subcommand as optional in the usage "
                 "help, showing `[COMMAND]` instead of `COMMAND`. (version 8.4.2)", 0.6, strict=True)
    assert rel.kind == DISTINCT


def test_two_attributes_of_one_class_are_two_subjects():
    # hynek/structlog@005ce730 / @ba1a1785: two parameters, two features
    assert relate("Add CallsiteParameter.QUAL_NAME (#761)", "Add CallsiteParameter.QUAL_MODULE (#812)", 0.9,
                  strict=True).kind == DISTINCT


def test_code_after_instead_of_is_one_value():
    # hynek/structlog CHANGELOG 22.1.0 / 22.2.0: "instead of `log.info("hello")`" replaces no `log()` method
    old = ("Added: `structlog.make_filtering_bound_logger()`-returned loggers now also have a `log()` method to match "
           "the `structlog.stdlib.BoundLogger` signature closer. (version 22.1.0)")
    new = ("Added: `FilteringBoundLogger` now also has support for *asyncio*-based logging. So instead of "
           "`log.info(\"hello\")` you can also use `await log.ainfo(\"hello\")`. (version 22.2.0)")
    assert relate(old, new, 0.7, strict=True).kind != SUPERSEDES


def test_a_pin_then_an_unpin_then_a_pin_again_each_replaces_the_last():
    # hynek/structlog@e7f36a53 (2024-10-12), @81ba67ef (2024-10-13), @1090fe37 (2026-01-21)
    assert relate("Pin sphinx", "Unpin Sphinx again", 0.7, strict=True).kind == SUPERSEDES
    assert relate("Unpin Sphinx again", "Add sphinx<9 pin", 0.7, strict=True).kind == SUPERSEDES
    assert relate("Remove deprecated `foo` argument", "Fix `foo` docs", 0.7, strict=True).kind != SUPERSEDES


def test_removing_something_in_a_file_is_no_removal_of_the_file():
    # jazzband/pip-tools CHANGELOG 1.8.1 / 1.8.2: two fixes to the generated requirements.txt
    assert relate("Fix duplicate entries that could happen in generated `requirements.txt` (version 1.8.1)",
                  "Remove duplicate index urls in generated `requirements.txt` (version 1.8.2)", 0.7,
                  strict=True).kind != SUPERSEDES
    assert relate("Use setup.py for packaging", "Delete setup.py", 0.6, strict=True).kind == SUPERSEDES


# psf/black, replayed through `add --batch` and read by hand: each pair was decided wrongly before
@pytest.mark.parametrize(("old", "new", "similarity"), [
    # a reference the sentence is about is its subject (black@0aabac4f, @45cbe572)
    ("Add regression test for #1765 (#4530)",
     "Add regression tests for Black’s previous inconsistent quote formatting with adjacent string literals (#4580)",
     0.9),
    # a docs example of an option goes, not the option (black@6296607b, @0a31a366)
    ("feat: add --no-cache option to prevent cache during formatting (#4803)",
     "Remove `--no-cache` docs example (#4840)", 0.9),
    # full support of one Python and CI coverage of a newer one are two claims (black@ac28187b, @9e874952)
    ("Fully support Python 3.13, including CI testing and wheel building (#4436)",
     "Add CI coverage for Python 3.15 (#5127)", 0.9),
    # one directive, two cases of it: three words swapped for three others (black@3e9dd25d, @5b470f0e)
    ("Fix bug where # fmt: skip is not being respected with one-liner functions (#4552)",
     "Fix `# fmt: skip` ignored in deeply nested expressions (#4883)", 0.886),
    # a commit and a changelog item citing other pull requests are two changes (black@c970a497, CHANGES.md)
    ("Preserve comments before fmt: skip lines (#5139)",
     "Preserve blank lines that come immediately before a `# fmt: on` comment (#5300)", 0.9),
    # the lowest Python and the newest are the two ends of the supported range (encode/uvicorn@ffa5b1ac,
    # @dff1a462: the held-out replay read it as "new value: 3.7 -> 3.12")
    ("Drop support for Python 3.7 (#1996)", "Support Python 3.12 (#2145)", 0.652),
    # two releases' items about one function are two changes (python-attrs/attrs 21.1.0, 23.2.0)
    ("Changes: `attrs.resolve_types()` now resolves types of subclasses after the parents are resolved. "
     "(version 21.1.0)", "Changes: The type annotation for `attrs.resolve_types()` is now correct. (version 23.2.0)",
     0.85),
    # a floor and a cap of one package are two ends of a range too; removing support for one of its
    # versions removed no name, so the later pin brings nothing back (fastapi/typer 0.12.0, 0.15.4)
    ("Remove support for Click 7, require Click 8+. (version 0.12.0)",
     "Pin Click to < 8.2, compatibility for Click >= 8.2 will be added in a future version. (version 0.15.4)", 0.8),
    # a fix's "now" tells the fixed behaviour: the feature it fixes is still there (hynek/structlog
    # CHANGELOG.md 23.2.0, 25.5.0)
    ("Added: `structlog.processors.MaybeTimeStamper` that only adds a timestamp if there isn't one already. "
     "(version 23.2.0)", "Fixed: `structlog.processors.MaybeTimeStamper` now respects the *key* argument when "
     "determining whether to overwrite the timestamp field. (version 25.5.0)", 0.75),
])
def test_another_case_example_or_claim_of_one_subject_is_distinct(old, new, similarity):
    assert relate(old, new, similarity, strict=True).kind == DISTINCT


@pytest.mark.parametrize(("old", "new"), [
    ("Drop Python 3.8 support (#4452)", "Drop support for EOL Python 3.9 (#4842)"),  # psf/black
    ("Upgrade mypy to 1.0", "Bump mypy to 1.4"),  # two verbs that set a version make one claim
    ("Allow rich 12", "Bump rich pin to allow version 13"),
    # two bumps of one package set its version, whatever else one says (encode/httpx@2147, @2328)
    ("Upgrade mkdocs to 1.3.0 to fix scripts/docs failure (#2147)", "Bump mkdocs from 1.3.0 to 1.3.1 (#2328)"),
    # a tool used at a version (jazzband/pip-tools@43952fc7, @76f3fa2a)
    ("tests: ensure tox pipsupported uses pip 25.3", "Update tox 'pipsupported' to use pip v26.0"),
])
def test_a_newer_version_in_the_same_claim_still_supersedes(old, new):
    assert relate(old, new, 0.8, strict=True).kind == SUPERSEDES


def test_the_same_subject_committed_twice_under_two_pull_requests_is_still_known():
    old = "Bump actions/setup-python from 6.1.0 to 6.2.0 (#4977)"
    new = "Bump actions/setup-python from 6.1.0 to 6.2.0 (#5014)"
    assert relate(old, new, 0.99, strict=True).kind == SAME  # psf/black: one bump, merged twice


@pytest.mark.parametrize(("old", "new"), [
    ("Drop Python 3.8 (#768)", "Drop 3.9 (#800)"),  # hynek/structlog: a Python version by its number alone
    ("Add 3.14 (#723)", "Add 3.15 to CI (#813)"),  # hynek/structlog: the newest Python tested
    ("Use 3.12 in dev (#566)", "Use 3.13 in dev"),  # hynek/structlog
    ("Bump PyPy to v3.10", "Update PyPy CI builds to 3.11"),  # jazzband/pip-tools: a bump with words between
])
def test_a_version_named_by_its_number_or_with_words_between_is_a_new_value(old, new):
    assert relate(old, new, 0.7, strict=True).kind == SUPERSEDES


def test_a_verb_before_a_version_names_no_tool():
    assert "drop" not in subject_keys("Drop 3.9")
    assert subject_keys("Drop 3.9") == subject_keys("Drop Python 3.8") == {"python"}
    # a fix on one Python and a fix on another are two fixes, however few their words
    assert relate("Fix crash on 3.12", "Fix crash on 3.13", 0.9, strict=True).kind == DISTINCT
    # full support of one Python is more than a newer Python in CI (psf/black@ac28187b)
    assert relate("Fully support Python 3.13, including CI testing and wheel building (#4436)",
                  "Add 3.15 to CI (#813)", 0.9, strict=True).kind == DISTINCT


def test_a_pin_after_an_unpin_is_found_below_the_candidate_floor():
    # hynek/structlog@1090fe37: the pin's body is a pasted warning, so the texts are far apart
    # (0.43) and only the first lines show the change
    from memcli.rules.decide import bears_on
    new = ("Add sphinx<9 pin\n\n```\nWARNING: while setting up extension sphinx.ext.autodoc.typehints:\n"
           "extension 'sphinx.ext.autodoc.typehints' has no setup() function; is it\nreally a Sphinx extension"
           " module?\n```")
    assert not bears_on("Unpin Sphinx again", new, 0.43)
    assert bears_on("Unpin Sphinx again", new, 0.43, headlines=True)
    assert not bears_on("Switch to sphinxext.opengraph", new, 0.45, headlines=True)


def test_a_commit_and_the_changelog_item_citing_its_pull_request_are_one_change():
    # encode/uvicorn@772c24bd and docs/release-notes.md 0.30.0: "Deprecated" read as a stated change
    assert relate("Deprecate the `uvicorn.workers` module (#2302)",
                  "Deprecated: Deprecate the `uvicorn.workers` module (#2302) (version 0.30.0)",
                  0.8, strict=True).kind == SAME
    # a revert cites the reverted pull request and its own: another change (encode/uvicorn@d3e8d711)
    assert relate("Use updated headers from server state (#1639)",
                  'Revert "Use updated headers from server state (#1639)" (#1664)', 0.9, strict=True).kind == SUPERSEDES
    # a reference a text is about is its subject, not its provenance
    assert relate("Add regression test for #1765", "Fix the crash of #1765", 0.8, strict=True).kind != SAME


def test_the_memory_of_the_same_change_is_asked_before_a_closer_neighbour():
    # encode/uvicorn 0.34.0: the previous release's item (0.93) is closer than the commit (0.71);
    # the item restates the commit, so it joins the commit's memory instead of superseding the other
    from memcli.rules.decide import heuristic_decision
    item = "Removed: Drop support for Python 3.8 (#2543) (version 0.34.0)"
    near = [{"id": "prev", "text": "Removed: Drop support for Python 3.7 (#1996) (version 0.23.0)", "similarity": 0.93},
            {"id": "commit", "text": "Drop Python 3.8 (#2543)\n\n* Drop Python 3.8\n\n* Run lint", "similarity": 0.707}]
    d = heuristic_decision(item, near, 0.85, headlines=True)
    assert (d.event, d.target) == ("NONE", "commit")


def test_a_new_version_ends_every_live_older_version_of_its_package():
    # fastapi/typer docs/release-notes.md: 0.21.2 lists two bumps of rich, so both stayed current,
    # and the bump of 0.24.2 ended only one of them; a bump of another package is left alone
    from memcli.rules.decide import heuristic_decision
    item = ("⬆ Bump rich from 14.3.3 to 15.0.0. PR [#1688](https://github.com/fastapi/typer/pull/1688) by "
            "[@dependabot[bot]](https://github.com/apps/dependabot). (version 0.24.2)")
    near = [{"id": "rich-14.3.1", "text": "⬆ Bump rich from 14.2.0 to 14.3.1. PR [#1502](https://github.com/fastapi/"
             "typer/pull/1502) (version 0.21.2)", "similarity": 0.95},
            {"id": "rich-14.3.3", "text": "⬆ Bump rich from 14.3.2 to 14.3.3. PR [#1565](https://github.com/fastapi/"
             "typer/pull/1565) (version 0.24.1)", "similarity": 0.94},
            {"id": "ruff", "text": "⬆ Bump ruff from 0.15.2 to 0.15.3. PR [#1566](https://github.com/fastapi/typer/"
             "pull/1566) (version 0.24.1)", "similarity": 0.93}]
    d = heuristic_decision(item, near, 0.85, headlines=True)
    assert (d.event, d.target, d.also) == ("SUPERSEDE", "rich-14.3.1", ("rich-14.3.3",))


# expressjs/express: npm's and GitHub Actions' `name@version` is a pin, whatever the commit type says
@pytest.mark.parametrize(("old", "new", "why"), [
    ("fix(deps): body-parser@^2.0.1", "feat(deps): body-parser@^2.1.0 (#6332)", "body-parser: 2.0.1 -> 2.1.0"),
    ("deps: body-parser@1.20.2", "feat: upgrade to body-parser@1.20.3 (#5926)", "body-parser: 1.20.2 -> 1.20.3"),
    ("build: actions/checkout@v4", "build(deps): bump actions/checkout from 6.0.2 to 7.0.0 (#7345)",
     "actions/checkout: 4 -> 7.0.0"),
    ("deps: qs@^6.14.1", "fix: bump qs minimum to ^6.14.2 for CVE-2026-2391 (#7057)", "qs: 6.14.1 -> 6.14.2"),
    ("build: Node.js@18.12", "build: Node.js@18.14", "node.js: 18.12 -> 18.14"),
    ("build: support Node.js 17.x", "build: support Node.js 18.x", "node.js: 17 -> 18"),
])
def test_an_npm_style_pin_is_a_new_version_of_its_package(old, new, why):
    rel = relate(old, new, 0.9, strict=True)
    assert (rel.kind, rel.reason) == (SUPERSEDES, f"new version: {why}")


@pytest.mark.parametrize(("old", "new"), [
    ("deps: body-parser@^2.2.1 (#6922)", "deps: qs@^6.14.1"),  # two packages
    ("build: Node.js@16.17", "build: Node.js@18.7"),  # two CI lines, each pinned to its patch release
    ("build: support Node.js 18.x", "build: Node.js@16.15"),
    ("Contact me at bob@example.com", "Contact me at alice@example.com"),  # an address is no pin
    # removing some versions of a name is no removal of the name
    ("feat: adopt Node@18 as the minimum supported version", "💚 remove node <11, all failing permanently now"),
])
def test_npm_style_pins_of_other_packages_lines_or_addresses_are_distinct(old, new):
    assert relate(old, new, 0.9, strict=True).kind == DISTINCT


def test_the_same_version_said_by_a_commit_and_its_changelog_item_is_known():
    rel = relate("deps: body-parser@^2.2.0 (#6419)", "deps: `body-parser@^2.2.0` (version 5.1.0)", 0.9, strict=True)
    assert (rel.kind, rel.reason) == (SAME, "the same version said again (body-parser 2.2.0)")


@pytest.mark.parametrize("new", ["Fix support for pip>=22.1 (version 6.6.1)", "Fix support for pip>=22.1 (#1618)"])
def test_a_fix_of_a_pinned_feature_is_not_the_pin_said_again(new):
    """jazzband/pip-tools: 6.6.1's "Fix support for pip>=22.1" was absorbed into 6.6.0's "Add support
    for pip>=22.1" as "the same version said again"; the fix is another release's change."""
    assert relate("Features: Add support for pip>=22.1 (version 6.6.0)", new, 0.9, strict=True).kind == DISTINCT
    # the feature's own commit and its changelog item are still one statement
    assert relate("Add support for pip>=22.1 (#1607)", "Features: Add support for pip>=22.1 (version 6.6.0)", 0.9,
                  strict=True).kind == SAME


def test_the_same_item_in_two_releases_is_each_releases_own_change():
    # express History.md: "* update connect" in 3.2.5, 3.3.1, 3.3.8, 3.4.3... once absorbed as one fact
    rel = relate("update connect (version 3.2.5)", "update connect (version 3.4.3)", 0.99, strict=True)
    assert (rel.kind, rel.reason) == (DISTINCT, "another release's change (3.2.5 vs 3.4.3)")
    assert relate("update connect (version 3.2.5)", "update connect (version 3.2.5)", 1.0, strict=True).kind == SAME


# BurntSushi/ripgrep (Rust), a held-out replay: the texts are its commit subjects
@pytest.mark.parametrize(("old", "new", "why"), [
    # a bump naming no version still moves its package on, both ways round
    ("deps: bump to ignore 0.4.24", "deps: bump ignore version", "ignore: 0.4.24 -> a newer bump"),  # @d7982619
    ("deps: bump ignore version", "deps: bump to ignore 0.4.30", "ignore: no version -> 0.4.30"),
    ("deps: switch to tikv-jemallocator", "deps: bump to tikv-jemallocator 0.7.0",  # @53279db4, @d5b85d44
     "tikv-jemallocator: no version -> 0.7.0"),
    # "MSRV" is Rust's minimum version, by time (@1b6177bc lowered it to Debian's 1.85)
    ("msrv: bump to Rust 1.88", "cargo: set MSRV to 1.85", "rust: 1.88 -> 1.85"),
    ("cargo: set MSRV to 1.85", "msrv: bump to Rust 1.96", "rust: 1.85 -> 1.96"),
])
def test_a_rust_bump_or_msrv_is_a_new_version_of_its_subject(old, new, why):
    rel = relate(old, new, 0.9, strict=True)
    assert (rel.kind, rel.reason) == (SUPERSEDES, f"new version: {why}")


@pytest.mark.parametrize("old", ["deps: bump everything else", "deps: bump what we can", "deps: update everything"])
def test_a_bump_of_one_package_is_no_detail_of_a_catch_all_bump(old):
    """BurntSushi/ripgrep: "deps: bump crossbeam-channel from 0.5.13 to 0.5.15" (2025) was merged into
    "deps: bump everything else" (2024) as a refinement."""
    assert relate(old, "deps: bump crossbeam-channel from 0.5.13 to 0.5.15", 0.9, strict=True).kind == DISTINCT
    # a text naming the package in words is still about it
    assert relate("update ruff", "upgrade ruff", 0.95, strict=True).kind != DISTINCT


@pytest.mark.parametrize(("text", "key"), [
    ("deps: bump ignore version\n\nThis picks up the fix for #3012.", "ignore"),  # a body does not hide the name
    ("chore: bump golang.org/x/net to patched versions", "net"),
    ("Bump requests to the latest version", "requests"),
    ("chore(security): upgrade Protobuf for CVE-2024-24786 (#3893)", "protobuf"),  # gin-gonic/gin@0d9dbbb4
])
def test_a_bump_to_no_number_names_its_package(text, key):
    assert subject_keys(text) == {key}


@pytest.mark.parametrize(("old", "new"), [
    ("msrv: bump to Rust 1.88", "rust: move to Rust 2024"),  # an edition is no compiler release (@a60e62d9)
    ("rust: move to Rust 2024", "msrv: bump to Rust 1.96"),
    ("deps: bump grep to 0.4.1", "deps: bump ignore version"),  # two packages
    ("grep-0.4.1", "grep-cli-0.1.12"),  # two crates' releases
    ("deps: bump to ignore 0.4.24", "ignore-0.4.25"),  # releasing a crate is not depending on it
])
def test_an_edition_another_package_or_another_crates_release_is_distinct(old, new):
    assert relate(old, new, 0.9, strict=True).kind == DISTINCT


def test_a_workspace_crates_release_commit_supersedes_its_previous_release():
    rel = relate("ignore-0.4.32", "ignore-0.4.33", 0.95, strict=True)
    assert (rel.kind, rel.reason) == (SUPERSEDES, "newer release: ignore 0.4.32 -> 0.4.33")
    assert relate("ignore-0.4.33", "ignore-0.4.32", 0.95).reason == "older release: ignore 0.4.33 -> 0.4.32"


@pytest.mark.parametrize(("old", "new"), [
    ("build: Node.js@14.19", "build: use 64-bit Node.js in AppVeyor"),  # expressjs/express
    ("build: use 64-bit Node.js in AppVeyor", "build: Node.js@16.15"),
    ("Bump ruff from 0.1.3 to 0.1.6 (#2974)", "Enabling `ruff` C416 (#3001)"),  # psf/black
])
def test_a_version_of_a_name_is_not_replaced_by_another_claim_about_it(old, new):
    rel = relate(old, new, 0.6, strict=True)
    assert rel.kind == DISTINCT and rel.reason.startswith("two claims about")


def test_two_bumps_to_shas_are_still_a_new_version():
    old = "Bump AndreMiras/coveralls-python-action from 8799c9f4443ac42 to 65c1672f0b8a2017 (#4359)"
    new = "Bump AndreMiras/coveralls-python-action from 65c1672f0b8a2017 to ac868b9540fad490 (#4468)"
    assert relate(old, new, 0.95, strict=True).kind == SUPERSEDES


def test_gos_minimum_version_moves_on_and_a_newest_supported_go_is_another_claim():
    """gin-gonic/gin: "What is the minimum Go version gin supports?" had four live answers."""
    rel = relate("chore: support min go version 1.18 (#3511)", "build: update Gin minimum Go version to 1.21 (#3960)",
                 0.7, strict=True)
    assert (rel.kind, rel.reason) == (SUPERSEDES, "new version: go: 1.18 -> 1.21")
    rel = relate("chore(dep): Changes minimum support go version to go1.16 (#3361)",
                 "chore: support min go version 1.18 (#3511)", 0.8, strict=True)
    assert (rel.kind, rel.reason) == (SUPERSEDES, "new version: go: 1.16 -> 1.18")
    # the newest Go supported and the floor are two ends of a range; running a tool with Go names no version
    assert relate("chore(go): Add support go 1.19 (#3272)", "chore: support min go version 1.18 (#3511)", 0.8,
                  strict=True).kind == DISTINCT
    assert "go" not in subject_keys("Format with Go 1.19 formatter (#3277)")


def test_a_release_statement_naming_its_product_is_still_the_projects_release():
    """gin's headings name the product ("## Gin v1.12.0"), older ones do not: one project's releases."""
    rel = relate("Version 1.3.0 was released on 2018-08-14", "Gin version 1.12.0 was released on 2026-02-28", 0.8,
                 strict=True)
    assert (rel.kind, rel.reason) == (SUPERSEDES, "newer release: 1.3.0 -> 1.12.0")


# gin-gonic/gin (Go), a held-out replay: Go module paths and dependabot's grouped and versionless bumps
@pytest.mark.parametrize(("old", "new", "why"), [
    ("chore(deps): bump go.mongodb.org/mongo-driver from 1.17.7 to 1.17.9 (#4533)",
     "chore(binding): upgrade bson dependency to mongo-driver v2 (#4549)", "mongo-driver: 1.17.9 -> 2"),
    # a Go module's major-version suffix is no name: ".../validator/v10" is validator
    ("chore(deps): bump github.com/go-playground/validator/v10 (#4509)",
     "update validator library to version 10.30.3 (#4707)", "validator: no version -> 10.30.3"),
    ("chore(deps): bump github.com/go-playground/validator/v10 from 10.20.0 to 10.22.1 (#4052)",
     "chore(deps): bump github.com/go-playground/validator/v10 (#4208)", "validator: 10.22.1 -> a newer bump"),
    # the same versionless bump again, years later: a newer version, not the same statement
    ("chore(deps): bump github.com/go-playground/validator/v10 (#3330)",
     "chore(deps): bump github.com/go-playground/validator/v10 (#4509)", "validator: no version -> a newer bump"),
])
def test_go_module_bumps_are_new_versions_of_their_module(old, new, why):
    rel = relate(old, new, 0.9, strict=True)
    assert (rel.kind, rel.reason) == (SUPERSEDES, f"new version: {why}")


def test_two_go_modules_with_major_suffixes_are_two_subjects():
    old, new = ("chore(deps): bump github.com/pelletier/go-toml/v2 from 2.2.2 to 2.2.4",
                "chore(deps): bump github.com/goccy/go-yaml from 1.19.1 to 1.19.2")
    assert relate(old, new, 0.9, strict=True).kind == DISTINCT
    # the same bump said again (a re-opened pull request) is still the same statement
    assert relate("Bump black from 1 to 2 (#1)", "Bump black from 1 to 2 (#2)", 0.99, strict=True).kind == SAME


@pytest.mark.parametrize("old, new", [
    # simonw/sqlite-utils: commits citing one issue are its steps, not one change said twice
    ("Add --ignore to create-index as alias of --if-not-exists, refs #450", "add-column --ignore option, refs #450"),
    ("sqlite-utils query --functions option, refs #471", "sqlite-utils memory --functions, refs #471"),
    ("db.rename_table() method, refs #565", "sqlite-utils rename-table command, refs #565"),
    ("table.foreign_keys now handles compound foreign keys, refs #594",
     "transform() now round-trips compound foreign keys, refs #594"),
    ("mypy fixes, refs #440", "flake8 fix, refs #440"),
])
def test_two_commits_on_one_issue_are_two_changes(old, new):
    assert relate(old, new, 0.75, strict=True).kind == DISTINCT


def test_one_pull_request_is_one_change_and_a_commit_is_its_changelog_item():
    # a cherry-pick or backport cites the pull request; the changelog item cites the issue it closed
    assert relate("Fix CSV header handling (#707)", "Fix CSV header handling on 3.x (#707)", 0.95,
                  strict=True).kind == SAME
    rel = relate("Fix for table.insert(..., pk=..., ignore=True), closes #554",
                 "Fixed an ``IndexError`` from ``table.insert(..., pk=..., ignore=True)``. (:issue:`554`) "
                 "(version 4.0rc4)", 0.8, strict=True)
    assert (rel.kind, rel.reason) == (SAME, "the same change (#554) said again")


@pytest.mark.parametrize("old, new, name", [
    # simonw/sqlite-utils: the removed thing named in plain words, or beside other names
    ("Use sqlean if available in environment (#560)", "Remove sqlean.py support (#772)", "sqlean"),
    (".convert(skip_false) option, refs #527", "Removed convert skip_false and --skip-false, closes #542",
     "skip-false"),
    ("Experimental TUI powered by Trogon", "Removed trogon feature in favor of sqlite-util-tui", "trogon"),
    ("``sqlite-utils`` will now use `sqlean.py <https://github.com/nalgeon/sqlean.py>`__ in place of ``sqlite3`` "
     "if it is installed. (version 3.33)", "Removed support for using ``sqlean.py`` as a drop-in replacement for "
     "``sqlite3``. ``sqlite-utils`` will now use ``pysqlite3`` if it is installed. (version 4.0rc3)", "sqlean.py"),
    # the flag pair's other half, after the command's name (simonw/sqlite-utils)
    ("--no-skip-false option, plus docs - closes #527", "Removed convert skip_false and --skip-false, closes #542",
     "--no-skip-false"),
    # a changelog category or a conventional-commit type before the verb (Textualize/rich 14.1.0)
    ("Fixed: Fixed typing_extensions dependency (version 13.9.1)",
     "Changed: Removed `typing_extensions` from runtime dependencies (version 14.1.0)", "typing-extensions"),
    ("Add `foo` helper", "refactor(utils): remove `foo` helper", "foo"),
    # a package's name in two words (Textualize/rich 12.5.1)
    ("Fixed: Fixed missing typing extensions dependency on 3.9 (version 12.5.1)",
     "Changed: Removed `typing_extensions` from runtime dependencies (version 14.1.0)", "typing-extensions"),
])
def test_a_removal_ends_what_was_said_of_the_name_in_plain_words(old, new, name):
    rel = relate(old, new, 0.6, strict=True)
    assert (rel.kind, rel.reason) == (SUPERSEDES, f"states a removal: {name}")


def test_a_short_flag_beside_its_long_name_is_that_option():
    # simonw/sqlite-utils: the fix of `--detect-types` ends with the flag's removal as "-d/--detect-types"
    assert removal_of("Fix issue #702: Handle CSV with only header row in --detect-types (#707)",
                      "Remove the no-op -d/--detect-types flag from insert and upsert") == "--detect-types"


@pytest.mark.parametrize("old, new", [
    ("Bump mypy from 1.2.0 to 1.3.0 (#2165)", "Remove mypy skip flags (#2497)"),  # removes flags, not mypy
    ("Bump `black` to 22.3.0 (#2153)", "remove unnecessary black argument (#2817)"),
    ("Support Python 3.13 (#2662)", "Drop Python 3.8 (#2823)"),  # a range's other end
    ("build: support Node.js 14.x", "Drop support for Node.js below 4"),
    ("Add `request` getter/setter to `HTTPError` (#2158)", "Remove `RequestBodyUnavailable` from module docstring"),
    # removed from somewhere the old text says nothing of: the name itself stays (encode/httpx, expressjs/express)
    ("Read upload files using `read(CHUNK_SIZE)` rather than `iter()`. (#1948)",
     "remove `chunk_size` from api docs for `iter_lines` variants (#2464)"),
    ("update history.md for acceptParams change (#6177)", "chore: remove history.md from being packaged on publish"),
    # the old text removed it already, in other words: the release's item says that change again
    ("chore: replace `methods` dependency with standard library (#6196)", "deps: remove `methods` (version 5.1.0)"),
    ("fix(buffer): use node:buffer instead of safe-buffer (#6071)", "deps: remove `safe-buffer` (version 5.1.0)"),
    # removed from the dependencies: what the old text says of the name elsewhere stays (Textualize/rich)
    ("Move `typing_extensions` into `TYPE_CHECKING` block",
     "Changed: Removed `typing_extensions` from runtime dependencies (version 14.1.0)"),
    # a plain word after a qualifier is no code name (gin-gonic/gin)
    ("docs(context): #3369 modify the annotation about Context.Param() (#3414)",
     "refactor(context): remove unused Context dependency in get method (#4304)"),
])
def test_a_removal_of_something_else_ends_nothing(old, new):
    assert relate(old, new, 0.6, strict=True).kind != SUPERSEDES


def test_python_written_without_a_space_is_python():
    # Textualize/rich 14.2.0: "Python3.14 compatibility"; 3.13 is still supported beside it
    assert subject_keys("Python3.14 compatibility (version 14.2.0)") == {"python"}
    assert gives_version("python", "bump for Python3.14")
    assert relate("Added support for Python 3.13 (version 13.8.1)", "Python3.14 compatibility (version 14.2.0)",
                  0.8, strict=True).kind == DISTINCT


@pytest.mark.parametrize("old, new, similarity", [
    # Textualize/rich: a later commit saying more of the same thing is another change to it
    ("group exceptions", "detect recursion in Exception Groups", 0.56),
    ("Add support for tables in Markdown",
     "Update styling to be minimal in markdown tables, add inline style support", 0.71),
    ("deps: bump what we can", "deps: bump pcre2 and pcre2-sys", 0.7),  # BurntSushi/ripgrep
])
def test_a_later_commit_adding_words_is_another_change(old, new, similarity):
    rel = relate(old, new, similarity, strict=True)
    assert rel.kind == DISTINCT and rel.reason.startswith("another commit on it")


def test_a_commit_still_joins_the_changelog_item_that_says_more_of_it():
    old, new = "render notes in traceback", ("Changed: Rich tracebacks will now render notes on Python 3.11 onwards "
                                             "(added with `Exception.add_note`) (version 14.0.0)")
    assert relate(old, new, 0.7, strict=True).kind != DISTINCT


def test_a_revert_of_another_fix_on_one_subject_reverts_nothing_here():
    # Textualize/rich 9.8.2 / 10.15.1: the category "Fixed:" had made "fix" a shared word
    rel = relate("Fixed: Fixed deadlock in live (version 9.8.2)",
                 "Fixed: Reverted thread-safety fix for Live that introduced deadlock potential (version 10.15.1)",
                 0.68, strict=True)
    assert rel.kind != SUPERSEDES


def test_python_dash_m_names_the_module_not_a_flag():
    # Textualize/rich 1.0.1 / 1.0.3: `python -m rich.markdown` had been a new value of "-m"
    assert subject_keys("Added: Added `python -m rich.syntax` command (version 1.0.3)") == {"rich.syntax"}
    assert relate("Added: Added `python -m rich.syntax` command (version 1.0.3)",
                  "Added: Added `python -m rich.markdown` command (version 1.0.1)", 0.9, strict=True).kind == DISTINCT


def test_a_close_rewording_of_a_commit_is_still_the_same_change():
    # pallets/click: the later commit says the same change better (0.81)
    rel = relate("Hide UNSET in the callback",
                 "Temporarily provide a fake context to the callback to hide `UNSET` values as `None`", 0.81,
                 strict=True)
    assert rel.kind != DISTINCT
