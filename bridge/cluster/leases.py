"""Leases in Redis: a key that names its holder and expires unless the holder renews it.

A shard (and the one polling receiver) belongs to whoever holds its lease. Claiming is ``SET NX PX``;
renewing and releasing check the holder inside Redis (a short Lua script runs atomically), so a
worker whose lease already moved on can neither extend nor delete the new holder's lease.
"""

from __future__ import annotations

import os
import socket
import uuid

from redis.asyncio import Redis

_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def new_holder_id() -> str:
    """``host:pid:random``: readable in ``cluster status``, unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def holder_pid(holder: str) -> int | None:
    """The process id inside a holder id (for an operator, or a test, to find the process)."""
    parts = holder.split(":")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


class Leases:
    """Claim, renew and release leases held by ``holder`` for ``ttl_s`` seconds."""

    def __init__(self, redis: Redis, holder: str, ttl_s: float) -> None:
        self.redis = redis
        self.holder = holder
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    async def claim(self, key: str) -> bool:
        """Take ``key`` if nobody holds it."""
        return bool(await self.redis.set(key, self.holder, nx=True, px=self.ttl_ms))

    async def renew(self, key: str) -> bool:
        """Extend our lease (or take it back if it lapsed and nobody took it); False: it is lost."""
        return bool(await self._renew(keys=[key], args=[self.holder, self.ttl_ms]))

    async def release(self, key: str) -> None:
        """Give ``key`` up at once (only if it is still ours), so another may claim it without waiting."""
        await self._release(keys=[key], args=[self.holder])
