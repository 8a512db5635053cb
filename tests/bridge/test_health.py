"""/healthz tells a stuck event loop from a live one, from its own thread; a broken readiness check
is a failed check, never a broken probe."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from bridge.ops.health import HealthServer


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own, as the bot's runs beside the endpoints' thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_a_blocked_loop_is_reported_stuck_and_alive_again_once_it_runs(loop) -> None:
    server = HealthServer(loop, list)
    assert server.alive() == (200, {"status": "alive"})
    blocked, release = threading.Event(), threading.Event()

    def block() -> None:  # what a blocking call on the loop does: nothing else runs meanwhile
        blocked.set()
        release.wait()

    loop.call_soon_threadsafe(block)
    assert blocked.wait(10)
    assert server.alive() == (503, {"status": "stuck", "problem": "the event loop did not answer within 2 s"})
    release.set()
    assert server.alive() == (200, {"status": "alive"})


def test_readiness_names_each_failing_check_and_survives_a_broken_one(loop) -> None:
    def broken() -> str | None:
        raise OSError("disk gone")

    server = HealthServer(loop, lambda: [("index", lambda: None), ("redis", lambda: "Redis does not answer"),
                                         ("odd", broken)])
    assert server.ready() == (503, {"status": "not ready", "checks": {
        "index": "ok", "redis": "Redis does not answer", "odd": "OSError: disk gone"}})
