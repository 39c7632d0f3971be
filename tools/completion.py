"""Static shell completion scripts (bash, zsh, fish), generated from the Typer app itself.

The scripts hold the whole command tree as data: completing never runs memcli, so it is instant
and works without the virtualenv active. They are committed in memcli/cli/completions/ (packaged:
`memcli completion SHELL` prints them; completions/ holds symlinks to them) and a test checks they
match the app; after changing the CLI, regenerate them with

    python -m tools.completion --write memcli/cli/completions

`python -m tools.completion bash|zsh|fish` prints one script. Importing this module has no side
effects (the app is imported only when a script is rendered).
"""

from __future__ import annotations

import argparse
import enum
import re
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.core.vocab import ExportFormat, MemoryType, SortKey

PROG = "memcli"
SHELLS = ("bash", "zsh", "fish")
FILENAMES = {"bash": "memcli.bash", "zsh": "memcli.zsh", "fish": "memcli.fish"}
REGENERATE = "python -m tools.completion --write memcli/cli/completions"

# Values that are a fixed choice, for options typed as a plain str, keyed by option name. A choice
# type (Enum, Literal, click.Choice) or a help text that starts with "a | b | c" takes precedence,
# so a future command whose --format means something else only has to say so in its help.
CHOICES: dict[str, tuple[str, ...]] = {
    "--format": ExportFormat.values(),
    "--type": MemoryType.values(),
    "--sort": SortKey.values(),
    "--from": ("claude-code", "chatgpt"),  # import --from (memcli.services.transcripts.IMPORT_KINDS)
    "--scope": ("project", "local", "user"),  # hooks install --scope
}

# Values that are paths ("file" or "dir") although typed as a plain str. Options by name; arguments
# by "<command path> <parameter name>". Parameters typed as pathlib.Path are detected on their own.
PATHS: dict[str, str] = {
    "--store": "dir",
    "--output": "file",
    "import file": "file",
    "init directory": "dir",
}

# Values completed from the store itself (memory ids, trashed ids, tags), read straight from the
# catalog with the `sqlite3` command: no memcli, no Python, no model; a few milliseconds. Options by
# name; arguments by "<command path> <parameter name>", or any argument whose metavar is ID.
DYNAMIC: dict[str, str] = {
    "--tag": "tags",
    "restore ids": "trash",
}

_HELP_CHOICES = re.compile(r"^\s*([\w.-]+(?:\s*\|\s*[\w.-]+)+)\s*(?:[.;,:]|$)")


# ---------------------------------------------------------------- the command tree
@dataclass
class Param:
    name: str
    names: list[str]  # options: every spelling (long and short); arguments: empty
    help: str = ""
    takes_value: bool = True
    multiple: bool = False
    nargs: int = 1
    choices: tuple[str, ...] = ()
    path: str | None = None  # "file" | "dir"
    metavar: str = ""
    dynamic: str | None = None  # "ids" | "trash" | "tags": read from the store's catalog


@dataclass
class Command:
    path: tuple[str, ...]  # ("memcli",), ("memcli", "inbox"), ...
    help: str = ""
    options: list[Param] = field(default_factory=list)
    arguments: list[Param] = field(default_factory=list)
    subcommands: list[Command] = field(default_factory=list)
    is_group: bool = False

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def key(self) -> str:
        return " ".join(self.path)

    def walk(self) -> typing.Iterator[Command]:
        yield self
        for sub in self.subcommands:
            yield from sub.walk()

    def value_options(self) -> list[str]:
        return [n for o in self.options if o.takes_value for n in o.names]


def _first_sentence(text: str | None, limit: int = 80) -> str:
    text = (text or "").strip().split("\n\n")[0]
    text = " ".join(text.split()).replace("\b", "").replace("`", "'")  # no backticks in the scripts
    m = re.search(r"(?<=[.!?])\s", text)
    if m:
        text = text[: m.start()]
    if len(text) > limit:
        text = text[: limit - 3].rstrip() + "..."
    return text


def _unwrap(annotation: Any) -> Any:
    """list[X] / X | None / Optional[X] -> X."""
    for _ in range(3):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(annotation)
        if origin is typing.Literal or not args:
            break
        if origin in (list, tuple, set, typing.Union) or str(origin) == "<class 'types.UnionType'>":
            annotation = args[0]
        else:
            break
    return annotation


