"""The README's shell examples, run as a reader would type them, top to bottom, in one scratch
project (the hash embedder stands in for the model). A block preceded by
`<!-- readme-test: skip (why) -->` is left out, with its reason in the README for all to see.

Example ids in the README (`01JDQ8ZK`, `01M8EJA6` ...) are placeholders: each is replaced by a
real memory's id (the same length, or longer when that prefix would not be unique), the first
placeholder by the oldest memory, the next new one by the next memory, and so on.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HASH

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\b(.*?)-->")
PLACEHOLDER = re.compile(r"\b01[0-9A-HJKMNP-TV-Z]{6,24}\b")


def shell_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line number, lines) of every ```sh block not marked to be skipped."""
    blocks, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group(1) in ("sh", "bash", "shell"):
            start = i
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            before = "\n".join(lines[max(0, start - 3):start])
            if not SKIP.search(before):
                blocks.append((start + 1, body))
        elif m and m.group(1):
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
        i += 1
    return blocks


def commands(body: list[str]) -> list[str]:
    out = []
    for line in body:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        out.append(stripped)
    return out


def test_the_readme_has_runnable_examples():
    blocks = shell_blocks(README.read_text())
    assert len(blocks) >= 3
    text = README.read_text()
    assert len(SKIP.findall(text)) <= 2, "most examples must run"
    for reason in SKIP.findall(text):
        assert reason.strip(" ()"), "a skipped example says why"


def test_readme_examples_run(tmp_path):
    bindir = Path(sys.executable).parent
    memcli = bindir / "memcli"
    if not memcli.exists():
        pytest.skip("the memcli console script is not installed next to this Python")
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "home").mkdir()
    env = {**os.environ, "MEMCLI_EMBED_MODEL": HASH, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "HOME": str(tmp_path / "home"), "COLUMNS": "100", "NO_COLOR": "1"}
    env.pop("MEMCLI_STORE", None)
    env["EDITOR"] = "true"  # `memcli edit` opens it and saves nothing
    # the files the examples name
    (project / "chat.jsonl").write_text(
        json.dumps({"text": "We moved the nightly backup to 02:00 UTC.", "origins": ["session:s1"]}) + "\n"
        + json.dumps({"text": "Staging deploys need the VPN.", "tags": ["deploy"]}) + "\n")
    notes = tmp_path / "home" / "notes"
    notes.mkdir(parents=True)
    (notes / "runbook.md").write_text("---\ntags: [runbook]\n---\n## Restart\n\nRun make restart after a deploy.\n\n"
                                      "## Logs\n\nApp logs live in /var/log/app for 14 days.\n")
    git = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "A",
           "GIT_COMMITTER_EMAIL": "a@example.com"}
    env.update(git)
    for cmd in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m",
                                         "ci: cache pip wheels for 7 days (CACHE_KEY flushes them)"]):
        subprocess.run(cmd, cwd=project, env=env, check=True, capture_output=True)
    mapping: dict[str, str] = {}

    def ids_by_age() -> list[str]:
        p = subprocess.run(["memcli", "list", "--json", "--sort", "created"], capture_output=True, text=True,
                           env=env, cwd=project, timeout=120)
        return [m["id"] for m in json.loads(p.stdout)["memories"]] if p.returncode == 0 else []

    def substitute(cmd: str) -> str:
        def real(m: re.Match[str]) -> str:
            key = m.group(0)[:8]
            if key not in mapping:
                free = [i for i in ids_by_age() if i not in mapping.values()]
                assert free, f"the README uses {m.group(0)} before there are enough memories"
                mapping[key] = free[0]
            full = mapping[key]
            return full if len(m.group(0)) >= 20 else full[: max(len(m.group(0)), 12)]
        return PLACEHOLDER.sub(real, cmd)

    ran = 0
    for line_no, body in shell_blocks(README.read_text()):
        for cmd in commands(body):
            if not re.search(r"(^|[|;&]\s*)memcli\b", cmd):
                continue
            real_cmd = substitute(cmd)
            p = subprocess.run(["bash", "-o", "pipefail", "-c", real_cmd], capture_output=True, text=True, env=env,
                               cwd=project, timeout=300)
            where = f"README.md line {line_no}: {cmd}\n(ran: {real_cmd})\nstdout: {p.stdout[-800:]}\n" \
                    f"stderr: {p.stderr[-800:]}"
            assert p.returncode == 0, where
            assert "Traceback" not in p.stderr and "internal error" not in p.stderr, where
            ran += 1
    assert ran >= 15
