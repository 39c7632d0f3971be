"""A changelog's release sections into memories (memcli/services/changelog.py): every item states
its release, the release is a fact, a later release's removal supersedes the earlier deprecation,
and the newest release statement is the current one. Sections quoted (trimmed) from
encode/httpx CHANGELOG.md @ ae1b9f6623."""

from __future__ import annotations

import json

import pytest

from memcli.rules.relate import DISTINCT, SUPERSEDES, relate
from memcli.services.changelog import is_section, section_facts
from tests.conftest import listed

V0270 = """## 0.27.0 (21st February, 2024)

### Deprecated

* The `app=...` shortcut has been deprecated. Use the explicit style of `transport=httpx.WSGITransport()` \
or `transport=httpx.ASGITransport()` instead.

### Fixed

* Respect the `http1` argument while configuring proxy transports. (#3023)
"""
V0280 = """## 0.28.0 (28th November, 2024)

The 0.28 release includes a limited set of deprecations.

* The deprecated `proxies` argument has now been removed.
* The deprecated `app` argument has now been removed.
"""


def test_a_section_is_a_release_statement_and_one_fact_per_item():
    assert is_section(V0270) and not is_section("Respect the `http1` argument. (#3023)")
    assert section_facts(V0270, "2024-02-21T00:00:00Z") == [
        "Version 0.27.0 was released on 2024-02-21",
        "Deprecated: The `app=...` shortcut has been deprecated. Use the explicit style of "
        "`transport=httpx.WSGITransport()` or `transport=httpx.ASGITransport()` instead. (version 0.27.0)",
        "Fixed: Respect the `http1` argument while configuring proxy transports. (#3023) (version 0.27.0)",
    ]


def test_a_later_release_supersedes_the_deprecation_and_the_older_release(cli):
    lines = [{"text": V0270, "origins": ["changelog:0.27.0"], "created": "2024-02-21T00:00:00Z"},
             {"text": V0280, "origins": ["changelog:0.28.0"], "created": "2024-11-28T00:00:00Z"}]
    cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in lines))
    live = [m["text"] for m in listed(cli.store)]
    assert "Version 0.28.0 was released on 2024-11-28" in live
    assert "Version 0.27.0 was released on 2024-02-21" not in live
    assert not any(t.startswith("Deprecated: The `app=...` shortcut") for t in live)
    assert "The deprecated `app` argument has now been removed. (version 0.28.0)" in live
    assert any(t.startswith("Fixed: Respect the `http1` argument") for t in live)  # another subject: untouched
    hits = json.loads(cli("search", "--json", "what is the latest httpx release?").stdout)["results"]
    releases = [h["text"] for h in hits if h["text"].startswith("Version ")]
    assert releases == ["Version 0.28.0 was released on 2024-11-28"]


def test_two_releases_of_one_day_keep_the_higher_version_current(cli):
    # encode/httpx CHANGELOG.md: 0.27.1 and 0.27.2 are both dated 27th August, 2024
    lines = [{"text": f"## {v} (27th August, 2024)\n\n* Fixed: item of {v}.", "origins": [f"changelog:{v}"],
              "created": "2024-08-27T00:00:00Z"} for v in ("0.27.2", "0.27.1")]
    cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in lines))
    live = [m["text"] for m in listed(cli.store)]
    assert "Version 0.27.2 was released on 2024-08-27" in live
    assert "Version 0.27.1 was released on 2024-08-27" not in live


def test_an_unreleased_section_is_the_version_in_development_not_the_latest_release(cli):
    # pallets/click CHANGES.md: "## Version 8.5.0" then "Unreleased" above "## Version 8.4.2 / Released ..."
    lines = [{"text": "## Version 8.4.2\n\nReleased 2026-07-01\n\n- Fix a pager race.", "origins": ["changelog:8.4.2"],
              "created": "2026-07-01T00:00:00Z"},
             {"text": "## Version 8.5.0\n\nUnreleased\n\n- Add PowerShell completion.", "origins": ["changelog:8.5.0"],
              "created": "2026-08-19T00:00:00Z"}]
    cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in lines))
    live = [m["text"] for m in listed(cli.store)]
    assert "Version 8.4.2 was released on 2026-07-01" in live  # still the latest release
    assert "Version 8.5.0 is in development (unreleased)" in live
    assert not any(t.startswith("Version 8.5.0 was released") for t in live)


def _typer_item(frm: str, to: str, pr: int) -> str:
    return (f"* ⬆ Bump rich from {frm} to {to}. PR [#{pr}](https://github.com/fastapi/typer/pull/{pr}) by "
            "[@dependabot[bot]](https://github.com/apps/dependabot).")


