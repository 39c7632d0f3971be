"""The static completion scripts in memcli/cli/completions/ match the CLI, and they complete.

When a command or option changes, the first test fails until the scripts are regenerated with
REGENERATE below (one command, run from the repository root).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from memcli.cli.app import app
from tools.completion import FILENAMES, SHELLS, render

REPO = Path(__file__).resolve().parents[1]
COMPLETIONS = REPO / "memcli" / "cli" / "completions"  # the one copy: packaged, so a pip install has it
BASH_SCRIPT = COMPLETIONS / FILENAMES["bash"]
REGENERATE = ".venv/bin/python -m tools.completion --write memcli/cli/completions"


def _subcommand_names() -> list[str]:
    """Every command and sub-command name, straight from click's tree (not from tools.completion)."""
    names: list[str] = []

    def visit(cmd, ctx) -> None:
        if not hasattr(cmd, "list_commands"):
            return
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            names.append(name)
            visit(sub, sub.context_class(sub, info_name=name, parent=ctx))

    root = typer.main.get_command(app)
    visit(root, root.context_class(root, info_name="memcli"))
    return names


@pytest.mark.parametrize("shell", SHELLS)
def test_committed_script_matches_the_app(shell: str) -> None:
    path = COMPLETIONS / FILENAMES[shell]
    expected = render(shell, app)
    assert path.exists(), f"{path.relative_to(REPO)} is missing; generate it with: {REGENERATE}"
    assert path.read_bytes() == expected.encode("utf-8"), (
        f"{path.relative_to(REPO)} is out of date with the CLI (a command or option changed). "
        f"Regenerate all three scripts from the repository root with: {REGENERATE}"
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_every_subcommand_appears(shell: str) -> None:
    text = (COMPLETIONS / FILENAMES[shell]).read_text(encoding="utf-8")
    names = _subcommand_names()
    assert {"init", "search", "export", "import", "inbox"} <= set(names)
    missing = [n for n in names if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]
    assert not missing, f"{FILENAMES[shell]} lacks {missing}; regenerate with: {REGENERATE}"


def _bash_complete(words: list[str], cwd: Path | None = None) -> list[str]:
    """COMPREPLY for `words` (the last one is the word being completed)."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    script = (f"source '{BASH_SCRIPT}'; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
              '_memcli; printf "%s\\n" "${COMPREPLY[@]}"')
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=cwd, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    return [line for line in result.stdout.splitlines() if line]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["memcli", "se"], ["search"]),
        (["memcli", "search", "--ex"], ["--explain"]),
        (["memcli", "export", "--format", "j"], ["json", "jsonl"]),
        (["memcli", "export", "-f", ""], ["json", "jsonl", "md", "csv"]),
        (["memcli", "export", "--format=j"], ["--format=json", "--format=jsonl"]),
        (["memcli", "export", "--format", "=", "js"], ["json", "jsonl"]),  # '=' in COMP_WORDBREAKS
        (["memcli", "add", "--type", ""], ["semantic", "episodic", "procedural"]),
        (["memcli", "list", "--sort", "c"], ["created", "confidence"]),
        (["memcli", "--store", "somewhere", "sh"], ["show"]),  # --store's value is not a command
        (["memcli", "search", "--tag", "x", "--ty"], ["--type"]),
        (["memcli", "search", "some", "que"], []),  # free text: nothing to offer
        (["memcli", "hooks", "install", ""], ["git", "claude-code"]),  # an argument's fixed choices
        (["memcli", "hooks", "install", "claude-code", "--scope", ""], ["project", "local", "user"]),
        (["memcli", "import", "--from", ""], ["claude-code", "chatgpt"]),
    ],
)
def test_bash_completes(words: list[str], expected: list[str]) -> None:
    assert sorted(_bash_complete(words)) == sorted(expected)


def test_bash_completes_a_sub_group() -> None:
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="memcli")
    inbox = root.get_command(ctx, "inbox")
    expected = inbox.list_commands(inbox.context_class(inbox, info_name="inbox", parent=ctx))
    got = _bash_complete(["memcli", "inbox", ""])
    assert sorted(got) == sorted(expected) if expected else "--help" in got


def test_bash_completes_paths(tmp_path: Path) -> None:
    (tmp_path / "memories.jsonl").write_text("")
    (tmp_path / "notes.md").write_text("")
    (tmp_path / "store").mkdir()
    assert set(_bash_complete(["memcli", "import", ""], cwd=tmp_path)) == {"memories.jsonl", "notes.md", "store"}
    assert _bash_complete(["memcli", "init", ""], cwd=tmp_path) == ["store"]
    assert _bash_complete(["memcli", "--store", "s"], cwd=tmp_path) == ["store"]
    assert _bash_complete(["memcli", "export", "-o", "n"], cwd=tmp_path) == ["notes.md"]


@pytest.mark.parametrize("shell", SHELLS)
def test_scripts_are_static(shell: str) -> None:
    """Completing must never run memcli or python (fast, and works without the venv); ids and tags
    are read from the store's catalog with the sqlite3 command."""
    lines = (COMPLETIONS / FILENAMES[shell]).read_text(encoding="utf-8").splitlines()
    code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    assert "python" not in code and "`" not in code
    if shell == "bash":  # ids and tags come from the catalog through the sqlite3 command, nothing else
        assert set(re.findall(r"\$\((\w+)", code)) == {"compgen", "sqlite3"}


def _syntax_check(shell: str, path: Path) -> None:
    binary = shutil.which(shell)
    if binary is None:
        pytest.skip(f"{shell} is not installed")
    result = subprocess.run([binary, "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_zsh_syntax() -> None:
    _syntax_check("zsh", COMPLETIONS / FILENAMES["zsh"])


def test_fish_syntax() -> None:
    _syntax_check("fish", COMPLETIONS / FILENAMES["fish"])


def test_fish_completes() -> None:
    fish = shutil.which("fish")
    if fish is None:
        pytest.skip("fish is not installed")
    script = f"source '{COMPLETIONS / FILENAMES['fish']}'; complete -C\"$argv[1]\""

    def complete(line: str) -> set[str]:
        result = subprocess.run([fish, "--no-config", "-c", script, line], capture_output=True, text=True,
                                timeout=30)
        assert result.returncode == 0, result.stderr
        return {row.split("\t")[0] for row in result.stdout.splitlines()}

    assert complete("memcli se") == {"search"}
    assert complete("memcli search --ex") == {"--explain"}
    assert complete("memcli export --format j") == {"json", "jsonl"}
    assert complete("memcli --store x sh") == {"show"}


def test_module_entry_points(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "tools.completion"]
    printed = subprocess.run([*run, "bash"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == BASH_SCRIPT.read_text(encoding="utf-8")
    written = subprocess.run([*run, "--write", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert written.returncode == 0, written.stderr
    for shell in SHELLS:
        assert (tmp_path / FILENAMES[shell]).read_bytes() == (COMPLETIONS / FILENAMES[shell]).read_bytes()
    assert subprocess.run([*run], capture_output=True, cwd=REPO, timeout=120).returncode == 2


def test_import_has_no_side_effects() -> None:
    code = "import sys, tools.completion; assert 'memcli.cli.app' not in sys.modules and 'typer' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr


# --- ids and tags from the store (read with sqlite3, no memcli, no Python) ---------------------------


@pytest.fixture
def id_store(tmp_path: Path) -> tuple[Path, list[str]]:
    if shutil.which("sqlite3") is None:
        pytest.skip("the sqlite3 command is not installed")
    store = tmp_path / "store"
    records = [{"id": "01M8AAAA0000000000000000A1", "text": "one", "tags": ["deploy", "k8s"]},
               {"id": "01M8AAAA0000000000000000B2", "text": "two", "tags": ["deploy-prod"]},
               {"id": "01M8BBBB0000000000000000C3", "text": "three", "tags": ["db"]}]
    env = {**os.environ, "MEMCLI_EMBED_MODEL": "hash:256"}
    subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "import", "--create", "-"],
                   input=json.dumps(records), text=True, check=True, env=env, capture_output=True)
    subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "rm", "01M8BBBB"], check=True, env=env,
                   capture_output=True)
    return store, [r["id"] for r in records]


def test_bash_completes_ids_and_tags_from_the_store(id_store) -> None:
    store, ids = id_store
    s = str(store)
    assert sorted(_bash_complete(["memcli", "--store", s, "show", "01M8A"])) == ids[:2]
    assert _bash_complete(["memcli", "--store", s, "show", "01m8aaaa0000000000000000b"]) == [ids[1]]
    assert sorted(_bash_complete(["memcli", "rm", "--store", s, "01M8"])) == ids[:2]  # not the trashed one
    assert _bash_complete(["memcli", "--store", s, "restore", "01M8"]) == [ids[2]]  # only the trashed one
    assert sorted(_bash_complete(["memcli", "--store", s, "list", "--tag", "de"])) == ["deploy", "deploy-prod"]
    assert _bash_complete(["memcli", "--store", s, "search", "-t", "k"]) == ["k8s"]
    assert _bash_complete(["memcli", "--store", s, "show", "01M8A'; rm -rf /tmp/x; '"]) == []  # quoted safely


def test_bash_finds_the_store_like_memcli(id_store, tmp_path: Path) -> None:
    store, ids = id_store
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    shutil.copytree(store, project / ".memcli")
    assert sorted(_bash_complete(["memcli", "show", "01M8A"], cwd=project / "sub")) == ids[:2]


def test_completing_an_id_is_fast_and_never_starts_python(id_store) -> None:
    store, ids = id_store
    quoted = f"'{BASH_SCRIPT}'"
    script = (f"source {quoted}; COMP_WORDS=(memcli --store '{store}' show 01M8A); COMP_CWORD=4; "
              "python() { echo PYTHON >&2; }; python3() { echo PYTHON >&2; }; memcli() { echo MEMCLI >&2; }; "
              "best=999999999999; for i in 1 2 3 4 5; do s=$(date +%s%N); COMPREPLY=(); _memcli; e=$(date +%s%N); "
              "(( e - s < best )) && best=$(( e - s )); done; "
              'echo "$(( best / 1000000 ))"; printf "%s\\n" "${COMPREPLY[@]}"')
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "PYTHON" not in p.stderr and "MEMCLI" not in p.stderr, p.stderr
    ms, *got = p.stdout.split()
    assert sorted(got) == ids[:2]
    print(f"\nbash id completion: {ms} ms per TAB (best of 5)")  # a figure, not a limit (no Python runs)


@pytest.mark.parametrize("shell", SHELLS)
def test_the_checkout_links_to_the_packaged_script(shell: str) -> None:
    """completions/ (for a checkout) holds symlinks to the packaged scripts, never a second copy."""
    link = REPO / "completions" / FILENAMES[shell]
    assert link.is_symlink(), f"{link.relative_to(REPO)} must be a symlink to memcli/cli/completions/"
    assert link.resolve() == (COMPLETIONS / FILENAMES[shell]).resolve()


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_prints_the_packaged_script(shell: str) -> None:
    """pip users have no checkout: `memcli completion SHELL` prints memcli/cli/completions/."""
    out = subprocess.run([sys.executable, "-m", "memcli", "completion", shell], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.encode("utf-8") == (COMPLETIONS / FILENAMES[shell]).read_bytes()


def test_completion_completes_its_shells() -> None:
    assert set(SHELLS) <= set(_bash_complete(["memcli", "completion", ""]))


def test_completion_refuses_an_unknown_shell() -> None:
    out = subprocess.run([sys.executable, "-m", "memcli", "completion", "tcsh"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode != 0 and "Traceback" not in out.stderr
