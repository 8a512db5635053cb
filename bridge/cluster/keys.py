"""Where things live in Redis, which shard a scope belongs to, and a message's wire form.

Every key starts with ``cluster.key_prefix``, so several deployments can share one Redis. The shard
of a scope is a stable hash (BLAKE2b), never Python's per-process salted ``hash``: every receiver,
today and after a restart, must send a scope's messages to the same stream.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from channels import Channel, IncomingMessage

from ..config import AppConfig

GROUP = "workers"  # the one consumer group of every shard stream
FIELD = "message"  # the stream entry's only field: the message as JSON
_MESSAGE_FIELDS = frozenset(field.name for field in fields(IncomingMessage))


def shard_of(scope: str, shards: int) -> int:
    """The virtual shard of ``scope``: the same on every machine and after every restart."""
    digest = hashlib.blake2b(scope.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


@dataclass(frozen=True)
class Keys:
    """The Redis key names of one deployment (``cluster.key_prefix``)."""

    prefix: str

    def stream(self, shard: int) -> str:
        return f"{self.prefix}:shard:{shard}"

    def lease(self, shard: int) -> str:
        return f"{self.prefix}:lease:{shard}"

    def worker(self, worker_id: str) -> str:
        return f"{self.prefix}:worker:{worker_id}"

    def workers_pattern(self) -> str:
        return f"{self.prefix}:worker:*"

    def seen(self, dedupe_key: str) -> str:
        return f"{self.prefix}:seen:{dedupe_key}"

    def poller(self) -> str:
        """The lease of the one receiver that polls (Telegram polling, Slack Socket Mode)."""
        return f"{self.prefix}:poller"

    def duplicates(self, hour: int) -> str:
        """A hash shard -> redeliveries the receivers dropped in clock hour ``hour`` (epoch seconds // 3600)."""
        return f"{self.prefix}:duplicates:{hour}"

    def nightly(self) -> str:
        """A hash shard -> day of its last nightly pass, mirrored from the shard for ``cluster status``."""
        return f"{self.prefix}:nightly"


def shard_workspace(root: Path, shard: int) -> Path:
    """``<cluster.root>/shards/<n>/``: an ordinary membridge workspace."""
    return root / "shards" / str(shard)


def shard_config(config: AppConfig, shard: int) -> AppConfig:
    """The config shard ``shard`` runs with: its workspace, and its vectors in a prefix of their own
    when ``memory.vectors.uri`` moves them out of the workspace (``<uri>/shards/<n>``), so a shard's
    vectors follow its lease wherever it is opened."""
    config = config.model_copy(deep=True)
    config.workspace = str(shard_workspace(Path(config.cluster.root), shard))
    vectors = config.memory.vectors
    if vectors.uri:
        vectors.uri = f"{vectors.uri.rstrip('/')}/shards/{shard}"
    return config


def encode_message(message: IncomingMessage) -> str:
    """JSON of every field; ``raw`` only when it is plain JSON data (Slack's event: its
    ``response_url`` and thread are needed to answer), not a library object (Telegram's Update).
    Attachments go as their channel describes them (file ids, never bytes)."""
    data = {name: getattr(message, name) for name in _MESSAGE_FIELDS}
    if not isinstance(message.raw, dict):
        data["raw"] = None
    data["attachments"] = [attachment.to_wire() for attachment in message.attachments]
    return json.dumps(data, ensure_ascii=False, default=str)


def decode_message(payload: str | bytes, channels: Mapping[str, Channel] | None = None, *,
                   bare: bool = False) -> IncomingMessage:
    """The message :func:`encode_message` wrote; unknown fields (a newer receiver) are ignored.

    Its attachments are made again by the message's channel among ``channels``, so the worker
    reads the files through its own connection. ValueError if there are attachments and no channel,
    unless ``bare``: then they are left out (a reader that needs only who wrote what).
    """
    data: dict[str, Any] = json.loads(payload)
    wired = data.pop("attachments", None) or []
    if bare:
        wired = []
    channel = (channels or {}).get(str(data.get("channel")))
    if wired and channel is None:
        raise ValueError(f"attachments from {data.get('channel')!r}, a channel not enabled here")
    attachments = tuple(channel.attachment_from_wire(item) for item in wired) if channel else ()
    return IncomingMessage(**{key: value for key, value in data.items() if key in _MESSAGE_FIELDS},
                           attachments=attachments)


def appended_at(entry_id: str) -> float:
    """When a stream entry was appended (epoch seconds): Redis names it ``<milliseconds>-<sequence>``."""
    return int(entry_id.split("-", 1)[0]) / 1000