def test_one_live_value_when_a_section_bumps_twice_and_a_replaced_commit_is_listed_later(cli):
    """fastapi/typer: release 0.21.2 lists two bumps of rich; the commits of #1565 and #1688 came
    before the release notes that list them. In the end one rich version is current (15.0.0), and
    the release-notes line of the replaced #1565 joins that commit's memory as history."""
    lines = [
        {"text": f"## 0.21.2\n\n### Internal\n\n{_typer_item('14.2.0', '14.3.1', 1502)}\n"
                 f"{_typer_item('14.3.1', '14.3.2', 1509)}", "origins": ["changelog:0.21.2"],
         "created": "2026-02-10T00:00:00Z"},
        {"text": "⬆ Bump rich from 14.3.2 to 14.3.3 (#1565)", "origins": ["git:19aaf0be"],
         "created": "2026-02-20T10:54:52Z"},
        {"text": f"## 0.24.1\n\n### Internal\n\n{_typer_item('14.3.2', '14.3.3', 1565)}",
         "origins": ["changelog:0.24.1"], "created": "2026-02-21T00:00:00Z"},
        {"text": "⬆ Bump rich from 14.3.3 to 15.0.0 (#1688)", "origins": ["git:cfe4f429"],
         "created": "2026-04-14T08:06:49Z"},
        {"text": f"## 0.24.2\n\n### Internal\n\n{_typer_item('14.3.3', '15.0.0', 1688)}",
         "origins": ["changelog:0.24.2"], "created": "2026-04-22T00:00:00Z"},
    ]
    cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in lines))
    live = [m for m in listed(cli.store) if "Bump rich" in m["text"]]
    assert [(m["text"], sorted(m["origins"])) for m in live] == [
        ("Bump rich from 14.3.3 to 15.0.0 (#1688)", ["changelog:0.24.2", "git:cfe4f429"])]
    everything = [m for m in listed(cli.store, "--all") if "(#1565)" in m["text"]]
    assert len(everything) == 1 and "changelog:0.24.1" in everything[0]["origins"]


def test_a_release_notes_line_finds_its_commit_among_many_alike_bumps(cli):
    """fastapi/typer: dozens of ty bumps, then "Bump ty to 0.0.53 (#1877)"; its release-notes line
    is nearer to the other release-notes lines than to its commit, yet joins the commit's memory
    (found by the pull request it cites), and one ty version is current."""
    commits = [{"text": f"⬆ Bump ty from 0.0.{n} to 0.0.{n + 1} (#{1500 + n})", "origins": [f"git:{n:07x}"],
                "created": f"2026-03-{n:02d}T00:00:00Z"} for n in range(1, 25)]
    commits.append({"text": "⬆️ Bump ty to 0.0.53 (#1877)", "origins": ["git:5c7e904e"],
                    "created": "2026-07-13T12:52:33Z"})
    items = "\n".join(f"* ⬆ Bump ty from 0.0.{n} to 0.0.{n + 1}. PR [#{1500 + n}](https://github.com/fastapi/typer/"
                      f"pull/{1500 + n}) by [@dependabot[bot]](https://github.com/apps/dependabot)."
                      for n in range(1, 25))
    items += ("\n* ⬆️ Bump ty to 0.0.53. PR [#1877](https://github.com/fastapi/typer/pull/1877) by "
              "[@YuriiMotov](https://github.com/YuriiMotov).")
    section = {"text": f"## 0.27.0\n\n### Internal\n\n{items}", "origins": ["changelog:0.27.0"],
               "created": "2026-07-15T00:00:00Z"}
    # the commits as their hook or a replay stored them, then the release notes (as bench/realdata does)
    cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in commits))
    cli("add", "--no-llm", "--json", "--batch", "-", input=json.dumps(section))
    live = [m for m in listed(cli.store) if "Bump ty" in m["text"]]
    assert [(m["text"], sorted(m["origins"])) for m in live] == [
        ("Bump ty to 0.0.53 (#1877)", ["changelog:0.27.0", "git:5c7e904e"])]


