"""What a forget or an erase in a shard removes from Redis: the text in the shard's stream, and
every copy Redis keeps on disk.

A message stays in its shard's stream until it is acknowledged and trimmed, and Redis keeps more
than the stream shows: ``XDEL`` and ``XTRIM`` only mark an entry deleted inside its block (its bytes
stay, in memory and in the next snapshot), and the append-only file holds every ``XADD`` since its
last rewrite. So a forget in a shard's workspace, in its remove phase (a recorded job: a crash
before the end runs it again), rebuilds the stream in one Lua script: the messages not yet answered
and not forgotten are written again with their ids, each still-pending one is delivered again to
the consumer that had it, the group's position and the stream's last id are kept; everything else
(answered messages, the forgotten ones) is left behind. Then it rewrites the append-only file and
waits for the rewrite, after which Redis deletes the old files.

Not reached: a Redis replica's own files (rewrite its AOF too) and an RDB snapshot taken before the
forget when ``save`` is on (``cluster.redis_url`` deployments run with ``appendonly yes``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory import ForgetDeferred

from ..config import AppConfig
from ..scopes import scope_for, thread_scope_channels
from .connection import UNAVAILABLE
from .keys import FIELD, GROUP, Keys, decode_message, shard_workspace

log = logging.getLogger(__name__)

#: KEYS[1] the stream; ARGV[1] the group, ARGV[2..] the ids to leave out. Returns how many were.
_REBUILD = """
local stream, group = KEYS[1], ARGV[1]
if redis.call('EXISTS', stream) == 0 then return 0 end
local drop = {}
for i = 2, #ARGV do drop[ARGV[i]] = true end
local function field(list, name)
  for i = 1, #list, 2 do if list[i] == name then return list[i + 1] end end
end
local function after(a, b)
  local ams, aseq = string.match(a, '(%d+)-(%d+)')
  local bms, bseq = string.match(b, '(%d+)-(%d+)')
  ams, aseq, bms, bseq = tonumber(ams), tonumber(aseq), tonumber(bms), tonumber(bseq)
  return ams > bms or (ams == bms and aseq > bseq)
end
local last_id = field(redis.call('XINFO', 'STREAM', stream), 'last-generated-id')
local delivered, owner = nil, {}
for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
  if field(g, 'name') == group then delivered = field(g, 'last-delivered-id') end
end
if delivered then
  for _, p in ipairs(redis.call('XPENDING', stream, group, '-', '+', 1000000)) do owner[p[1]] = p[2] end
end
local entries = redis.call('XRANGE', stream, '-', '+')
redis.call('DEL', stream)
local dropped, again = 0, {}
for _, entry in ipairs(entries) do
  local id = entry[1]
  if drop[id] then
    dropped = dropped + 1
  elseif owner[id] or not delivered or after(id, delivered) then
    redis.call('XADD', stream, id, unpack(entry[2]))
    if owner[id] then table.insert(again, id) end
  end
end
redis.call('XGROUP', 'CREATE', stream, group, '0-0', 'MKSTREAM')
for _, id in ipairs(again) do
  redis.call('XREADGROUP', 'GROUP', group, owner[id], 'COUNT', 1, 'STREAMS', stream, '>')
end
if delivered then redis.call('XGROUP', 'SETID', stream, group, delivered) end
redis.call('XSETID', stream, last_id)
return dropped
"""
REWRITE_WAIT_S = 600.0  # an append-only file rewrite that takes longer fails the forget (it is retried)
_POLL_S = 0.05

Matcher = Callable[[str], bool]


def shard_of_workspace(config: AppConfig) -> int | None:
    """The shard whose workspace ``config`` opens (``<cluster.root>/shards/<n>``), else None."""
    workspace = config.workspace_path().resolve()
    for shard in range(config.cluster.shards):
        if shard_workspace(Path(config.cluster.root), shard).resolve() == workspace:
            return shard
    return None


class StreamForgetter:
    """Removes a scope's text (``matches``), or all its messages (None), from shard ``shard``'s stream
    and from Redis's files. Blocking: it runs in the forget job's thread, with a client of its own."""

    def __init__(self, config: AppConfig, shard: int) -> None:
        self.config = config
        self.stream = Keys(config.cluster.key_prefix).stream(shard)
        self._thread_channels = thread_scope_channels(config)

    def __call__(self, scope: str, matches: Matcher | None) -> None:
        from redis import Redis

        client = Redis.from_url(self.config.cluster.redis_url or "", decode_responses=True,
                                socket_connect_timeout=5.0, socket_timeout=30.0)
        try:
            entries: list[tuple[str, dict[str, Any] | None]] = client.xrange(self.stream) or []  # type: ignore[assignment]
            doomed = [entry_id for entry_id, fields in entries if fields and self._doomed(fields, scope, matches)]
            dropped = client.eval(_REBUILD, 1, self.stream, GROUP, *doomed)
            log.info("%s: %d message(s) of %s forgotten from the stream; rewriting Redis's append-only file",
                     self.stream, dropped, scope)
            rewrite_aof(client)
        except UNAVAILABLE as exc:
            raise ForgetDeferred(f"{self.stream}: Redis is unreachable ({exc}); the forget stays recorded and is "
                               "finished at the next start on this workspace (a worker opening the shard, or any membridge command)") from exc
        finally:
            client.close()

    def _doomed(self, fields: dict[str, Any], scope: str, matches: Matcher | None) -> bool:
        """Whether the entry is ``scope``'s and (forgetting a text) holds it; an entry that is no
        message is left as it is."""
        try:
            message = decode_message(fields[FIELD], bare=True)
        except (KeyError, TypeError, ValueError):
            return False
        if scope_for(message, self.config.memory.scope, thread_channels=self._thread_channels) != scope:
            return False
        return matches is None or matches(fields[FIELD]) or matches(message.text)


def rewrite_aof(client: Any) -> None:
    """Rewrite the append-only file from what Redis holds now and wait for it (old files hold
    every command since the last rewrite); nothing to do when Redis runs without one."""
    if not int(client.info("persistence").get("aof_enabled", 0)):
        log.warning("Redis runs without appendonly: nothing to rewrite (its RDB snapshots keep what they hold)")
        return
    deadline = time.monotonic() + REWRITE_WAIT_S
    while True:  # one already running began before our change: ours must run after it
        try:
            client.bgrewriteaof()
            break
        except UNAVAILABLE:
            raise
        except Exception as exc:  # "already in progress"
            if "in progress" not in str(exc):
                raise
        _wait_rewrite(client, deadline)
    _wait_rewrite(client, deadline)
    status = client.info("persistence").get("aof_last_bgrewrite_status")
    if status != "ok":
        raise RuntimeError(f"Redis's append-only file rewrite failed ({status}); the forget is retried")


def _wait_rewrite(client: Any, deadline: float) -> None:
    while True:
        info = client.info("persistence")
        if not int(info.get("aof_rewrite_in_progress", 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"Redis's append-only file rewrite took over {REWRITE_WAIT_S:.0f}s")
        time.sleep(_POLL_S)  # polling Redis's state between two INFO calls
