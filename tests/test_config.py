"""Settings: config.toml, then MEMCLI_* environment, then flags; bad settings are one-line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memcli.core.config import Config, ConfigError, Ranking, load_config

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_config() -> str:
    text = README.read_text(encoding="utf-8")
    return re.search(r"```toml\n(.*?)```", text, re.S).group(1)


def test_the_readme_config_example_is_valid(tmp_path, monkeypatch):
    (tmp_path / "config.toml").write_text(readme_config())
    monkeypatch.setenv("MEMCLI_TRUST_STORE_CONFIG", "1")  # it sets the LLM: only read from a trusted store
    cfg = load_config(tmp_path)
    assert cfg.llm_model == "ollama/llama3.1" and cfg.api_base == "http://localhost:11434"
    assert cfg.ranking == Ranking()  # the README documents the defaults
    assert cfg.llm_backoff == 0.5 and cfg.add_threshold == 0.85


def test_environment_beats_the_file_and_flags_beat_both(tmp_path, monkeypatch):
    (tmp_path / "config.toml").write_text('llm_model = "ollama/llama3.1"\nuser = "alice"\n')
    monkeypatch.setenv("MEMCLI_TRUST_STORE_CONFIG", "1")
    monkeypatch.setenv("MEMCLI_LLM_MODEL", "openai/local")
    cfg = load_config(tmp_path)
    assert (cfg.llm_model, cfg.user) == ("openai/local", "alice")
    assert cfg.with_overrides(llm_model="gpt-4o-mini", user=None).llm_model == "gpt-4o-mini"


def test_no_file_means_defaults(tmp_path):
    assert load_config(tmp_path) == Config()


@pytest.mark.parametrize("content, message", [
    ("llm_model = ", "invalid TOML"),
    ('colour = "blue"\n', "unknown setting 'colour'"),
    ('[ranking]\nsimilarity = "high"\n', "must be a number"),
    ('[ranking]\nboost = 1\n', "unknown ranking setting 'boost'"),
])
def test_bad_settings_are_named(tmp_path, content, message):
    (tmp_path / "config.toml").write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path)


def test_a_bad_config_is_one_line_on_the_command_line(hash_cli):
    hash_cli("init")
    (hash_cli.store / "config.toml").write_text('colour = "blue"\n')
    r = hash_cli("list", ok=False)
    assert r.exit_code == 1
    assert r.stderr.strip().count("\n") == 0 and "unknown setting 'colour'" in r.stderr
