"""How the memory core's own async code (the flush, Deep Dream) leaves the event loop.

The core owns no threads: its caller passes a function shaped like ``asyncio.to_thread`` (the
bridge passes :func:`bridge.offload.run`, its one bounded pool); :func:`to_thread` (plain
``asyncio.to_thread``) is the default for callers with no pool of their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Offload(Protocol):
    """Run ``func(*args, **kwargs)`` in a worker thread and await its result."""

    def __call__(self, func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[T]: ...


def to_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[T]:
    """``asyncio.to_thread``, with asyncio imported on the first call: a command that only reads a
    MEMORY.md version list never flushes or dreams, and need not load asyncio (~15 ms)."""
    import asyncio

    return asyncio.to_thread(func, *args, **kwargs)