def _type_info(param: Any) -> tuple[tuple[str, ...], str | None]:
    """Choices and path kind from the parameter's declared type."""
    ptype = getattr(param, "type", None)  # click proper
    if ptype is not None:
        if getattr(ptype, "choices", None):
            return tuple(str(c.value if isinstance(c, enum.Enum) else c) for c in ptype.choices), None
        if type(ptype).__name__ == "Path":
            return (), "dir" if getattr(ptype, "file_okay", True) is False else "file"
        if type(ptype).__name__ == "File":
            return (), "file"
    descriptor = getattr(param, "type_descriptor", None)  # typer's own core
    annotation = _unwrap(getattr(descriptor, "annotation", None))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return tuple(str(m.value) for m in annotation), None
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(str(a) for a in typing.get_args(annotation)), None
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return (), "file"
    return (), None


def _param(param: Any, cmd_key: str) -> Param:
    is_option = param.param_type_name == "option"
    # Sorted (long spellings first): click builds the help option's names from a set.
    names = sorted([*param.opts, *getattr(param, "secondary_opts", [])], key=lambda n: (not n.startswith("--"), n))
    names = names if is_option else []
    p = Param(
        name=param.name or "",
        names=names,
        help=_first_sentence(getattr(param, "help", None)),
        takes_value=not (is_option and (getattr(param, "is_flag", False) or getattr(param, "count", False))),
        multiple=bool(getattr(param, "multiple", False)),
        nargs=param.nargs,
        metavar=(param.metavar or param.name or "value").lower().strip("._").replace("_", "-"),
    )
    if not p.takes_value:
        return p
    choices, path = _type_info(param)
    if not choices:  # an option's or an argument's help that starts "a | b | c" (hooks install TARGET)
        m = _HELP_CHOICES.match(getattr(param, "help", None) or "")
        if m:
            choices = tuple(c.strip().rstrip(".") for c in m.group(1).split("|"))
    if not choices and is_option:
        choices = next((CHOICES[n] for n in param.opts if n in CHOICES), ())
    if path is None:
        keys = param.opts if is_option else [f"{cmd_key} {param.name}"]
        path = next((PATHS[k] for k in keys if k in PATHS), None)
    if path == "file" and re.search(r"dir", f"{param.name} {param.metavar or ''}", re.I) \
            and not re.search(r"file", f"{param.name} {param.metavar or ''}", re.I):  # FILE|DIR: either
        path = "dir"
    p.choices, p.path = (tuple(choices), None) if choices else ((), path)
    keys = param.opts if is_option else [f"{cmd_key} {param.name}"]
    p.dynamic = next((DYNAMIC[k] for k in keys if k in DYNAMIC), None)
    if p.dynamic is None and not is_option and (param.metavar or "") == "ID":
        p.dynamic = "ids"
    if p.dynamic:
        p.choices, p.path = (), None
    return p


def command_tree(app: Any = None) -> Command:
    """The app's commands, options and arguments (hidden ones left out), in declaration order."""
    import typer

    if app is None:
        from memcli.cli.app import app
    root = typer.main.get_command(app)

    def visit(cmd: Any, path: tuple[str, ...], parent: Any) -> Command:
        ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent, **(cmd.context_settings or {}))
        node = Command(path=path, help=_first_sentence(cmd.short_help or cmd.help),
                       is_group=hasattr(cmd, "list_commands"))
        key = " ".join(path[1:])
        for param in cmd.get_params(ctx):
            if getattr(param, "hidden", False):
                continue
            p = _param(param, key)
            (node.options if param.param_type_name == "option" else node.arguments).append(p)
        if node.is_group:
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not getattr(sub, "hidden", False):
                    node.subcommands.append(visit(sub, (*path, name), ctx))
        return node

    return visit(root, (PROG,), None)


