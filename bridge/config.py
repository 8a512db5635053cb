"""The application's configuration: one YAML file, validated at start-up.

Every key has a default (see config.yaml at the repository root), ``${VAR}`` and ``${VAR:-default}``
inside string values are expanded from the environment, and an unknown key or a bad value stops
start-up with the key's path, the bad value and what is expected.

Where the file is looked for, and where the workspace goes without one, is in docs/configuration.md:
relative paths in a file resolve against that file's folder, never against the current directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from memory import EmbeddingSettings, MemorySettings, StrictSettings

DEFAULT_CONFIG_NAME = "config.yaml"
APP_DIR = "membridge"
_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key and what to do."""


class LLMSettings(StrictSettings):
    base_url: str | None = None
    api_key: str | None = None
    model: str = "gpt-4o-mini"
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    temperature: float | None = Field(default=None, ge=0, le=2)
    stream: bool = True
    #: Ask a streamed answer for its token counts (``stream_options.include_usage``); off for a server
    #: that refuses the option (the tokens are then estimated, and marked so).
    stream_usage: bool = True
    #: The model sees images: photos go to it as image content parts (off: photos are refused).
    vision: bool = False


class SpeechSettings(StrictSettings):
    """Voice notes and audio files through ``/audio/transcriptions``; off while ``model`` is unset.
    ``base_url`` and ``api_key`` default to the LLM's."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    max_seconds: float = Field(default=600.0, gt=0)
    max_bytes: int = Field(default=25_000_000, ge=1000)
    timeout_s: float = Field(default=120.0, gt=0)

    @property
    def enabled(self) -> bool:
        return bool(self.model)


class MediaSettings(StrictSettings):
    """Photos and files that come with a message (voice: see :class:`SpeechSettings`)."""

    keep: bool = False
    max_bytes: int = Field(default=20_000_000, ge=1000)
    max_pages: int = Field(default=100, ge=1)
    max_text_chars: int = Field(default=200_000, ge=100)


class ContextSettings(StrictSettings):
    max_turns: int = Field(default=20, ge=1, le=1000)
    max_tokens: int = Field(default=16000, ge=500)


class ConversationSettings(StrictSettings):
    max_age_days: int = Field(default=90, ge=1)
    keep_scheduled: int = Field(default=10, ge=0)


class AgentSettings(StrictSettings):
    max_steps: int = Field(default=8, ge=1, le=50)
    persona_file: str | None = None


class TelegramSettings(StrictSettings):
    enabled: bool = False
    token: str | None = None
    base_url: str = "https://api.telegram.org/bot"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_host: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=1, le=65535)
    secret_token: str | None = None
    allowed_users: list[str | int] = Field(default_factory=list)
    album_wait_s: float = Field(default=1.0, gt=0, le=30)


class SlackSettings(StrictSettings):
    enabled: bool = False
    bot_token: str | None = None
    app_token: str | None = None
    signing_secret: str | None = None
    api_url: str = "https://slack.com/api/"
    host: str = "127.0.0.1"
    port: int = Field(default=3000, ge=1, le=65535)
    thread_scope: bool = False
    progress: bool = False


class TerminalSettings(StrictSettings):
    enabled: bool = True
    user: str | None = None


class ChannelsSettings(StrictSettings):
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    terminal: TerminalSettings = Field(default_factory=TerminalSettings)


class PluginsSettings(StrictSettings):
    enabled: list[str] = Field(default_factory=lambda: ["commands"])
    dirs: list[str] = Field(default_factory=list)
    config: dict[str, dict[str, Any]] = Field(default_factory=dict)


class BridgeSettings(StrictSettings):
    max_concurrent_chats: int = Field(default=64, ge=1, le=10000)
    max_message_chars: int = Field(default=20000, ge=100, le=1_000_000)
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    dedupe_window: int = Field(default=10000, ge=10)
    #: Worker threads for blocking calls (SQLite, files, LanceDB): bridge/offload.py.
    worker_threads: int = Field(default=16, ge=2, le=256)


class ClusterSettings(StrictSettings):
    """Receivers and shard workers on Redis Streams; off (one process) while ``redis_url`` is unset."""

    redis_url: str | None = None
    shards: int = Field(default=64, ge=1, le=4096)
    root: str = "./cluster"
    key_prefix: str = Field(default="membridge", pattern=r"^[A-Za-z0-9_.-]+$")
    lease_ttl_s: float = Field(default=15.0, ge=0.2, le=3600)
    dedupe_ttl_s: int = Field(default=86400, ge=60)


class ConsoleSettings(StrictSettings):
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)
    token: str | None = None
    admin_token: str | None = None


class MetricsSettings(StrictSettings):
    """``/metrics``, ``/healthz`` and ``/readyz`` of a long-running role (bridge/ops/health.py). On by
    default on the loopback: a process an operator cannot see into is the problem this solves, and a
    port taken by another membridge process on the same machine is logged, never fatal."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=9464, ge=1, le=65535)


class LimitsSettings(StrictSettings):
    """Per-person daily budgets (a group's turns count against the group); admins are exempt. The
    day is the server's local day; None is no limit."""

    daily_tokens: int | None = Field(default=None, ge=1)
    daily_turns: int | None = Field(default=None, ge=1)


class UsageSettings(StrictSettings):
    """The per-turn records behind ``membridge usage``, ``/usage``, limits and the console's status page."""

    keep_days: int = Field(default=90, ge=2)


