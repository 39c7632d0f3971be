"""One error family: every expected failure is a MemcliError with an exit status, and the shared
vocabularies (types, formats, sort keys) are the ones the CLI and completion offer."""

from __future__ import annotations

import pytest

from memcli.core import errors
from memcli.core.config import ConfigError
from memcli.core.errors import ExitStatus, InvalidInput, MemcliError, NotFound, StoreError
from memcli.core.vocab import ExportFormat, MemoryType, SortKey
from memcli.index import SORT_KEYS, IndexError_
from memcli.ops.add import IngestError
from memcli.ops.io import FORMATS, ImportError_
from memcli.services.embed import EmbedError
from memcli.services.llm.client import LLMError, LLMFormatError
from tools.completion import CHOICES


@pytest.mark.parametrize("cls", [StoreError, NotFound, ConfigError, EmbedError, LLMError, LLMFormatError,
                                 IndexError_, ImportError_, IngestError, errors.Conflict, errors.LLMUnavailable,
                                 errors.LLMNotConfigured])
def test_every_library_error_is_one_family(cls: type[Exception]) -> None:
    assert issubclass(cls, MemcliError)
    assert cls.exit_status in (ExitStatus.ERROR, ExitStatus.USAGE)


def test_exit_statuses_are_the_documented_ones() -> None:
    assert (ExitStatus.OK, ExitStatus.ERROR, ExitStatus.USAGE, ExitStatus.INTERRUPTED) == (0, 1, 2, 130)
    assert InvalidInput.exit_status == ExitStatus.USAGE and NotFound.exit_status == ExitStatus.ERROR
    assert MemcliError("x", hint="do y").hint == "do y"


def test_vocabularies_are_read_everywhere() -> None:
    assert CHOICES["--type"] == MemoryType.values() == ("semantic", "episodic", "procedural")
    assert CHOICES["--format"] == ExportFormat.values() == FORMATS
    assert CHOICES["--sort"] == SortKey.values() == SORT_KEYS
    assert MemoryType.SEMANTIC == "semantic" and str(MemoryType.EPISODIC) == "episodic"


def test_library_messages_name_no_flags_and_the_cli_adds_the_advice(tmp_path, monkeypatch) -> None:
    from memcli.api import Store

    monkeypatch.delenv("MEMCLI_LLM_MODEL", raising=False)
    store = Store(tmp_path / "s")
    with pytest.raises(errors.LLMNotConfigured) as info:
        store.add("We deploy on Mondays.", llm=True)
    assert "--" not in str(info.value)
    with pytest.raises(InvalidInput) as bad:
        store.add("We deploy on Mondays.", type="opinion")
    assert "--" not in str(bad.value)


def test_the_package_docstring_example_runs(tmp_path, monkeypatch) -> None:
    import memcli

    monkeypatch.setenv("MEMCLI_EMBED_MODEL", "hash:256")
    store = memcli.Store(tmp_path / "s")
    store.add("We deploy with `make release`; never push tags by hand.", llm=False)
    hits = list(store.search("how do we release?", threshold=0.0))
    assert hits and hits[0].memory.text.startswith("We deploy with") and hits[0].memory.id == hits[0].id
