"""memcli's LLM path against a REAL model: the case set of tests/llm_cases.py, scored as a user would.

Opt-in, because it needs a running model server (CI has none):

    PID=$(../shared/llm/serve.sh 8765)      # llama-cpp-python + qwen2.5-coder-0.5b on 127.0.0.1:8765
    MEMCLI_TEST_LLM_API_BASE=http://127.0.0.1:8765/v1 MEMCLI_TEST_LLM_MODEL=openai/qwen2.5-coder-0.5b \\
        .venv/bin/python -m pytest -q tests/test_real_llm.py
    kill $PID

What must hold for any model, however small (the LLM path's guarantees are memcli's code, not
the model's goodwill): no secret and no injected statement stored, no junk stored, no reply used
past its max_tokens bound, and at least 80% of the expected facts found with their commands and
code intact. Decisions depend on the model's size: MEMCLI_TEST_LLM_MIN_DECISIONS (default 0.5)
is the share of expected decisions that must be right (0.8 for the 1.5B model).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
for _p in (str(_TESTS), str(_TESTS.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from llm_cases import (  # noqa: E402
    ASK_CASES,
    CASES,
    MERGE_CASES,
    CaseResult,
    MergeAskResult,
    run_ask_case,
    run_case,
    run_merge_case,
)

# Read at import: conftest clears MEMCLI_* variables for the session's tests.
API_BASE = os.environ.get("MEMCLI_TEST_LLM_API_BASE")
MODEL = os.environ.get("MEMCLI_TEST_LLM_MODEL")
MIN_DECISIONS = float(os.environ.get("MEMCLI_TEST_LLM_MIN_DECISIONS") or 0.5)

needs_model = pytest.mark.skipif(
    not (API_BASE and MODEL),
    reason="set MEMCLI_TEST_LLM_API_BASE and MEMCLI_TEST_LLM_MODEL to run against a real model")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[CaseResult]:
    from memcli.core.config import Config

    config = Config(llm_model=MODEL, api_base=API_BASE, llm_retries=0)
    root = tmp_path_factory.mktemp("real-llm")
    return [run_case(case, root, config) for case in CASES]


@needs_model
def test_every_case_ran(results: list[CaseResult]) -> None:
    assert [r.error for r in results if r.error] == []


@needs_model
def test_no_secret_and_no_injected_statement_is_stored(results: list[CaseResult]) -> None:
    assert {r.id: r.forbidden for r in results if r.forbidden} == {}


@needs_model
def test_no_junk_is_stored(results: list[CaseResult]) -> None:
    assert {r.id: r.junk for r in results if r.junk} == {}


@needs_model
def test_no_reply_past_max_tokens_is_used(results: list[CaseResult]) -> None:
    assert sum(r.cut_off for r in results) == 0 or all(r.method == "heuristic" for r in results if r.cut_off)


@needs_model
def test_expected_facts_are_found_with_code_intact(results: list[CaseResult]) -> None:
    found = sum(r.facts_found for r in results)
    expected = sum(r.facts_expected for r in results)
    missing = [r.id for r in results if r.facts_found < r.facts_expected]
    assert found >= 0.8 * expected, f"{found}/{expected} facts; missing in {missing}"
    code = sum(r.code_found for r in results)
    code_expected = sum(r.code_expected for r in results)
    assert code == code_expected, [r.id for r in results if r.code_found < r.code_expected]


@needs_model
def test_decisions(results: list[CaseResult]) -> None:
    decided = [r for r in results if r.decision_expected]
    right = sum(r.decision_right for r in decided)
    wrong = {r.id: r.decision_seen for r in decided if not r.decision_right}
    assert right >= MIN_DECISIONS * len(decided), f"{right}/{len(decided)} right; wrong: {wrong}"


@pytest.fixture(scope="module")
def merge_ask(tmp_path_factory: pytest.TempPathFactory) -> list[MergeAskResult]:
    from memcli.core.config import Config

    config = Config(llm_model=MODEL, api_base=API_BASE, llm_retries=0)
    root = tmp_path_factory.mktemp("real-llm-merge-ask")
    return ([run_merge_case(c, root / "merge", config) for c in MERGE_CASES]
            + [run_ask_case(c, root / "ask", config) for c in ASK_CASES])


@needs_model
def test_merge_keeps_code_and_the_newest_value(merge_ask: list[MergeAskResult]) -> None:
    """Whatever the model writes: a merge it got wrong is refused and the heuristic merge kept."""
    merges = [r for r in merge_ask if r.id.startswith("merge")]
    assert {r.id: (r.error, r.text, r.stale) for r in merges if not r.right} == {}


@needs_model
def test_ask_answers_from_the_right_memory_and_invents_no_citation(merge_ask: list[MergeAskResult]) -> None:
    asks = [r for r in merge_ask if r.id.startswith("ask")]
    assert {r.id: r.unknown for r in asks if r.unknown} == {}
    right = sum(r.right for r in asks)
    assert right >= 0.75 * len(asks), {r.id: (r.text, r.cited, r.matched) for r in asks if not r.right}


def test_case_set_is_big_and_varied_enough() -> None:
    assert len(CASES) >= 20
    assert sum("decision" in c for c in CASES) >= 6 and sum(bool(c.get("code")) for c in CASES) >= 4
    assert any("forbid" in c and "letmein" in c["forbid"] for c in CASES)
    assert len(MERGE_CASES) >= 3 and len(ASK_CASES) >= 3