def test_a_bump_finds_the_current_version_behind_a_long_chain_of_replaced_ones(cli):
    """fastapi/typer bumped ty 40 times: the nearest 16 memories of the next bump were all replaced
    ones, so "Bump ty from 0.0.34 to 0.0.35" was added beside the current "... to 0.0.34". Here the
    current one carries a long body (so it is the farthest) and 20 older bumps, replayed after it,
    are stored as its history."""
    body = " ".join(f"Release notes line {n}: the checker reports unused ignores in module m{n}." for n in range(40))
    lines = [{"text": f"⬆ Bump ty from 0.0.33 to 0.0.34 (#1729)\n\n{body}", "origins": ["git:a8a1d6ca"],
              "created": "2026-05-04T16:58:28Z"}]
    lines += [{"text": f"⬆ Bump ty from 0.0.{n} to 0.0.{n + 1} (#{1500 + n})", "origins": [f"git:{n:07x}"],
               "created": f"2026-03-{n:02d}T00:00:00Z"} for n in range(1, 21)]
    for line in lines:  # one add per commit, as the hook's worker stores them
        cli("add", "--no-llm", "--json", "--batch", "-", input=json.dumps(line))
    assert [m["text"][:37] for m in listed(cli.store) if "Bump ty" in m["text"]] == [
        "Bump ty from 0.0.33 to 0.0.34 (#1729)"]
    cli("add", "--no-llm", "--json", "--batch", "-", input=json.dumps(
        {"text": "⬆ Bump ty from 0.0.34 to 0.0.35 (#1740)", "origins": ["git:2da8d327"],
         "created": "2026-05-12T10:40:53Z"}))
    live = [m["text"] for m in listed(cli.store) if "Bump ty" in m["text"]]
    assert live == ["Bump ty from 0.0.34 to 0.0.35 (#1740)"]


def test_a_versioned_line_finds_the_live_memories_of_its_package_by_name(cli):
    """fastapi/typer: among ~900 memories the 16 nearest vectors of a 0.21.2 release-notes rich bump
    held no rich memory at all, so it never met the current rich bump. The keyword index finds the
    live memories of the one package it names, and the memory of the pull request it cites."""
    from memcli.ops.add import _keyed_hits
    from memcli.ops.handle import Store

    commits = [{"text": "⬆ Bump rich from 14.3.2 to 14.3.3 (#1565)", "origins": ["git:19aaf0be"],
                "created": "2026-02-20T10:54:52Z"},
               {"text": "⬆ Bump rich from 14.3.3 to 15.0.0 (#1688)", "origins": ["git:cfe4f429"],
                "created": "2026-04-14T08:06:49Z"},
               {"text": "⬆ Bump ruff from 0.15.1 to 0.15.2 (#1567)", "origins": ["git:98bd1a76"],
                "created": "2026-02-20T11:00:00Z"},
               {"text": "Fix `TYPER_USE_RICH` parsing to allow disabling Rich completely (#1539)",
                "origins": ["git:aaaa1539"], "created": "2026-02-12T00:00:00Z"}]
    cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in commits))
    index = Store(cli.store).index
    index.sync()
    line = _typer_item("14.2.0", "14.3.1", 1502)[2:] + " (version 0.21.2)"
    found = _keyed_hits(index, line, index.embedder.embed([line])[0])
    texts = [index.records([lab])[lab].text for lab, _ in found]
    assert texts == ["Bump rich from 14.3.3 to 15.0.0 (#1688)"]  # live, the same package, nothing else
    item = _typer_item("14.3.3", "15.0.0", 1688)[2:] + " (version 0.24.2)"
    found = _keyed_hits(index, item, index.embedder.embed([item])[0])
    assert [index.records([lab])[lab].text for lab, _ in found] == ["Bump rich from 14.3.3 to 15.0.0 (#1688)"]



