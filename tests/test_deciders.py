"""The decider seam (memcli.rules.deciders): the built-ins are found as an extension is, through
the `memcli.deciders` entry points, and a plug-in named in the config decides what `add` does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

import pytest
from conftest import Cli

import memcli.rules.deciders as deciders
from memcli.core.decision import Decision

SEEN: list[dict[str, Any]] = []


@dataclass
class KeepBoth:
    """A plug-in decider: every fact is new (a store that never merges wording)."""

    client: Any = None
    config: Any = None

    def decide(self, facts, neighbours, threshold, *, headlines=False):
        SEEN.extend({"fact": f.text, "neighbours": [n["text"] for n in nb]} for f, nb in zip(facts, neighbours))
        return [Decision("ADD", reasoning="keep-both plug-in: every fact is new") for _ in facts], []


def test_the_built_ins_are_registered_as_entry_points() -> None:
    names = {ep.name for ep in deciders.entry_points(group=deciders.GROUP)}
    assert {"heuristic", "llm"} <= names
    assert deciders.load_decider("heuristic") is deciders.HeuristicDecider
    assert deciders.load_decider("llm") is deciders.LLMDecider


def test_a_plug_in_decider_named_in_the_config_decides_add(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = deciders.entry_points
    plug = EntryPoint(name="keep-both", value=f"{__name__}:KeepBoth", group=deciders.GROUP)
    monkeypatch.setattr(deciders, "entry_points", lambda group: [*real(group=group), plug])
    first, second = "The API server listens on port 8080.", "The API server listens on port 8080 in production."

    rules = Cli(tmp_path / "rules")
    rules("add", first)
    out = json.loads(rules("add", "--json", second).stdout)
    assert [m["event"] for m in out["memory"]] != ["ADD"]  # the rules: the same fact, not a new one

    SEEN.clear()
    plugged = Cli(tmp_path / "plugged", env={"MEMCLI_DECIDER": "keep-both"})
    plugged("add", first)
    out = json.loads(plugged("add", "--json", second).stdout)
    assert [m["event"] for m in out["memory"]] == ["ADD"]
    assert "keep-both plug-in" in out["memory"][0]["reasoning"]
    # the plug-in was handed the fact with its close memory; an exact repeat never reaches it
    assert SEEN[-1] == {"fact": second, "neighbours": [first]}
    calls = len(SEEN)
    again = json.loads(plugged("add", "--json", first).stdout)
    assert [m["event"] for m in again["memory"]] == ["NONE"] and len(SEEN) == calls


def test_an_unknown_decider_is_a_one_line_error(tmp_path) -> None:
    cli = Cli(tmp_path / "s", env={"MEMCLI_DECIDER": "nope"})
    r = cli("add", "The nightly backup runs at 02:00 UTC.", ok=False)
    assert r.exit_code == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "decider 'nope' is not installed" in err[0] and "heuristic" in err[0]