class LoggingSettings(StrictSettings):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["text", "json"] = "text"
    file: str | None = None


class AppConfig(StrictSettings):
    workspace: str = "./workspace"
    admins: list[str] = Field(default_factory=list)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    speech: SpeechSettings = Field(default_factory=SpeechSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    channels: ChannelsSettings = Field(default_factory=ChannelsSettings)
    plugins: PluginsSettings = Field(default_factory=PluginsSettings)
    bridge: BridgeSettings = Field(default_factory=BridgeSettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    usage: UsageSettings = Field(default_factory=UsageSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)

    #: The file the config came from (None for built-in defaults); relative paths resolve from it.
    source: Path | None = Field(default=None, exclude=True)

    @field_validator("admins")
    @classmethod
    def _check_admins(cls, value: list[str]) -> list[str]:
        for entry in value:
            if ":" not in str(entry):
                raise ValueError(f"admin {entry!r} must be '<channel>:<user id>', e.g. 'telegram:12345'")
        return [str(entry) for entry in value]

    def workspace_path(self) -> Path:
        return self.resolve_path(self.workspace)

    def resolve_path(self, value: str) -> Path:
        """``~`` expanded; a relative path is taken from the config file's folder, so the same file
        means the same folders wherever membridge is started (the current directory without a file)."""
        path = Path(os.path.expanduser(value))
        if not path.is_absolute() and self.source is not None:
            path = self.source.parent / path
        return path.resolve()

    def _resolve_paths(self) -> None:
        """Make every path-valued key absolute once, so no later consumer resolves it differently."""
        self.workspace = str(self.workspace_path())
        if self.agent.persona_file:
            self.agent.persona_file = str(self.resolve_path(self.agent.persona_file))
        self.plugins.dirs = [str(self.resolve_path(folder)) for folder in self.plugins.dirs]
        if self.logging.file:
            self.logging.file = str(self.resolve_path(self.logging.file))
        self.cluster.root = str(self.resolve_path(self.cluster.root))


def _expand(value: Any, path: str) -> Any:
    """Expand ``${VAR}`` in every string; an unset variable without a default is an error."""
    if isinstance(value, dict):
        return {key: _expand(item, f"{path}.{key}" if path else str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{path}: environment variable {name} is not set (write ${{{name}:-}} to allow empty)")

    return _ENV_RE.sub(replace, value)


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "(top level)"
        if item["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key (check its spelling against config.yaml)")
        else:
            lines.append(f"{key}: {item['msg']} (got {item.get('input')!r})")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def parse_config(data: Any, source: Path | None = None) -> AppConfig:
    """Validate already-loaded YAML data into an :class:`AppConfig`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source or 'config'}: the top level must be a mapping of keys, got {type(data).__name__}")
    try:
        config = AppConfig.model_validate(_expand(data, ""))
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
    config.source = source
    config._resolve_paths()
    return config


def _xdg_home(variable: str, fallback: str) -> Path:
    """An XDG base folder: ``$variable`` when set to an absolute path (as the spec requires), else ``~/fallback``."""
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else Path.home() / fallback


def user_config_file() -> Path:
    """The per-user config file: ``$XDG_CONFIG_HOME/membridge/config.yaml`` (``~/.config/…``)."""
    return _xdg_home("XDG_CONFIG_HOME", ".config") / APP_DIR / DEFAULT_CONFIG_NAME


def user_data_dir() -> Path:
    """The workspace without a config file: ``$XDG_DATA_HOME/membridge`` (``~/.local/share/membridge``)."""
    return _xdg_home("XDG_DATA_HOME", ".local/share") / APP_DIR


def find_config(explicit: str | None) -> Path | None:
    """``--config``, else ``$MEMBRIDGE_CONFIG``, else ./config.yaml, else the per-user file; None: no file."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MEMBRIDGE_CONFIG")
    if env:
        return Path(env)
    for candidate in (Path.cwd() / DEFAULT_CONFIG_NAME, user_config_file()):
        if candidate.is_file():
            return candidate
    return None


def no_config_notice() -> str:
    """What membridge says when it found no config file, so the data folder is never a surprise."""
    return (f"no config file (looked for --config, $MEMBRIDGE_CONFIG, ./{DEFAULT_CONFIG_NAME} and {user_config_file()}); "
            f"using built-in defaults with the workspace in {user_data_dir()}")


def load_config(explicit: str | None = None) -> AppConfig:
    """Load and validate the configuration; raise :class:`ConfigError` with a clear message.

    Without a config file the workspace is the per-user data folder, never the current directory:
    a command run from another folder must not scatter workspaces (see :func:`no_config_notice`).
    """
    path = find_config(explicit)
    if path is None:
        return parse_config({"workspace": str(user_data_dir())})
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist (pass --config PATH or set MEMBRIDGE_CONFIG)")
    try:
        with path.open(encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_problem(path, exc)) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    return parse_config(data, source=path.resolve())


def _yaml_problem(path: Path, error: yaml.YAMLError) -> str:
    """``FILE:LINE:COLUMN: not valid YAML: what`` (PyYAML's own text names a ``<unicode string>``)."""
    mark, context = getattr(error, "problem_mark", None), getattr(error, "context", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    what = getattr(error, "problem", None) or str(error)
    context_mark = getattr(error, "context_mark", None)
    if context and context_mark is not None:
        what += f" ({context} at line {context_mark.line + 1}, column {context_mark.column + 1})"
    return f"{where}: not valid YAML: {what}"