def test_a_removal_ends_the_items_that_name_the_package_in_plain_words(cli):
    """Textualize/rich: 14.1.0's "Changed: Removed `typing_extensions` from runtime dependencies" left
    13.9.1's "Fixed typing_extensions dependency" live, among a dozen other dependency items (the
    category before the verb hid the removal, and the plain name was no subject)."""
    from memcli.ops.add import _keyed_hits
    from memcli.ops.handle import Store

    packages = ["pygments", "markdown-it-py", "colorama", "commonmark", "ipywidgets", "attrs", "setuptools", "mdurl"]
    lines = [{"text": f"## [12.{i}.0] - 2022-0{1 + i}-01\n\n### Fixed\n\n- Fixed `{p}` dependency missing from "
                      f"runtime dependencies on Python 3.{7 + i % 5}\n",
              "created": f"2022-0{1 + i}-01T00:00:00Z", "origins": [f"changelog:12.{i}.0"]}
             for i, p in enumerate(packages)]
    lines.append({"text": "## [13.9.1] - 2024-10-01\n\n### Fixed\n\n- Fixed typing_extensions dependency\n",
                  "created": "2024-10-01T00:00:00Z", "origins": ["changelog:13.9.1"]})
    cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in lines))
    removal = "Changed: Removed `typing_extensions` from runtime dependencies (version 14.1.0)"
    index = Store(cli.store).index
    index.sync()
    found = _keyed_hits(index, removal, index.embedder.embed([removal])[0])
    assert [index.records([lab])[lab].text for lab, _ in found] == [
        "Fixed: Fixed typing_extensions dependency (version 13.9.1)"]  # found by name, nothing else
    section = {"text": "## [14.1.0] - 2025-06-25\n\n### Changed\n\n- Removed `typing_extensions` from runtime "
                       "dependencies\n", "created": "2025-06-25T00:00:00Z", "origins": ["changelog:14.1.0"]}
    out = json.loads(cli("add", "--no-llm", "--json", "--batch", "-", input=json.dumps(section)).stdout)
    assert [m["old_memory"] for m in out["memory"] if m["text"].startswith("Changed:")] == [
        "Fixed: Fixed typing_extensions dependency (version 13.9.1)"]
    live = [m["text"] for m in json.loads(cli("list", "--json").stdout)["memories"]]
    assert "Fixed: Fixed typing_extensions dependency (version 13.9.1)" not in live
    assert sum("dependency missing" in t for t in live) == len(packages)  # the other packages' items stay


def test_a_release_notes_line_joins_its_commit_however_differently_worded(cli):
    """fastapi/typer 0.24.2: the line is 0.69 from its commit and nearer to other packages' lines,
    so its commit fell outside the eight candidates kept, and the line was added as a second,
    current copy of the rich bump; the same pull request makes it the same change."""
    commit = {"text": "⬆ Bump rich from 14.3.3 to 15.0.0 (#1688)", "origins": ["git:cfe4f429"],
              "created": "2026-04-14T08:06:49Z"}
    pkgs = ("ruff", "prek", "pydantic", "mkdocs-material", "ty", "mypy", "pytest", "coverage", "griffe", "cryptography")
    others = "\n".join(f"* ⬆ Bump {p} from 1.{n}.0 to 1.{n + 1}.0. PR [#{1600 + n}](https://github.com/fastapi/typer/"
                       f"pull/{1600 + n}) by [@dependabot[bot]](https://github.com/apps/dependabot)."
                       for n, p in enumerate(pkgs))
    earlier = {"text": f"## 0.24.1\n\n### Internal\n\n{others}", "origins": ["changelog:0.24.1"],
               "created": "2026-04-01T00:00:00Z"}  # ten live lines nearer to the rich line than its commit
    cli("add", "--no-llm", "--json", "--batch", "-", input="\n".join(json.dumps(x) for x in (commit, earlier)))
    section = {"text": f"## 0.24.2\n\n### Internal\n\n{_typer_item('14.3.3', '15.0.0', 1688)}",
               "origins": ["changelog:0.24.2"], "created": "2026-04-22T00:00:00Z"}
    cli("add", "--no-llm", "--json", "--batch", "-", input=json.dumps(section))
    live = [(m["text"], sorted(m["origins"])) for m in listed(cli.store) if "Bump rich" in m["text"]]
    assert live == [("Bump rich from 14.3.3 to 15.0.0 (#1688)", ["changelog:0.24.2", "git:cfe4f429"])]


# expressjs/express History.md @ a3714473: a category given as a list item over its own items
EXPRESS_500 = """5.0.0 / 2024-09-10
=========================
* remove:
  - `path-is-absolute` dependency - use `path.isAbsolute` instead
* breaking:
  * `res.status()` accepts only integers, and input must be greater than 99 and less than 1000
    * will throw a `RangeError: Invalid status code` for values outside this range
  * deps: send@1.0.0
* deps: debug@4.3.6
* deps: mime-types@^3.0.0
  - `application/javascript` => `text/javascript`
"""


def test_a_category_item_gives_each_of_its_items_a_fact():
    assert section_facts(EXPRESS_500) == [
        "Version 5.0.0 was released on 2024-09-10",
        "remove: `path-is-absolute` dependency - use `path.isAbsolute` instead (version 5.0.0)",
        "breaking: `res.status()` accepts only integers, and input must be greater than 99 and less than 1000; "
        "will throw a `RangeError: Invalid status code` for values outside this range (version 5.0.0)",
        "breaking: deps: send@1.0.0 (version 5.0.0)",
        "deps: debug@4.3.6 (version 5.0.0)",
        "deps: mime-types@^3.0.0; `application/javascript` => `text/javascript` (version 5.0.0)",
    ]


