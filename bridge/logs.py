"""Logging set-up that never writes a secret, and never writes into the terminal chat.

Client libraries log request URLs (a Telegram bot token is part of every Bot API URL) and error
bodies; a filter on each handler replaces every configured secret before a record is written.

Records go to stderr and, with ``logging.file``, to that file too (``logging.format``: text or one
JSON object a line). One-shot commands log warnings only (their output is their result); the bot
processes (``run``, ``chat``, ``console``) log at ``logging.level``; ``-v`` is debug everywhere.
While the terminal chat owns the screen (:func:`chat_owns_terminal`), stderr shows only the start
and stop lines of the :data:`STATUS_LOGGER`, and everything else goes to the log file.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from .config import AppConfig, LoggingSettings
from .redaction import url_secrets

#: The logger of the lines that say what ``membridge run`` started and when it stopped.
STATUS_LOGGER = "membridge"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET_LIBRARIES = ("httpx", "httpx2", "httpcore", "httpcore2", "telegram", "slack_bolt", "slack_sdk", "aiohttp.access")


def config_secrets(config: AppConfig) -> list[str]:
    """Every secret value in the configuration (tokens, keys, signing secrets, the Redis URL's password:
    that one whatever its length, since it is never an ordinary word of a log line)."""
    channels = config.channels
    values = [
        config.llm.api_key, config.embedding.api_key, config.memory.rerank.api_key,
        channels.telegram.token, channels.telegram.secret_token,
        channels.slack.bot_token, channels.slack.app_token, channels.slack.signing_secret,
        config.console.token, config.console.admin_token,
    ]
    return [value for value in values if value and len(value) >= 6] + url_secrets(config.cluster.redis_url)


class RedactSecrets(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = sorted(set(secrets), key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        message = record.getMessage()
        text = message
        for secret in self.secrets:
            text = text.replace(secret, "***")
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            for secret in self.secrets:
                record.exc_text = record.exc_text.replace(secret, "***")
        if text != message:
            record.msg, record.args = text, ()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line (``logging.format: json``), for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:  # already redacted by RedactSecrets when secrets are configured
            data["exception"] = record.exc_text
        return json.dumps(data, ensure_ascii=False)


class _Console(logging.StreamHandler):  # type: ignore[type-arg]
    """The stderr handler, told apart from the file handler by :func:`chat_owns_terminal`."""


def setup_logging(verbose: bool, secrets: Iterable[str] = (), settings: LoggingSettings | None = None, *,
                  long_running: bool = False) -> None:
    """Log to stderr (and ``settings.file``) with secrets redacted from every record.

    The level is debug with ``-v``, else ``settings.level`` for a ``long_running`` bot process,
    else warning: a one-shot command's own output is what the user asked for.
    """
    settings = settings or LoggingSettings()
    secrets = list(secrets)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    root.addHandler(_handler(_Console(sys.stderr), settings, secrets))
    if settings.file:
        root.addHandler(_file_handler(Path(settings.file), settings, secrets))
    level = settings.level.upper() if long_running else "WARNING"
    root.setLevel(logging.DEBUG if verbose else level)
    logging.getLogger(STATUS_LOGGER).setLevel(logging.DEBUG if verbose else logging.INFO)  # always said
    for noisy in QUIET_LIBRARIES:
        logging.getLogger(noisy).setLevel(logging.NOTSET if verbose else logging.WARNING)


def _handler(handler: logging.Handler, settings: LoggingSettings, secrets: Iterable[str]) -> logging.Handler:
    handler.setFormatter(JsonFormatter() if settings.format == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(RedactSecrets(secrets))
    return handler


def _file_handler(path: Path, settings: LoggingSettings, secrets: Iterable[str]) -> logging.Handler:
    """Appends; reopened when logrotate moves the file away."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return _handler(logging.handlers.WatchedFileHandler(path, encoding="utf-8"), settings, secrets)


def chat_owns_terminal(config: AppConfig) -> Path:
    """The terminal chat is about to own this screen: from now on stderr shows only the status lines
    (start, stop), and every other record goes to the log file, ``logging.file`` or else
    ``<workspace>/membridge.log``, so no warning lands between the chat's lines. Returns the file."""
    root = logging.getLogger()
    files = [h for h in root.handlers if isinstance(h, logging.FileHandler)]
    if files:
        path = Path(files[0].baseFilename)
    else:
        path = config.workspace_path() / "membridge.log"
        root.addHandler(_file_handler(path, config.logging, config_secrets(config)))
    for handler in root.handlers:
        if isinstance(handler, _Console):
            handler.addFilter(lambda record: record.name == STATUS_LOGGER)
    return path
