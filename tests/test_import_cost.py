"""What a curation command pays before it does any work, kept from growing back.

consolidate / merge --auto import the rule modules (decide, extract, llm_checks) that export does
not; compiling their ~85 regular expressions at import was ~35 ms CPU of every such command, and
numpy's `union1d` pulled in numpy.ma (~8 ms) for one sorted union. The patterns now compile when
first used (`memcli.core.lazy_re`), so a command compiles only those its code path reaches.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memcli.core.lazy_re import LazyPattern, lazy_compile

ROOT = Path(__file__).resolve().parent.parent
RULE_MODULES = ("memcli.rules.relate", "memcli.services.extract", "memcli.services.llm.checks")
#: module-level patterns that the module's own import-time code uses (a table built from them)
USED_AT_IMPORT = {"memcli.rules.relate._WORD_RUN_RE"}


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_rule_modules_compile_no_pattern_at_import() -> None:
    """Every module-level pattern of decide, extract and llm_checks is lazy and still uncompiled
    after a fresh import (a plain `re.compile` added at module level fails here)."""
    code = (
        "import importlib, json, re, sys\n"
        "from memcli.core.lazy_re import LazyPattern\n"
        "def patterns(name, value):\n"  # a global, or the patterns of a table of (pattern, label) pairs
        "    if isinstance(value, (re.Pattern, LazyPattern)):\n"
        "        yield name, value\n"
        "    elif isinstance(value, (tuple, list)):\n"
        "        for i, item in enumerate(value):\n"
        "            yield from patterns(f'{name}[{i}]', item)\n"
        "out = {}\n"
        "for module in sys.argv[1:]:\n"
        "    for key, value in vars(importlib.import_module(module)).items():\n"
        "        for name, p in patterns(f'{module}.{key}', value):\n"
        "            out[name] = 'lazy' if isinstance(p, LazyPattern) and not p.is_compiled else 'compiled'\n"
        "print(json.dumps(out))\n"
    )
    state = json.loads(_python(code, *RULE_MODULES))
    assert sum(1 for k in state if k.startswith("memcli.services.extract.")) >= 40  # the check sees the patterns
    assert sum(1 for k in state if k.startswith("memcli.services.llm.checks.")) >= 20
    eager = {k: v for k, v in state.items() if v != "lazy" and k not in USED_AT_IMPORT}
    assert eager == {}, ("module-level patterns compiled at import: define them with "
                         "memcli.core.lazy_re.lazy_compile (compiled on first use), not re.compile")


def test_a_lazy_pattern_behaves_as_the_compiled_one() -> None:
    text = "Deploy at 10:30 on Monday, then at 11:45. Never deploy on Friday!"
    for pattern, flags in [(r"(\d+):(\d+)", 0), (r"\bdeploy\b", re.I), (r"(?P<day>\w+day)", 0), (r"[.!]\s*", 0)]:
        lazy, eager = lazy_compile(pattern, flags), re.compile(pattern, flags)
        assert not lazy.is_compiled and lazy.pattern == pattern  # reading the text does not compile
        assert lazy.findall(text) == eager.findall(text)
        assert lazy.is_compiled
        assert lazy.sub("X", text) == eager.sub("X", text) and lazy.subn("X", text) == eager.subn("X", text)
        assert lazy.split(text) == eager.split(text)
        assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
        assert (lazy.search(text) or re.match("", "")).span() == (eager.search(text) or re.match("", "")).span()
        assert bool(lazy.match(text)) == bool(eager.match(text))
        assert bool(lazy.fullmatch(text)) == bool(eager.fullmatch(text))
        assert (lazy.flags, lazy.groups, lazy.groupindex) == (eager.flags, eager.groups, eager.groupindex)
        assert lazy.compiled() is eager  # re's own cache: the very same compiled pattern


def test_data_attributes_compile_on_demand() -> None:
    lazy = lazy_compile(r"(a)(b)?")
    assert lazy.groups == 2 and lazy.is_compiled
    with pytest.raises(AttributeError):
        _ = lazy.no_such_attribute
    assert isinstance(lazy, LazyPattern) and "compiled" in repr(lazy)


def test_a_consolidate_process_does_not_import_numpy_ma(tmp_path: Path) -> None:
    """consolidate --dry-run and merge --auto, each in a fresh process, plan a merge without
    importing numpy.ma (np.union1d in the read-ahead imported it: ~8 ms of every curation command)."""
    store = tmp_path / "store"
    env = dict(os.environ, MEMCLI_EMBED_MODEL="hash:256")  # plumbing only: identical texts, similarity 1
    run = [sys.executable, "-m", "memcli", "--store", str(store)]
    subprocess.run([*run, "init"], check=True, capture_output=True, env=env, cwd=ROOT, timeout=120)
    for text in ("The staging deploy needs TIMEOUT=120 in the job.",) * 2 + ("Backups run nightly at 02:00.",):
        subprocess.run([*run, "add", "--raw", "--no-dedup", text], check=True, capture_output=True, env=env,
                       cwd=ROOT, timeout=120)
    code = (
        "import json, sys\n"
        "from memcli.cli.app import main\n"
        "sys.argv = ['memcli', *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(json.dumps(['numpy.ma' in sys.modules, 'numpy' in sys.modules]))\n"
    )
    for args in (("consolidate", "--dry-run", "--json"), ("merge", "--auto", "--dry-run", "--json")):
        out = _python(code, "--store", str(store), *args, env=env)
        report, _, modules = out.rstrip("\n").rpartition("\n")
        assert json.loads(modules) == [False, True], args  # numpy in use, numpy.ma not
        (merged,) = json.loads(report)["merged"]  # the read-ahead ran: the two copies are planned as one
        assert len(merged["merged_from"]) == 2
