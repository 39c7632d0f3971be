"""Real shell pipelines with the installed `memcli` on PATH and the real model, as a user or a git hook runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def bash(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **env}
    return subprocess.run(["bash", "-c", f"set -euo pipefail\n{script}"], capture_output=True, text=True, env=full,
                          cwd=tmp_path, timeout=300)


def test_add_from_a_pipe_then_search_json_into_python(tmp_path):
    assert (BIN / "memcli").exists()
    script = """
id=$(echo "We deploy the backend with make release from the main branch." | memcli add --origin cli:pipe - \
  | awk '$1 == "ADD" {print $2}')
printf 'The staging database is reset every Sunday at 02:00 UTC.\\n' | memcli add --json - \\
  | python -c "import json,sys; d=json.load(sys.stdin); assert d['memory'][0]['event'] == 'ADD', d"
memcli search --json "how do we push a new version of the backend live?" \\
  | python -c "import json,sys; r=json.load(sys.stdin)['results']; print(r[0]['id']); print(r[0]['origins'][0])" \
  > top.txt
test "$(head -n 1 top.txt)" = "$id"
memcli show "$id" | tail -n 1
tail -n 1 top.txt
"""
    r = bash(script, tmp_path, MEMCLI_STORE=str(tmp_path / "store"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["We deploy the backend with make release from the main branch.", "cli:pipe"]
    assert "Traceback" not in r.stderr


def test_a_git_hook_style_add_and_clean_errors_in_a_pipe(tmp_path):
    script = """
git init -q repo && cd repo
git -c user.email=t@example.com -c user.name=t commit -q --allow-empty \\
  -m "Switch the job queue from Celery to RQ" -m "RQ is simpler; Redis is already deployed."
git log -1 --format=%B | memcli --store ../store add --create --origin "git:$(git rev-parse --short HEAD)" - > /dev/null
memcli --store ../store export --format jsonl | head -n 1 | python -c "
import json, sys
rec = json.loads(sys.stdin.readline())
print(rec['project'], rec['origins'][0].startswith('git:'))"
if memcli --store ../store show 01NOSUCHMEMORY0000000000000 2> err.txt; then exit 9; fi
cat err.txt
"""
    r = bash(script, tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "repo True"
    assert len(out) in (2, 3) and out[1].startswith("memcli: error:")  # the error, an optional hint
    assert len(out) == 2 or out[2].startswith("hint: ")
    assert "Traceback" not in r.stderr
    exported = bash("memcli --store store export --format jsonl", tmp_path).stdout
    records = [json.loads(ln) for ln in exported.splitlines()]
    assert any("RQ" in rec["text"] for rec in records)
