"""Logging set-up that never writes a secret.

Client libraries log request URLs (a Telegram bot token is part of every Bot API URL) and error
bodies; a filter on the handler replaces every configured secret before a record is written.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

from .config import AppConfig


def config_secrets(config: AppConfig) -> list[str]:
    """Every secret value in the configuration (tokens, keys, signing secrets)."""
    channels = config.channels
    values = [
        config.llm.api_key, config.embedding.api_key, channels.telegram.token, channels.telegram.secret_token,
        channels.slack.bot_token, channels.slack.app_token, channels.slack.signing_secret,
        config.console.token, config.console.admin_token,
    ]
    return [value for value in values if value and len(value) >= 6]


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


def setup_logging(verbose: bool, secrets: Iterable[str] = ()) -> None:
    """Log to stderr (debug with ``-v``), with secrets redacted from every record."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    if not verbose:
        for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "telegram", "slack_bolt", "slack_sdk"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
