"""`memcli ask`: retrieve the top memories, stream the LLM's answer citing their ids, over real HTTP.

The model is tests/llm_server.py's FakeLLMServer reached through litellm (`openai/<name>` + an
api_base); retrieval uses the real embedding model, since the question and the memories share
meaning rather than words.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
for _p in (str(_TESTS), str(_TESTS.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import llm_server as fake_llm  # noqa: E402
from conftest import Cli  # noqa: E402
from llm_server import FakeLLMServer  # noqa: E402
from test_pipeline_llm import dead_url, llm_env, message, seed  # noqa: E402

from memcli.services.llm.client import ANSWER_SYSTEM  # noqa: E402

llm_server = fake_llm.llm_server

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*`ReadOnly` qualifier.*:UserWarning",
    "ignore::DeprecationWarning",
)

MEMORIES = [
    "The API server is built with FastAPI and runs under uvicorn",
    "Production deploys go through `make deploy ENV=prod` after CI passes",
    "Alice owns the billing service and reviews its pull requests",
]
QUESTION = "How do we deploy to production?"


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, list[str]]:
    """A store with three memories (written without any LLM)."""
    cli = Cli(tmp_path / "store")
    return cli.store, seed(cli, *MEMORIES)


def answer_for(mid: str) -> str:
    return f"Run `make deploy ENV=prod` once CI is green [{mid}]."


def test_ask_streams_an_answer_citing_ids(stored: tuple[Path, list[str]], llm_server: FakeLLMServer) -> None:
    store, ids = stored
    answer = answer_for(ids[1])
    llm_server.script([{"content": answer, "chunk_size": 5}])
    result = Cli(store, env=llm_env(llm_server.url))("ask", QUESTION)
    assert result.stdout == answer + "\n"
    assert "cites no memory" not in result.stderr
    (body,) = llm_server.requests
    assert body["stream"] is True and message(body, "system") == ANSWER_SYSTEM
    user = message(body, "user")
    assert f"[{ids[1]}]" in user and QUESTION in user  # the memories travel with their ids
    first = min((user.index(f"[{i}]"), i) for i in ids if f"[{i}]" in user)
    assert first[1] == ids[1]  # the most relevant memory comes first


def test_ask_json_gives_answer_citations_and_memories(stored: tuple[Path, list[str]],
                                                      llm_server: FakeLLMServer) -> None:
    store, ids = stored
    llm_server.script([answer_for(ids[1])])
    out = json.loads(Cli(store, env=llm_env(llm_server.url))("ask", "--json", "-k", "2", QUESTION).stdout)
    assert out["question"] == QUESTION and out["answer"] == answer_for(ids[1])
    assert out["cited"] == [ids[1]]
    assert len(out["memories"]) <= 2 and out["memories"][0]["id"] == ids[1]
    assert out["memories"][0]["text"] == MEMORIES[1] and "score" in out["memories"][0]
    assert out["llm"]["requests"] == 1 and out["llm"]["completion_tokens"] > 0


def test_ask_without_a_model_prints_the_memories(stored: tuple[Path, list[str]]) -> None:
    store, ids = stored
    result = Cli(store)("ask", QUESTION)
    assert "no LLM model configured" in result.stderr
    assert result.stdout.splitlines()[0] == f"[{ids[1]}] {MEMORIES[1]}"
    out = json.loads(Cli(store)("ask", "--json", QUESTION).stdout)
    assert out["answer"] is None and out["error"] == "no LLM configured" and out["memories"][0]["id"] == ids[1]


def test_ask_with_the_llm_down_is_one_line_and_exit_1(stored: tuple[Path, list[str]]) -> None:
    store, _ = stored
    result = Cli(store, env=llm_env(dead_url(), MEMCLI_LLM_RETRIES="1"))("ask", QUESTION, ok=False)
    assert result.exit_code == 1 and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("memcli: error: LLM unreachable after 2 attempts")


def test_ask_redacts_the_question_and_skips_the_model_without_memories(tmp_path: Path,
                                                                       stored: tuple[Path, list[str]],
                                                                       llm_server: FakeLLMServer) -> None:
    store, ids = stored
    llm_server.script([answer_for(ids[1])])
    Cli(store, env=llm_env(llm_server.url))("ask", "How does ops@example.com deploy to production?")
    assert "ops@example.com" not in json.dumps(llm_server.requests)
    assert "[REDACTED:email]" in json.dumps(llm_server.requests)

    empty = Cli(tmp_path / "empty", env=llm_env(llm_server.url))
    empty("init")
    llm_server.reset()
    out = json.loads(empty("ask", "--json", QUESTION).stdout)
    assert out["memories"] == [] and out["answer"] is None  # nothing to answer from: no invented answer
    assert "no matching memories" in empty("ask", QUESTION).stderr
    assert llm_server.requests == []


def test_ask_streams_in_a_real_process(stored: tuple[Path, list[str]], llm_server: FakeLLMServer) -> None:
    """Chunks reach the terminal as the model produces them, not all at the end: the fake model
    holds back everything after its first chunk until that chunk has come out of `memcli ask`'s
    stdout (a gate, not a timing: a busy machine cannot make it pass or fail)."""
    store, ids = stored
    answer = answer_for(ids[1])
    gate = threading.Event()
    llm_server.script([{"content": answer, "chunk_size": 6, "chunk_delay": 0.02, "gate": gate}])
    env = {**os.environ, **llm_env(llm_server.url)}
    proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store), "ask", QUESTION],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    arrivals: list[tuple[bool, bytes]] = []  # (the model had produced the rest when this arrived, data)
    assert proc.stdout is not None
    try:
        while True:
            data = os.read(proc.stdout.fileno(), 4096)
            if not data:
                break
            arrivals.append((gate.is_set(), data))
            gate.set()  # the first words are out: let the model go on
    finally:
        gate.set()
    proc.wait(timeout=120)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.returncode == 0, stderr
    assert b"".join(d for _, d in arrivals).decode() == answer + "\n"
    assert len(arrivals) >= 2, arrivals  # several pieces, not one buffered write
    first_done, first = arrivals[0]
    assert not first_done and answer.startswith(first.decode()) and len(first) < len(answer), arrivals


def test_ask_counts_a_shortened_id_and_flags_an_invented_one(stored: tuple[Path, list[str]],
                                                             llm_server: FakeLLMServer) -> None:
    """Small models shorten ids ("[01J9Z3K5]") and sometimes make one up: a unique 8+ character
    prefix of a given id is a citation; an id never given is reported, not trusted."""
    store, ids = stored
    invented = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"
    llm_server.script([f"Run `make deploy ENV=prod` after CI [{ids[1][:10]}], see also [{invented}]."])
    out = json.loads(Cli(store, env=llm_env(llm_server.url))("ask", "--json", QUESTION).stdout)
    assert out["cited"] == [ids[1]] and out["matched"] == []
    assert out["unknown_citations"] == [invented]
    llm_server.script([f"Run `make deploy ENV=prod` [{invented}]."])
    result = Cli(store, env=llm_env(llm_server.url))("ask", QUESTION)
    assert f"cites id(s) it was not given: {invented}" in result.stderr


def test_ask_names_the_memory_an_uncited_answer_repeats(stored: tuple[Path, list[str]],
                                                        llm_server: FakeLLMServer) -> None:
    """Measured: the 1.5B model answered right and cited no id. memcli then names the memory the
    answer visibly repeats (its command), and says so when the answer matches none."""
    store, ids = stored
    llm_server.script(["Production deploys run `make deploy ENV=prod` once CI passes."])
    out = json.loads(Cli(store, env=llm_env(llm_server.url))("ask", "--json", QUESTION).stdout)
    assert out["cited"] == [] and out["matched"] == [ids[1]]
    llm_server.script(["Production deploys run `make deploy ENV=prod` once CI passes."])
    result = Cli(store, env=llm_env(llm_server.url))("ask", QUESTION)
    assert f"cites no memory id; it repeats what {ids[1]} say(s)" in result.stderr
    llm_server.script(["Alice."])  # a short answer one memory holds whole (the 1.5B answered "Bob")
    out = json.loads(Cli(store, env=llm_env(llm_server.url))("ask", "--json", "Who owns billing?").stdout)
    assert out["cited"] == [] and out["matched"] == [ids[2]]
    llm_server.script(["Deploys happen by carrier pigeon on Fridays."])
    result = Cli(store, env=llm_env(llm_server.url))("ask", QUESTION)
    assert "matches none of the memories" in result.stderr


def test_an_answer_that_only_repeats_a_memory_header_is_called_out(stored: tuple[Path, list[str]],
                                                                   llm_server: FakeLLMServer) -> None:
    """The 0.5B model answered "Which PostgreSQL version does billing use?" with the prompt's
    header of the right memory and nothing else: memcli says so and shows what that memory says."""
    store, ids = stored
    echo = f"[{ids[1]}] (type: semantic, tags: deploy, created: 2026-11-30T03:34:16Z, updated: 2026-11-30T03:34:16Z)"
    llm_server.script([echo])
    result = Cli(store, env=llm_env(llm_server.url))("ask", QUESTION)
    assert "only repeated a memory's header" in result.stderr and MEMORIES[1] in result.stderr
    llm_server.script([echo])
    out = json.loads(Cli(store, env=llm_env(llm_server.url))("ask", "--json", QUESTION).stdout)
    assert out["header_echo"] is True
    llm_server.script([answer_for(ids[1])])
    assert json.loads(Cli(store, env=llm_env(llm_server.url))("ask", "--json", QUESTION).stdout)["header_echo"] is False
