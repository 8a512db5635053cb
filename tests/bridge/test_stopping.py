"""Ctrl-C stops a long-running command whichever thread the kernel hands the signal to."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading

import pytest

from bridge.wiring.stopping import until_stopped

WATCHDOG_S = 10.0


def _idle_in_select(thread_id: int) -> bool:
    """Whether that thread waits in the event loop's select(), with nothing else to do."""
    frame = sys._current_frames().get(thread_id)
    return frame is not None and frame.f_code.co_name == "select" and frame.f_code.co_filename.endswith("selectors.py")


async def _idle_until_a_worker_thread_gets_sigint(watchdog_fired: threading.Event, finished: threading.Event) -> None:
    """Wait forever, while a thread that is not the main one receives SIGINT once the loop idles.

    If the loop does not wake, the watchdog wakes it after ``WATCHDOG_S`` and says so, so that the
    test fails instead of hanging."""
    loop = asyncio.get_running_loop()
    main = threading.get_ident()

    def deliver() -> None:
        while not _idle_in_select(main):  # the case that hung: the loop blocked with no timeout
            finished.wait(0.001)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        if not finished.wait(WATCHDOG_S):
            watchdog_fired.set()
            loop.call_soon_threadsafe(lambda: None)

    threading.Thread(target=deliver, daemon=True).start()
    await asyncio.Event().wait()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_sigint_that_lands_on_another_thread_stops_the_work() -> None:
    watchdog_fired, finished = threading.Event(), threading.Event()
    try:
        asyncio.run(until_stopped(_idle_until_a_worker_thread_gets_sigint(watchdog_fired, finished)))
    finally:
        finished.set()
    assert not watchdog_fired.is_set(), "the loop slept through a SIGINT that a worker thread received"


def test_an_error_of_the_work_itself_is_raised() -> None:
    async def fails() -> None:
        raise LookupError("port taken")

    with pytest.raises(LookupError, match="port taken"):
        asyncio.run(until_stopped(fails()))