# ---------------------------------------------------------------- bash
# Ids and tags come from the store the command line names (--store, $MEMCLI_STORE, the nearest
# .memcli/, the global store; the git-worktree rules of `memcli where` are not repeated here).
_BASH_DYNAMIC = r"""
# The store a command line uses (into _memcli_dir), for completing ids and tags.
_memcli_find_store() {
    local i w d
    _memcli_dir=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${COMP_WORDS[i]}"
        case "$w" in
            --store | -s) _memcli_dir="${COMP_WORDS[i + 1]}" ;;
            --store=*) _memcli_dir="${w#--store=}" ;;
        esac
    done
    [ -n "$_memcli_dir" ] && return 0
    [ -n "$MEMCLI_STORE" ] && { _memcli_dir="$MEMCLI_STORE"; return 0; }
    d="$PWD"
    while [ -n "$d" ]; do
        [ -d "$d/.memcli" ] && { _memcli_dir="$d/.memcli"; return 0; }
        d="${d%/*}"
    done
    _memcli_dir="${XDG_DATA_HOME:-$HOME/.local/share}/memcli"
}

# Memory ids (ids), trashed ids (trash) or tags (tags) starting with $2, from the store's
# catalog, read with the sqlite3 command: no memcli, no Python, no model.
_memcli_dynamic() {
    local _memcli_dir db p row t IFS=$'\n'
    local -a rows
    local -A seen
    _memcli_find_store
    p="${2//[^A-Za-z0-9_.:+#\/-]/}"
    if [ "$1" = trash ]; then
        for row in "$_memcli_dir"/.trash/"$p"*.md; do
            [ -f "$row" ] && { row="${row##*/}"; COMPREPLY+=("${row%.md}"); }
        done
        return 0
    fi
    db="$_memcli_dir/.index/catalog.sqlite"
    { [ -f "$db" ] && command -v sqlite3 >/dev/null 2>&1; } || return 0
    if [ "$1" = ids ]; then
        p="${p^^}"
        COMPREPLY=($(sqlite3 -readonly -batch -noheader "$db" \
            "SELECT id FROM mem WHERE id >= '$p' AND id < '$p' || char(1114111) ORDER BY id LIMIT 500" 2>/dev/null))
        return 0
    fi
    rows=($(sqlite3 -readonly -batch -noheader "$db" "SELECT DISTINCT tags FROM mem WHERE tags LIKE '%|$p%'" \
        2>/dev/null))
    IFS="|"
    for row in "${rows[@]}"; do
        for t in $row; do
            if [ -n "$t" ] && [[ "$t" == "$p"* ]] && [ -z "${seen[$t]}" ]; then
                seen[$t]=1
                COMPREPLY+=("$t")
            fi
        done
    done
}
"""