def test_a_towncrier_byline_is_no_part_of_the_fact():
    """jazzband/pip-tools: "... with pip version 26.2 -- by {user}`sirosen`." was kept as "... 26.2 -- by."."""
    section = ("## v7.6.1\n\n*2026-08-11*\n\n### Features\n\n- pip-tools is now compatible with pip version 26.2"
               " -- by {user}`sirosen`.\n\n  *PRs and issues:* {issue}`2436`\n\n- Fixed CI triggers so that release"
               " tags won't create spurious failing runs --\n  by {user}`sirosen` and {user}`webknjaz`.\n")
    assert section_facts(section)[1:] == [
        "Features: pip-tools is now compatible with pip version 26.2. (version 7.6.1)",
        "Features: Fixed CI triggers so that release tags won't create spurious failing runs. (version 7.6.1)"]


@pytest.mark.parametrize(("heading", "version"), [
    ("## Gin v1.12.0", "Gin version 1.12.0"), ("## Gin 1.2.0", "Gin version 1.2.0"),
    ("## Gin 1.0rc1 (May 22, 2015)", "Gin version 1.0rc1"), ("## 1.2.3", "Version 1.2.3"),
    # a note's heading is no release: two numbers and no "v", date or parenthesis after the name
    ("## Python 3.12", None), ("## Python 3.12 support", None), ("## Postgres 16", None),
])
def test_a_release_heading_may_name_its_product(heading, version):
    """gin-gonic/gin's CHANGELOG.md names the product in each heading ("## Gin v1.12.0"): such a section was
    read as prose (no release statement, no item facts). The release statement keeps the name, so that
    "What is the latest Gin release?" finds it."""
    facts = section_facts(f"{heading}\n\n### Features\n\n- feat(render): add bson protocol ([#4145](u))\n",
                          "2026-02-28T00:00:00Z")
    if version is None:
        assert facts == [] and not is_section(f"{heading}\n\n- item one\n")
    else:
        assert facts[0] == f"{version} was released on 2026-02-28"
        number = version.split()[-1]
        assert facts[1] == f"Features: feat(render): add bson protocol ([#4145](u)) (version {number})"



@pytest.mark.parametrize(("old", "new"), [
    # BurntSushi/ripgrep 0.9.0 / 0.10.0: "now" announces a new thing, it replaces no value
    ("[BUG #853](https://github.com/BurntSushi/ripgrep/issues/853): Upgrade `grep` crate to `regex-syntax 0.6.0`."
     " (version 0.9.0)",
     "[FEATURE #162](https://github.com/BurntSushi/ripgrep/issues/162): libripgrep is now a thing. The primary"
     " crate is [`grep`](https://docs.rs/grep). (version 0.10.0)"),
    # psf/black 22.10.0 / 23.12.0: wheels for a new Python leave the older Python's
    ("Faster compiled wheels are now available for CPython 3.11 (#3276) (version 22.10.0)",
     "Faster compiled wheels are now available for CPython 3.12 (#4070) (version 23.12.0)"),
])
def test_an_announced_addition_ends_nothing(old, new):
    rel = relate(old, new, 0.8, strict=True)
    assert rel.kind == DISTINCT and rel.reason.startswith("announces an addition")


def test_now_that_states_a_change_still_supersedes():
    assert relate("Bump ruff from 0.15.4 to 0.15.5 (#1625)", "Bump ruff from 0.15.5 to 0.15.6 (#1633)",
                  0.9, strict=True).kind == SUPERSEDES
    # another change word beside an announcing "now" states a change
    assert relate("Use `pip-compile` to pin the requirements files.",
                  "Use `uv pip compile` instead of `pip-compile`: it now works with the pinned requirements files.",
                  0.8, strict=True).kind == SUPERSEDES
    # outside commits and changelogs "now" is read as ever
    assert relate("The docs are deployed to Read the Docs.", "The docs are now deployed to GitHub Pages.",
                  0.8).kind == SUPERSEDES


def test_a_restructuredtext_label_is_no_part_of_the_item_before_it():
    # simonw/sqlite-utils docs/changelog.rst: the next section's label sits at the end of this one
    section = ("3.39 (2025-11-24)\n-----------------\n\n- ``sqlite-utils`` now requires Python 3.10 or higher.\n\n"
               ".. _v4_0a1:\n")
    assert section_facts(section) == ["Version 3.39 was released on 2025-11-24",
                                      "``sqlite-utils`` now requires Python 3.10 or higher. (version 3.39)"]
