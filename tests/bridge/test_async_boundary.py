"""The async boundary (issue 15, #10): while another process holds the SQLite write lock, the event
loop keeps answering. Turns and the nightly timer wait for the lock in worker threads
(bridge/offload.py), never on the loop.

The locker is a real second process holding ``BEGIN IMMEDIATE`` on the workspace's index.db; it
says when it holds the lock and lets go only when the test, on the loop, tells it to. The loop is
watched two ways: a heartbeat task must keep beating while a turn and the timer wait for the lock
(a blocked loop could never tell the locker to let go), no callback may compute on the loop for
more than 100 ms, and our code may not touch SQLite, the workspace lock or a file on the loop's
thread at all (tests/support/loop_clock.py). Neither check reads the wall clock: on a busy machine
the operating system alone can pause the process for longer than that.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import date, datetime

import pytest
from fakes import HANG_GUARD_S
from support.bot import dm, make_services
from support.channel import RecordingChannel
from support.loop_clock import LoopClock, LoopIO
from support.sqlite_locker import SCRIPT as LOCKER_SCRIPT

from bridge import offload
from bridge.wiring.runtime import Bridge
from bridge.wiring.timer import DailyTimer
from memory import DreamSettings
from plugins import PluginRegistry
from plugins.builtin.commands import CommandsPlugin

MAX_CPU_S = 0.1
BEATS = 50  # heartbeats watched while the lock is held (each ~10 ms)


class Heartbeat:
    """Beats every 10 ms on the loop; ``enough`` is set after ``BEATS`` beats."""

    def __init__(self) -> None:
        self.beats = 0
        self.enough = asyncio.Event()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.beats += 1
            if self.beats >= BEATS:
                self.enough.set()


async def test_the_loop_keeps_answering_while_another_process_holds_the_write_lock(
        tmp_path, fake_llm, monkeypatch: pytest.MonkeyPatch) -> None:
    services = make_services(tmp_path / "ws", fake_llm.base_url)
    channel = RecordingChannel()
    bridge = Bridge(services, [channel], PluginRegistry([CommandsPlugin(None)]))
    await bridge.start(timer=False)
    await channel.push(dm("hello", user="1"))
    await channel.wait_sent(1)  # sessions, prompt and index exist: what follows only waits on the lock

    loop = asyncio.get_running_loop()
    writing, written = asyncio.Event(), list[date]()

    def set_last_run(day: date) -> None:
        """The timer's own write, announced first (from whatever thread it runs in)."""
        loop.call_soon_threadsafe(writing.set)
        services.timer._set_last_run(day)
        written.append(day)

    night = DailyTimer(_no_job, DreamSettings(time="00:00", jitter_minutes=0),
                       get_last_run=services.timer._get_last_run, set_last_run=set_last_run,
                       clock=lambda: datetime(2026, 12, 4, 9, 0))
    locker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOCKER_SCRIPT, str(services.workspace.db_path),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert locker.stdin is not None and locker.stdout is not None
    heart = Heartbeat()
    beating: asyncio.Task[None] | None = None
    try:
        assert await asyncio.wait_for(locker.stdout.readline(), HANG_GUARD_S) == b"locked\n"
        on_loop = LoopIO(monkeypatch)
        with LoopClock(MAX_CPU_S) as clock:
            ticking = asyncio.create_task(night.tick())  # the timer records the night it ran…
            await asyncio.wait_for(writing.wait(), HANG_GUARD_S)
            beating = asyncio.create_task(heart.run())  # …and the loop beats on while that write waits
            await channel.push(dm("are you there?", user="2"))  # a turn, which must write to the database too
            await asyncio.wait_for(heart.enough.wait(), HANG_GUARD_S)
            assert len(channel.sent) == 1 and written == []  # both still wait for the lock…
            locker.stdin.write(b"go\n")
            await locker.stdin.drain()
            await asyncio.wait_for(ticking, HANG_GUARD_S)
            await channel.wait_sent(2)  # …and finish once it is free
        touched = dict(on_loop.touches)
    finally:
        if beating is not None:
            beating.cancel()
        if locker.returncode is None:
            locker.kill()
        await locker.wait()
        await bridge.shutdown()
    assert channel.texts("2") == ["ok"] and written == [date(2026, 12, 4)]
    assert clock.blocked == [], "callbacks computed on the loop for too long:\n" + "\n".join(clock.blocked)
    assert touched == {}, "SQLite, the workspace lock or a file was used on the loop"


async def _no_job(day: date, lookback_days: int) -> None:
    return None


async def test_offload_runs_calls_on_its_own_bounded_pool() -> None:
    """Blocking calls run on the bridge's pool (named threads), not on asyncio's default executor,
    and no more of them than the pool's size run at once."""
    import threading

    names = await asyncio.gather(*(offload.run(lambda: threading.current_thread().name) for _ in range(4)))
    assert all(name.startswith("membridge-io") for name in names)
    loop = asyncio.get_running_loop()
    running, most, lock = 0, 0, threading.Lock()
    release, full = threading.Event(), asyncio.Event()

    def held() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            if running == offload.DEFAULT_THREADS:
                loop.call_soon_threadsafe(full.set)
        release.wait(HANG_GUARD_S)
        with lock:
            running -= 1

    calls = [asyncio.create_task(offload.run(held)) for _ in range(offload.DEFAULT_THREADS + 8)]
    await asyncio.wait_for(full.wait(), HANG_GUARD_S)
    release.set()
    await asyncio.gather(*calls)
    assert most == offload.DEFAULT_THREADS


def test_the_bridge_leaves_the_loop_only_through_offload() -> None:
    """One owner of the worker threads: a bare ``asyncio.to_thread`` or ``run_in_executor`` in
    bridge/ would run on asyncio's small default pool, beside the loop's DNS lookups."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    bare = []
    for path in sorted((root / "bridge").rglob("*.py")):
        if path.name == "offload.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("to_thread", "run_in_executor"):
                bare.append(f"{path.relative_to(root)}:{node.lineno}: {node.attr}")
    assert bare == [], "use bridge.offload.run instead:\n" + "\n".join(bare)
