"""The static completion scripts in completions/ match the CLI, and they complete.

When a command or option changes, the first test fails until the scripts are regenerated with
REGENERATE below (one command, run from the repository root).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from memcli.cli import app
from memcli.completion import FILENAMES, SHELLS, render

REPO = Path(__file__).resolve().parents[1]
COMPLETIONS = REPO / "completions"
BASH_SCRIPT = COMPLETIONS / FILENAMES["bash"]
REGENERATE = ".venv/bin/python -m memcli.completion --write completions"


def _subcommand_names() -> list[str]:
    """Every command and sub-command name, straight from click's tree (not from memcli.completion)."""
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
    """Completing must never run memcli or python (fast, and works without the venv)."""
    lines = (COMPLETIONS / FILENAMES[shell]).read_text(encoding="utf-8").splitlines()
    code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    assert "python" not in code and "`" not in code
    if shell == "bash":
        assert set(re.findall(r"\$\((\w+)", code)) == {"compgen"}


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
    run = [sys.executable, "-m", "memcli.completion"]
    printed = subprocess.run([*run, "bash"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == BASH_SCRIPT.read_text(encoding="utf-8")
    written = subprocess.run([*run, "--write", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert written.returncode == 0, written.stderr
    for shell in SHELLS:
        assert (tmp_path / FILENAMES[shell]).read_bytes() == (COMPLETIONS / FILENAMES[shell]).read_bytes()
    assert subprocess.run([*run], capture_output=True, cwd=REPO, timeout=120).returncode == 2


def test_import_has_no_side_effects() -> None:
    code = "import sys, memcli.completion; assert 'memcli.cli' not in sys.modules and 'typer' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