def _sq(text: str) -> str:
    """Single-quoted for bash and zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


def _bash_words(words: list[str] | tuple[str, ...]) -> str:
    return _sq(" ".join(words))


def render_bash(tree: Command) -> str:
    cmds = list(tree.walk())
    out = [
        f"# bash completion for {PROG}. Generated by `{REGENERATE}`: do not edit by hand.",
        "# Static: completing never runs memcli. Install: see completions/README.md.",
        "",
        "_memcli_in() {",
        '    local x="$1" y',
        "    shift",
        '    for y in "$@"; do [ "$x" = "$y" ] && return 0; done',
        "    return 1",
        "}",
        "",
        "_memcli_paths() {  # $1: file | dir, $2: the word to complete",
        "    local IFS=$'\\n'",
        "    compopt -o filenames 2>/dev/null",
        '    if [ "$1" = dir ]; then',
        '        COMPREPLY=($(compgen -d -- "$2"))',
        "    else",
        '        COMPREPLY=($(compgen -f -- "$2"))',
        "    fi",
        "}",
        "",
        *_BASH_DYNAMIC.strip("\n").splitlines(),
        "",
        "# Sets, for a command path: _memcli_subs (subcommands), _memcli_opts (options),",
        "# _memcli_vopts (options that take a value), _memcli_nargs (how many arguments, -1: any).",
        "_memcli_spec() {",
        '    case "$1" in',
    ]
    for c in cmds:
        nargs = -1 if any(a.nargs < 0 for a in c.arguments) else sum(a.nargs for a in c.arguments)
        out += [
            f"        {_sq(c.key)})",
            f"            _memcli_subs={_bash_words([s.name for s in c.subcommands])}",
            f"            _memcli_opts={_bash_words([n for o in c.options for n in o.names])}",
            f"            _memcli_vopts={_bash_words(c.value_options())}",
            f"            _memcli_nargs={nargs}",
            "            ;;",
        ]
    out += [
        "    esac",
        "}",
        "",
        "# Completes the value of option $2 of command $1; $3: the word to complete.",
        "_memcli_value() {",
        '    case "$1 $2" in',
    ]
    for c in cmds:
        for o in c.options:
            action = _bash_action(o)
            if action:
                out.append(f"        {'|'.join(_sq(f'{c.key} {n}') for n in o.names)}) {action} ;;")
    out += [
        "        *) COMPREPLY=() ;;",
        "    esac",
        "}",
        "",
        "# Completes argument number $2 (from 0) of command $1; $3: the word to complete.",
        "_memcli_arg() {",
        '    case "$1#$2" in',
    ]
    for c in cmds:
        index = 0
        for a in c.arguments:
            action = _bash_action(a)
            if a.nargs < 0:
                if action:
                    out.append(f"        {_sq(f'{c.key}#')}*) {action} ;;")
                break
            for i in range(index, index + a.nargs):
                if action:
                    out.append(f"        {_sq(f'{c.key}#{i}')}) {action} ;;")
            index += a.nargs
    out += [
        "        *) COMPREPLY=() ;;",
        "    esac",
        "}",
        "",
        "_memcli() {",
        "    local cur w i=1 n=0 path=memcli valopt='' dashdash=0",
        "    local _memcli_subs _memcli_opts _memcli_vopts _memcli_nargs",
        "    COMPREPLY=()",
        '    cur="${COMP_WORDS[COMP_CWORD]}"',
        '    _memcli_spec "$path"',
        '    while [ "$i" -lt "$COMP_CWORD" ]; do',
        '        w="${COMP_WORDS[i]}"',
        '        if [ "$dashdash" = 1 ]; then',
        "            n=$((n + 1))",
        '        elif [ "$w" = "--" ]; then',
        "            dashdash=1",
        "        else",
        '            case "$w" in',
        "                -*=*) ;;",
        "                -?*)",
        "                    if _memcli_in \"$w\" $_memcli_vopts; then",
        "                        i=$((i + 1))",
        "                        # --opt = value: '=' is a word of its own when it is in COMP_WORDBREAKS",
        '                        if [ "$i" -lt "$COMP_CWORD" ] && [ "${COMP_WORDS[i]}" = "=" ]; then i=$((i + 1)); fi',
        '                        if [ "$i" -ge "$COMP_CWORD" ]; then valopt="$w"; fi',
        "                    fi",
        "                    ;;",
        "                *)",
        "                    if [ \"$n\" = 0 ] && _memcli_in \"$w\" $_memcli_subs; then",
        '                        path="$path $w"',
        '                        _memcli_spec "$path"',
        "                    else",
        "                        n=$((n + 1))",
        "                    fi",
        "                    ;;",
        "            esac",
        "        fi",
        "        i=$((i + 1))",
        "    done",
        '    if [ -n "$valopt" ]; then',
        '        [ "$cur" = "=" ] && cur=""',
        '        _memcli_value "$path" "$valopt" "$cur"',
        "        return 0",
        "    fi",
        '    if [ "$dashdash" = 0 ]; then',
        '        case "$cur" in',
        "            -*=*)",
        '                w="${cur%%=*}"',
        "                if _memcli_in \"$w\" $_memcli_vopts; then",
        '                    _memcli_value "$path" "$w" "${cur#*=}"',
        '                    for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]="$w=${COMPREPLY[i]}"; done',
        "                fi",
        "                return 0",
        "                ;;",
        "            -*)",
        '                COMPREPLY=($(compgen -W "$_memcli_opts" -- "$cur"))',
        "                return 0",
        "                ;;",
        "        esac",
        "    fi",
        '    if [ -n "$_memcli_subs" ] && [ "$n" = 0 ]; then',
        '        COMPREPLY=($(compgen -W "$_memcli_subs" -- "$cur"))',
        '    elif [ "$_memcli_nargs" != 0 ]; then',
        '        _memcli_arg "$path" "$n" "$cur"',
        '    elif [ -z "$cur" ]; then',
        '        COMPREPLY=($(compgen -W "$_memcli_opts" -- "$cur"))',
        "    fi",
        "    return 0",
        "}",
        "",
        f"complete -F _memcli {PROG}",
    ]
    return "\n".join(out) + "\n"


def _bash_action(p: Param) -> str:
    if p.dynamic:
        return f'_memcli_dynamic {p.dynamic} "$3"'
    if p.choices:
        return f'COMPREPLY=($(compgen -W {_bash_words(p.choices)} -- "$3"))'
    if p.path:
        return f'_memcli_paths {p.path} "$3"'
    return ""


# ---------------------------------------------------------------- zsh
_ZSH_DYNAMIC = r"""
# The store a command line uses (into _memcli_dir), for completing ids and tags.
_memcli_find_store() {
    local -a w
    local i
    w=(${(z)BUFFER})
    _memcli_dir=""
    for (( i = 2; i <= $#w; i++ )); do
        case "$w[i]" in
            --store|-s) _memcli_dir="${(Q)w[i+1]}" ;;
            --store=*) _memcli_dir="${(Q)w[i]#--store=}" ;;
        esac
    done
    [[ -n $_memcli_dir ]] && return 0
    [[ -n $MEMCLI_STORE ]] && { _memcli_dir=$MEMCLI_STORE; return 0; }
    local d=$PWD
    while [[ -n $d ]]; do
        [[ -d $d/.memcli ]] && { _memcli_dir=$d/.memcli; return 0; }
        d=${d%/*}
    done
    _memcli_dir=${XDG_DATA_HOME:-$HOME/.local/share}/memcli
}

# Memory ids (ids), trashed ids (trash) or tags (tags) from the store's catalog, read with the
# sqlite3 command: no memcli, no Python, no model.
_memcli_dynamic() {
    local _memcli_dir db p
    local -a vals rows
    _memcli_find_store
    p=${PREFIX//[^A-Za-z0-9_.:+#\/-]/}
    db=$_memcli_dir/.index/catalog.sqlite
    case $1 in
        trash) vals=("$_memcli_dir"/.trash/*.md(N:t:r)) ;;
        ids)
            [[ -f $db ]] && (( $+commands[sqlite3] )) || return 1
            vals=(${(f)"$(sqlite3 -readonly -batch -noheader $db \
                "SELECT id FROM mem WHERE id >= '${p:u}' AND id < '${p:u}' || char(1114111) ORDER BY id LIMIT 500" \
                2>/dev/null)"}) ;;
        tags)
            [[ -f $db ]] && (( $+commands[sqlite3] )) || return 1
            rows=(${(f)"$(sqlite3 -readonly -batch -noheader $db \
                "SELECT DISTINCT tags FROM mem WHERE tags LIKE '%|$p%'" 2>/dev/null)"})
            vals=(${(u)${(s:|:)${(j:|:)rows}}}) ;;
    esac
    compadd -a vals
}
"""


def _zsh_desc(text: str) -> str:
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _zsh_action(p: Param) -> str:
    if p.dynamic:
        return f"_memcli_dynamic {p.dynamic}"
    if p.choices:
        return "(" + " ".join(re.sub(r"([^\w.-])", r"\\\1", c) for c in p.choices) + ")"
    if p.path == "dir":
        return "_files -/"
    if p.path == "file":
        return "_files"
    return " "


def _zsh_option_specs(c: Command) -> list[str]:
    specs = []
    for o in c.options:
        eager = any(n in ("--help", "-h", "--version") for n in o.names)
        if eager:
            exclusion = "(- *)"
        elif o.multiple:
            exclusion = "*"
        else:
            exclusion = "(" + " ".join(o.names) + ")" if len(o.names) > 1 else ""
        for n in o.names:
            suffix = ""
            if o.takes_value:
                suffix = "=" if n.startswith("--") else "+"
            spec = f"{exclusion}{n}{suffix}[{_zsh_desc(o.help)}]"
            if o.takes_value:
                spec += f":{o.metavar.replace(':', '')}:{_zsh_action(o)}"
            specs.append(spec)
    return specs


def _zsh_fn(c: Command) -> str:
    return "_" + "__".join(re.sub(r"\W", "_", part) for part in c.path)


def render_zsh(tree: Command) -> str:
    out = [
        f"#compdef {PROG}",
        f"# zsh completion for {PROG}. Generated by `{REGENERATE}`: do not edit by hand.",
        "# Static: completing never runs memcli. Install: see completions/README.md.",
        *_ZSH_DYNAMIC.rstrip("\n").splitlines(),
        "",
    ]
    for c in tree.walk():
        specs = _zsh_option_specs(c)
        if c.is_group and c.subcommands:
            specs += ["1:command:->command", "*::argument:->argument"]
        else:
            position = 1
            for a in c.arguments:
                message = a.metavar.replace(":", "")
                if a.nargs < 0:
                    specs.append(f"*:{message}:{_zsh_action(a)}")
                    break
                for _ in range(a.nargs):
                    specs.append(f"{position}:{message}:{_zsh_action(a)}")
                    position += 1
        out.append(f"{_zsh_fn(c)}() {{")
        if c.is_group and c.subcommands:
            out += [
                '    local curcontext="$curcontext" state state_descr line ret=1',
                "    typeset -A opt_args",
                "    _arguments -s -S -C \\",
                *[f"        {_sq(s)} \\" for s in specs[:-1]],
                f"        {_sq(specs[-1])} && ret=0",
                '    case "$state" in',
                "        command)",
                "            local -a commands",
                "            commands=(",
                *[f"                {_sq(s.name.replace(':', chr(92) + ':') + ':' + s.help)}"
                  for s in c.subcommands],
                "            )",
                f"            _describe -t commands {_sq(c.key + ' command')} commands && ret=0",
                "            ;;",
                "        argument)",
                f'            curcontext="${{curcontext%:*:*}}:{"-".join(c.path)}-$words[1]:"',
                '            case "$words[1]" in',
                *[f"                {_sq(s.name)}) {_zsh_fn(s)} && ret=0 ;;" for s in c.subcommands],
                "            esac",
                "            ;;",
                "    esac",
                "    return ret",
            ]
        elif specs:
            out += [
                "    _arguments -s -S \\",
                *[f"        {_sq(s)} \\" for s in specs[:-1]],
                f"        {_sq(specs[-1])}",
            ]
        else:
            out.append("    return 1")
        out += ["}", ""]
    out += [
        "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then",
        "    # autoloaded from $fpath by compinit",
        f'    {_zsh_fn(tree)} "$@"',
        "else",
        "    # sourced (after compinit)",
        f"    compdef {_zsh_fn(tree)} {PROG}",
        "fi",
    ]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- fish
_FISH_DYNAMIC = r"""
# The store a command line uses, for completing ids and tags.
function __memcli_store
    set -l tokens (commandline -opc)
    set -l n (count $tokens)
    for i in (seq 2 $n)
        switch $tokens[$i]
            case --store -s
                if test $i -lt $n
                    echo $tokens[(math $i + 1)]
                    return
                end
            case '--store=*'
                string replace -- '--store=' '' $tokens[$i]
                return
        end
    end
    if set -q MEMCLI_STORE
        echo $MEMCLI_STORE
        return
    end
    set -l d $PWD
    while test -n "$d" -a "$d" != /
        if test -d $d/.memcli
            echo $d/.memcli
            return
        end
        set d (dirname $d)
    end
    if set -q XDG_DATA_HOME
        echo $XDG_DATA_HOME/memcli
    else
        echo $HOME/.local/share/memcli
    end
end

# Memory ids (ids), trashed ids (trash) or tags (tags) from the store's catalog, read with the
# sqlite3 command: no memcli, no Python, no model.
function __memcli_dynamic
    set -l store (__memcli_store)
    set -l p (string replace -ra '[^A-Za-z0-9_.:+#/-]' '' -- (commandline -ct))
    set -l db $store/.index/catalog.sqlite
    switch $argv[1]
        case trash
            for f in $store/.trash/*.md
                basename $f .md
            end
        case ids
            test -f $db; and command -q sqlite3; or return
            set -l u (string upper -- "$p")
            sqlite3 -readonly -batch -noheader $db \
                "SELECT id FROM mem WHERE id >= '$u' AND id < '$u' || char(1114111) ORDER BY id LIMIT 500" 2>/dev/null
        case tags
            test -f $db; and command -q sqlite3; or return
            sqlite3 -readonly -batch -noheader $db "SELECT DISTINCT tags FROM mem WHERE tags LIKE '%|$p%'" 2>/dev/null \
                | string split '|' | string match -r '.+' | sort -u
    end
end
"""


def _fq(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def render_fish(tree: Command) -> str:
    cmds = list(tree.walk())
    out = [
        f"# fish completion for {PROG}. Generated by `{REGENERATE}`: do not edit by hand.",
        "# Static: completing never runs memcli. Install: see completions/README.md.",
        "",
        "function __memcli_subcommands",
        "    switch $argv[1]",
    ]
    for c in cmds:
        if c.subcommands:
            out += [f"        case {_fq(c.key)}", "            printf '%s\\n' " + " ".join(
                _fq(s.name) for s in c.subcommands)]
    out += ["    end", "end", "", "function __memcli_value_options", "    switch $argv[1]"]
    for c in cmds:
        if c.value_options():
            out += [f"        case {_fq(c.key)}",
                    "            printf '%s\\n' " + " ".join(_fq(n) for n in c.value_options())]
    out += [
        "    end",
        "end",
        "",
        "# The command path so far, e.g. 'memcli' or 'memcli inbox'.",
        "function __memcli_path",
        "    set -l path memcli",
        "    set -l tokens (commandline -opc)",
        "    set -e tokens[1]",
        "    set -l skip 0",
        "    set -l nargs 0",
        "    for t in $tokens",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $t",
        "            case --",
        "                break",
        "            case '-*=*'",
        "            case '-*'",
        "                if contains -- $t (__memcli_value_options $path)",
        "                    set skip 1",
        "                end",
        "            case '*'",
        "                if test $nargs = 0; and contains -- $t (__memcli_subcommands $path)",
        '                    set path "$path $t"',
        "                else",
        "                    set nargs (math $nargs + 1)",
        "                end",
        "        end",
        "    end",
        '    echo "$path"',
        "end",
        "",
        "function __memcli_at",
        '    test (__memcli_path) = "$argv[1]"',
        "end",
        "",
        *_FISH_DYNAMIC.rstrip("\n").splitlines(),
        "",
        f"complete -c {PROG} -f",
    ]
    for c in cmds:
        at = '__memcli_at "' + c.key + '"'
        cond = f"-n {_fq(at)}"
        out += ["", f"# {c.key}"]
        for s in c.subcommands:
            out.append(f"complete -c {PROG} {cond} -a {_fq(s.name)} -d {_fq(s.help)}")
        for o in c.options:
            flags = []
            for n in o.names:
                if n.startswith("--"):
                    flags.append(f"-l {_fq(n[2:])}")
                elif len(n) == 2:
                    flags.append(f"-s {_fq(n[1:])}")
                else:
                    flags.append(f"-o {_fq(n[1:])}")
            flags.append(_fish_value(o))
            flags.append(f"-d {_fq(o.help)}" if o.help else "")
            out.append(" ".join([f"complete -c {PROG} {cond}", *[f for f in flags if f]]))
        for a in c.arguments:
            value = _fish_value(a, argument=True)
            if value:
                out.append(f"complete -c {PROG} {cond} {value}")
    return "\n".join(out) + "\n"


def _fish_value(p: Param, argument: bool = False) -> str:
    if not p.takes_value:
        return ""
    if p.dynamic:
        return f"{'' if argument else '-x '}-a '(__memcli_dynamic {p.dynamic})'"
    require = "" if argument else "-r "
    if p.choices:
        return f"{'' if argument else '-x '}-a {_fq(' '.join(p.choices))}"
    if p.path == "dir":
        return f"{'' if argument else '-x '}-a '(__fish_complete_directories (commandline -ct))'"
    if p.path == "file":
        return f"{require}-F"
    return "" if argument else "-x"


# ---------------------------------------------------------------- entry points
RENDERERS = {"bash": render_bash, "zsh": render_zsh, "fish": render_fish}


def render(shell: str, app: Any = None) -> str:
    """The completion script for one shell."""
    if shell not in RENDERERS:
        raise ValueError(f"unknown shell {shell!r} (one of {', '.join(SHELLS)})")
    return RENDERERS[shell](command_tree(app))


def write_all(directory: str | Path, app: Any = None) -> list[Path]:
    """Write memcli.bash, memcli.zsh and memcli.fish into directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tree = command_tree(app)
    written = []
    for shell in SHELLS:
        target = directory / FILENAMES[shell]
        target.write_bytes(RENDERERS[shell](tree).encode("utf-8"))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.completion",
                                     description="Print or write static shell completion scripts for memcli.")
    parser.add_argument("shell", nargs="?", choices=SHELLS, help="print the script for this shell")
    parser.add_argument("--write", metavar="DIR", help="write memcli.bash, memcli.zsh and memcli.fish into DIR")
    args = parser.parse_args(argv)
    if (args.shell is None) == (args.write is None):
        parser.error("give a shell or --write DIR (not both)")
    if args.write:
        for target in write_all(args.write):
            print(f"wrote {target}", file=sys.stderr)
    else:
        sys.stdout.write(render(args.shell))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
