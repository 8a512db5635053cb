"""How a long-running command learns that it should stop: SIGINT (Ctrl-C) or SIGTERM.

Every command that runs until stopped (``membridge run``, ``console``, the cluster roles) takes
the signals through its event loop, not through Python's own handler. Python runs a signal's handler
in the main thread only, and the kernel may deliver a process's signal to any thread: when it lands
on a worker thread (a ``to_thread`` call, an idle executor thread) while the loop waits in select()
with nothing scheduled, the main thread never wakes and Ctrl-C does nothing. The loop's handler
writes the signal to the loop's wakeup pipe from whichever thread received it, so the loop wakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from typing import Any


def stop_on_signals(stop: Callable[[], None]) -> None:
    """Call ``stop`` on SIGINT or SIGTERM, from the running loop (where it can: not on Windows,
    nor outside the main thread)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop)


async def until_stopped(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` until it ends or SIGINT/SIGTERM comes. A stop cancels it and is a normal end;
    an error of its own is raised."""
    stop = asyncio.Event()
    stop_on_signals(stop.set)
    task = asyncio.create_task(work)
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
