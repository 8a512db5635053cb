"""The async boundary: every blocking call of the bridge (SQLite, files, LanceDB) leaves the event
loop through :func:`run`, onto one bounded pool of worker threads owned here.

Why a pool of our own rather than asyncio's default executor (what bare ``asyncio.to_thread``
uses): that pool is small (``min(32, cpus + 4)``: 6 threads on a 2-core machine) and shared with
the event loop's own needs, above all ``getaddrinfo`` for every new HTTP connection (the LLM,
Telegram, Slack). When another process holds the workspace's SQLite write lock, each memory call
waits for it inside a worker thread; on the default pool a handful of such waits would leave no
thread for a DNS lookup, and turns of chats that never touch the database would stall at their
next connect. Here those waits queue only memory calls, behind ``bridge.worker_threads`` threads.

One pool per process, whatever the number of workspaces in it (a cluster worker opens one per
shard): the bound is on threads, and threads are a process's resource. It is made on first use,
with the size :func:`configure` was given last before that (``Services`` passes its config).
The memory package, which knows nothing of the bridge, takes :func:`run` as its way to leave the
loop where it has async code of its own (the flush and Deep Dream).
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["DEFAULT_THREADS", "configure", "run"]

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_THREADS = 16

_lock = threading.Lock()
_size = DEFAULT_THREADS
_pool: ThreadPoolExecutor | None = None


def configure(threads: int) -> None:
    """The pool's size (``bridge.worker_threads``); it applies if the pool is not made yet."""
    global _size
    with _lock:
        _size = threads


def _executor() -> ThreadPoolExecutor:
    global _pool
    from concurrent.futures import ThreadPoolExecutor  # with asyncio: ~15 ms a CLI command never needs

    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_size, thread_name_prefix="membridge-io")
        return _pool


async def run(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)`` on the bounded pool, awaited without blocking the loop (like
    ``asyncio.to_thread``, context variables included)."""
    import asyncio  # loaded already: this is a coroutine

    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await loop.run_in_executor(_executor(), call)
