"""Leases in Redis: a key that names its holder and expires unless the holder renews it.

A shard (and the one polling receiver) belongs to whoever holds its lease. Claiming is ``SET NX PX``
and, in the same atomic step, ``INCR`` of the lease's grant counter (``<lease key>:token``): every
grant carries a fencing token larger than any before it, which the holder shows wherever it writes
(:mod:`.fencing`). Renewing and releasing check the holder inside Redis (short Lua scripts run
atomically), so a worker whose lease already moved on can neither extend nor delete the new
holder's lease. A lease that lapsed is lost even if nobody took it yet: its token may be stale, so
the holder claims it again and gets a new one.
"""

from __future__ import annotations

import os
import socket
import uuid

from redis.asyncio import Redis

_CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_ADVANCE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local token = redis.call('INCR', KEYS[2])
if token <= tonumber(ARGV[2]) then
  token = tonumber(ARGV[2]) + 1
  redis.call('SET', KEYS[2], token)
end
return token
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
        self._claim = redis.register_script(_CLAIM)
        self._renew = redis.register_script(_RENEW)
        self._advance = redis.register_script(_ADVANCE)
        self._release = redis.register_script(_RELEASE)

    @staticmethod
    def token_key(key: str) -> str:
        """The counter of ``key``'s grants: never deleted, so tokens only grow."""
        return f"{key}:token"

    async def claim(self, key: str) -> int:
        """Take ``key`` if nobody holds it: the grant's fencing token, 0 when another holds it."""
        return int(await self._claim(keys=[key, self.token_key(key)], args=[self.holder, self.ttl_ms]))

    async def renew(self, key: str) -> bool:
        """Extend our lease by the TTL from now; False: it is lost (taken, or lapsed)."""
        return bool(await self._renew(keys=[key], args=[self.holder, self.ttl_ms]))

    async def advance(self, key: str, past: int) -> int:
        """A token above ``past`` for the lease we hold (0 if we do not): for a holder that finds a
        larger token already written where it works, i.e. Redis lost its counter (restored from an
        old backup, or run without ``appendonly``)."""
        return int(await self._advance(keys=[key, self.token_key(key)], args=[self.holder, past]))

    async def release(self, key: str) -> None:
        """Give ``key`` up at once (only if it is still ours), so another may claim it without waiting."""
        await self._release(keys=[key], args=[self.holder])
