"""The Redis client of a cluster role, and how a role waits while watching for its stop."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ..config import ClusterSettings

if TYPE_CHECKING:
    from redis.asyncio import Redis

#: Errors that mean "Redis is not there right now" (down, restarting, loading its data): retried.
try:
    from redis import exceptions as _errors

    UNAVAILABLE: tuple[type[BaseException], ...] = (
        _errors.ConnectionError, _errors.TimeoutError, _errors.BusyLoadingError, OSError)
except ImportError:  # pragma: no cover - connect() says what to install
    UNAVAILABLE = (OSError,)

BLOCK_MS = 1000  # how long a worker's XREADGROUP waits for new entries before looking around


def connect(settings: ClusterSettings) -> Redis:
    """A client for ``cluster.redis_url`` (strings decoded); it connects on first use."""
    if not settings.redis_url:
        raise ValueError("the cluster roles need cluster.redis_url (e.g. redis://127.0.0.1:6379/0)")
    try:
        from redis.asyncio import Redis
    except ImportError:
        raise ValueError("the cluster roles need redis-py: pip install 'membridge[cluster]'") from None
    return Redis.from_url(settings.redis_url, decode_responses=True, socket_connect_timeout=2.0,
                          socket_timeout=BLOCK_MS / 1000 + 5.0)


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds`` unless ``stop`` is set first; True when it is."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()
