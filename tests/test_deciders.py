"""The decider seam (memcli.rules.deciders): the built-ins are found as an extension is, through
the `memcli.deciders` entry points, and a plug-in named in the config decides what `add` does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

import pytest
from conftest import Cli

import memcli.ops.add as add_ops
import memcli.rules.deciders as deciders
from memcli.core.config import Config
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
    # a built-in is made as a plug-in is: factory(client=, config=)
    assert isinstance(deciders.load_decider("heuristic")(client=None, config=Config()), deciders.HeuristicDecider)
    llm = deciders.load_decider("llm")(client=object(), config=Config(llm_decide_threshold=0.7, redact=False))
    assert isinstance(llm, deciders.LLMDecider) and llm.bar == 0.7 and llm.scrub is None
    assert isinstance(deciders.load_decider("llm")(client=None, config=Config()), deciders.HeuristicDecider)


def test_an_uninstalled_source_tree_falls_back_to_the_same_factories(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deciders, "entry_points", lambda group: [])
    assert deciders.load_decider("llm") is deciders.llm_decider
    made = deciders.load_decider("llm")(client=object(), config=Config(llm_decide_threshold=0.7))
    assert isinstance(made, deciders.LLMDecider) and made.scrub is not None


def test_add_makes_a_built_in_decider_the_plug_in_way(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, tuple[str, ...]]] = []

    def load(name: str) -> Any:
        factory = deciders.load_decider(name)

        def build(**kwargs: Any) -> Any:
            made.append((name, tuple(sorted(kwargs))))
            return factory(**kwargs)
        return build

    monkeypatch.setattr(add_ops, "load_decider", load)
    cli = Cli(tmp_path / "s")
    cli("add", "The API server listens on port 8080.")
    cli("add", "The API server listens on port 8080 in production.")
    assert made and set(made) == {("heuristic", ("client", "config"))}


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
