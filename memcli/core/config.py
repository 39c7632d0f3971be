"""Store resolution and settings: defaults in one place, then config.toml, then env, then flags.

Everything here is cheap to import: `search` runs through this module on every cold start.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from memcli.core import discovery
from memcli.core.errors import ConfigError
from memcli.core.notices import notice
from memcli.core.trust import DESTINATION_KEYS, is_trusted

__all__ = ["Config", "ConfigError", "Ranking", "load_config"]

DEFAULT_EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Ranking:
    """Weights of the one ranking function (see search.py); tuned on the LoCoMo dev split."""

    similarity: float = 0.65
    keyword: float = 0.35
    recency: float = 0.15
    reliability: float = 0.20
    version: float = 0.3  # "Which X version ...?": a memory giving X a version (subjects.version_asked)
    recency_days: float = 30.0
    mmr_lambda: float = 0.9
    threshold: float = 0.3
    candidates: int = 100


@dataclass(frozen=True)
class Config:
    """Resolved settings for one store. Build with `load_config`; tests may use `replace`."""

    embed_model: str = DEFAULT_EMBED_MODEL
    user: str | None = None  # unset: `git config user.email`, else "default" (see default_user)
    llm_model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    llm_timeout: float | None = None  # None: 60 s for a remote API, 300 s for a local server (llm.default_timeout)
    llm_retries: int = 2
    llm_temperature: float = 0.0
    llm_backoff: float = 0.5  # seconds before the first retry, doubled each time
    add_threshold: float = 0.85
    decide_threshold: float = 0.8
    llm_decide_threshold: float = 0.6  # a neighbour this close sends the fact to the LLM's decide request
    # an installed `memcli.deciders` entry point deciding ADD/NONE/UPDATE/SUPERSEDE (memcli.rules.deciders);
    # unset: "llm" when a model is configured, else "heuristic"
    decider: str | None = None
    consolidate_threshold: float = 0.95
    contradiction_threshold: float = 0.8
    # commits the git hook skips (a regex searched in the subject; merges and fixup!/squash! always):
    # memcli's own only, since a conventional prefix ("docs: upload progress") can carry knowledge
    git_skip: str = r"^memcli: "
    # after a bulk curation commit, make its provisional vectors exact in a detached process
    # (memcli/services/detached.py); MEMCLI_NO_BACKGROUND=1 turns it off too
    background: bool = True
    shared: bool = False  # a team store: new directories 0750 and files 0640 instead of 0700 / 0600
    # scrub secrets and personal data from what is stored or sent to a model; off for one call only
    # (`add --no-redact`), never from config.toml: a cloned store must not switch it off
    redact: bool = True
    ranking: Ranking = field(default_factory=Ranking)

    def with_overrides(self, **kw: object) -> Config:
        """Apply non-None flag values (flags beat env and file)."""
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


_ENV = {
    "MEMCLI_DECIDER": "decider",
    "MEMCLI_EMBED_MODEL": "embed_model",
    "MEMCLI_USER": "user",
    "MEMCLI_LLM_MODEL": "llm_model",
    "MEMCLI_LLM_API_BASE": "api_base",
    "MEMCLI_LLM_API_KEY": "api_key",
    "MEMCLI_LLM_TIMEOUT": "llm_timeout",
    "MEMCLI_LLM_RETRIES": "llm_retries",
    "MEMCLI_LLM_TEMPERATURE": "llm_temperature",
    "MEMCLI_LLM_BACKOFF": "llm_backoff",
    "MEMCLI_SHARED": "shared",
}


def _coerce(name: str, value: object, target: type | str) -> object:
    kind = target if isinstance(target, str) else target.__name__
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if str(value).strip().lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).strip().lower() in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"config: {name} must be true or false, got {value!r}")
    try:
        if "float" in kind:
            return float(value)  # type: ignore[arg-type]
        if "int" in kind:
            return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ConfigError(f"config: {name} must be a number, got {value!r}") from None
    if isinstance(value, (list, dict)):
        raise ConfigError(f"config: {name} must be a string, got a {'list' if isinstance(value, list) else 'table'}")
    return None if value in ("", None) else str(value)


MAX_CONFIG_BYTES = 1 << 20


def _read_config(path: Path) -> str | None:
    """The text of `config.toml`, or None when there is none. Never through a symbolic link (a
    clone's `config.toml -> ~/.aws/credentials`), never a FIFO or a device, at most 1 MB."""
    import errno
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ConfigError(f"{path} is a symbolic link: not read (memcli doctor --fix moves it aside)") from None
        if e.errno in (errno.ENOTDIR, errno.EISDIR):
            return None
        raise ConfigError(f"{path}: cannot read it ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return None
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path} is not a regular file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: over {MAX_CONFIG_BYTES >> 20} MB, not a settings file")
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML (not UTF-8: {e.reason})") from None


def load_config(store: Path) -> Config:
    """Read `<store>/config.toml` (top-level keys, a `[ranking]` table; `[llm]` and `[embedding]`
    tables too) and the MEMCLI_* environment into a Config."""
    data: dict[str, object] = {}
    path = store / "config.toml"
    text = _read_config(path)
    if text is not None:
        try:
            raw = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: invalid TOML ({e})") from None
        data.update({k: v for k, v in raw.items() if not isinstance(v, dict)})
        for table, prefix in (("llm", "llm_"), ("embedding", "embed_")):
            values = raw.get(table)
            for k, v in (values.items() if isinstance(values, dict) else ()):
                key = {"model": prefix + "model", "api_base": "api_base", "api_key": "api_key"}.get(k, f"llm_{k}")
                data[key] = v
        ranking_raw = raw.get("ranking") or raw.get("search") or {}
        if not isinstance(ranking_raw, dict):
            raise ConfigError(f"{path}: [ranking] must be a table")
        _drop_untrusted(store, path, data)
    else:
        ranking_raw = {}
    for env, key in _ENV.items():
        if os.environ.get(env):
            data[key] = os.environ[env]
    kwargs = _typed(Config, data, "", path)
    rk = _typed(Ranking, ranking_raw, "ranking.", path)
    for key, value in [*kwargs.items(), *((f"ranking.{k}", v) for k, v in rk.items())]:
        problem = _out_of_range(key, value)
        if problem:
            env = next((k for k, v in _ENV.items() if v == key and os.environ.get(k)), None)
            where = f"${env}" if env else path
            raise ConfigError(f"{where}: {key} {problem}, got {value!r}")
    return Config(**kwargs, ranking=Ranking(**rk))


def _typed(cls: type, raw: dict[str, object], prefix: str, path: Path) -> dict[str, object]:
    """`raw`'s values coerced to the types of `cls`'s fields; an unknown key is an error
    (`ranking` is a table and `redact` is never read from a file)."""
    types = {f.name: f.type for f in fields(cls) if f.name not in ("ranking", "redact")}
    out = {}
    for key, value in raw.items():
        if key not in types:
            raise ConfigError(f"{path}: unknown {'ranking ' if prefix else ''}setting {key!r}")
        out[key] = _coerce(prefix + key, value, types[key])
    return out


# What each numeric setting may be: (low, high, low excluded). A value outside is an error naming
# the key (a `recency_days = 0` divided by zero in every search; a NaN threshold matched nothing).
_RANGES: dict[str, tuple[float, float, bool]] = {
    "llm_timeout": (0, 86400, True), "llm_retries": (0, 100, False), "llm_temperature": (0, 2, False),
    "llm_backoff": (0, 3600, False),
    **{k: (0, 1, False) for k in ("add_threshold", "decide_threshold", "llm_decide_threshold",
                                  "consolidate_threshold", "contradiction_threshold")},
    **{f"ranking.{k}": (0, 1e6, False) for k in ("similarity", "keyword", "recency", "reliability", "version")},
    "ranking.recency_days": (0, 1e6, True), "ranking.mmr_lambda": (0, 1, False), "ranking.threshold": (0, 1, False),
    "ranking.candidates": (1, 100_000, False),
}


def _out_of_range(key: str, value: object) -> str | None:
    """Why a numeric setting's value cannot be used, or None."""
    bounds = _RANGES.get(key)
    if bounds is None or value is None or isinstance(value, bool):
        return None
    low, high, open_low = bounds
    number = float(value)  # type: ignore[arg-type]
    if number != number or number in (float("inf"), float("-inf")):
        return "must be a finite number"
    if number < low or number > high or (open_low and number == low):
        return f"must be {'greater than' if open_low else 'at least'} {low:g} and at most {high:g}"
    return None


def default_user(cfg: Config) -> str:
    """The user `add` stamps: the configured one, else `git config user.email`, else "default"."""
    if cfg.user:
        return cfg.user
    return discovery.git_user_email() or "default"


def _drop_untrusted(store: Path, path: Path, data: dict[str, object]) -> None:
    """A store's config may not pick where data goes unless the user trusts the store (see
    memcli.core.trust): those settings are dropped here, with one warning line."""
    wanted = [k for k in DESTINATION_KEYS if data.get(k) not in (None, "")]
    # a model that is not the default is downloaded from where its name says (and runs there);
    # a regex is run on every commit (`^(a|aa)+$` takes minutes): both need trust too
    model = data.get("embed_model")
    if isinstance(model, str) and model not in ("", DEFAULT_EMBED_MODEL) and not model.startswith("hash:"):
        wanted.append("embed_model")
    if data.get("git_skip") not in (None, Config.git_skip):
        wanted.append("git_skip")
    if not wanted or is_trusted(store):
        return
    for k in wanted:
        data.pop(k, None)
    notice(f"warning: {path} sets {', '.join(wanted)}: ignored, this store is not trusted "
           f"(if you trust it: memcli trust {store})")


def cache_dir() -> Path:
    """Embedding cache and model files: outside the store so deleting `.index/` costs nothing."""
    explicit, xdg = os.environ.get("MEMCLI_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME")
    return Path(explicit) if explicit else (Path(xdg) if xdg else Path.home() / ".cache") / "memcli"


def git_project(cwd: Path | None = None) -> str | None:
    """The default project (see `discovery.project_identity`)."""
    return discovery.project_identity(cwd)


def where(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> dict[str, object]:
    """What `memcli where` prints: the store, project and user a command here would use, and why."""
    res = discovery.resolve(explicit, cwd)
    here = (cwd or Path.cwd()).absolute()
    r = discovery.repo(here)
    exists = (res.path / "facts").is_dir()
    info: dict[str, object] = {"store": str(res.path.absolute()), "store_exists": exists, "store_why": res.why}
    if r is None:
        info.update(project=None, project_why="not in a git repository")
    else:
        ident = discovery.project_identity(here)
        why = (f"origin remote {r.origin}" if r.origin and discovery.normalise_remote(r.origin)
               else f"repository directory {r.common_dir} (no origin remote)")
        info.update(project=ident, project_why=why, repository=str(r.toplevel),
                    main_worktree=str(r.main_worktree))
    user, user_why = None, ""
    if os.environ.get("MEMCLI_USER"):
        user, user_why = os.environ["MEMCLI_USER"], "$MEMCLI_USER"
    elif exists:
        try:
            cfg = load_config(res.path)
        except ConfigError as e:
            info["config_error"] = str(e)
            cfg = None
        if cfg is not None and cfg.user:
            user, user_why = cfg.user, f"{res.path / 'config.toml'}"
    if user is None:
        email = discovery.git_user_email()
        user, user_why = (email, "git config user.email") if email else ("default", "nothing configured")
    info.update(user=user, user_why=user_why)
    return info
