"""ChatLanes and RecentKeys, the one per-chat ordering and dedupe (channels/ordering.py).

Every wait is on an event the jobs set, bounded by the fakes' hang guard; nothing waits on time.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from fakes import HANG_GUARD_S

from channels.ordering import ChatLanes, RecentKeys


async def until(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), HANG_GUARD_S)


async def test_one_chats_jobs_run_in_order_while_other_chats_go_on() -> None:
    lanes = ChatLanes("test", slots=asyncio.Semaphore(4))
    gate, other_done = asyncio.Event(), asyncio.Event()
    done: list[str] = []

    async def job(name: str) -> None:
        if name == "a0":
            await gate.wait()  # the chat's first job is slow…
        done.append(name)
        if name == "b0":
            other_done.set()

    for i in range(10):
        await lanes.submit("a", lambda i=i: job(f"a{i}"))
    await lanes.submit("b", lambda: job("b0"))
    await until(other_done)  # …yet the other chat is served meanwhile
    assert done == ["b0"] and lanes.pending == 10 and lanes.busy_chats == 1
    gate.set()
    assert await lanes.close(HANG_GUARD_S) == 0
    assert done == ["b0", *(f"a{i}" for i in range(10))]


async def test_the_slots_bound_how_many_jobs_run_at_once() -> None:
    lanes = ChatLanes("test", slots=asyncio.Semaphore(2))
    gate, two_running = asyncio.Event(), asyncio.Event()
    running, most, finished = 0, 0, 0

    async def job() -> None:
        nonlocal running, most, finished
        running += 1
        most = max(most, running)
        if running == 2:
            two_running.set()
        await gate.wait()
        running -= 1
        finished += 1

    for chat in range(6):
        await lanes.submit(chat, job)
    await until(two_running)
    for _ in range(20):  # give every other chat's worker the chance to (wrongly) start
        await asyncio.sleep(0)
    assert running == 2 and lanes.busy_chats == 6
    gate.set()
    await lanes.close(HANG_GUARD_S)
    assert (most, finished) == (2, 6)


async def test_submit_waits_for_room_past_max_pending_and_keeps_arrival_order() -> None:
    lanes = ChatLanes("test", max_pending=2)
    gate = asyncio.Event()
    done: list[int] = []

    async def job(n: int) -> None:
        await gate.wait()
        done.append(n)

    await lanes.submit("a", lambda: job(0))
    await lanes.submit("a", lambda: job(1))
    late = [asyncio.create_task(lanes.submit("a", lambda n=n: job(n))) for n in (2, 3)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert not any(task.done() for task in late) and lanes.pending == 2
    gate.set()
    assert await asyncio.wait_for(asyncio.gather(*late), HANG_GUARD_S) == [True, True]
    await lanes.close(HANG_GUARD_S)
    assert done == [0, 1, 2, 3] and lanes.pending == 0


async def test_a_failing_job_is_logged_and_its_chat_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    lanes = ChatLanes("test")
    done: list[str] = []

    async def boom() -> None:
        raise RuntimeError("job bug")

    async def fine() -> None:
        done.append("after")

    await lanes.submit("a", boom)
    await lanes.submit("a", fine)
    with caplog.at_level(logging.ERROR, logger="channels.ordering"):
        await lanes.close(HANG_GUARD_S)
    assert done == ["after"]
    assert "test: a job of chat a failed" in caplog.text and "job bug" in caplog.text


async def test_close_drains_what_is_queued_and_refuses_more() -> None:
    lanes = ChatLanes("test", slots=asyncio.Semaphore(1))
    done: list[int] = []

    async def job(n: int) -> None:
        await asyncio.sleep(0)
        done.append(n)

    for n in range(5):
        await lanes.submit(n % 2, lambda n=n: job(n))
    assert await lanes.close(HANG_GUARD_S) == 0
    assert sorted(done) == [0, 1, 2, 3, 4]
    assert await lanes.submit("a", lambda: job(99)) is False
    assert done.count(99) == 0 and lanes.pending == 0 and lanes.busy_chats == 0


async def test_close_cancels_chats_still_busy_when_the_grace_is_over() -> None:
    lanes = ChatLanes("test", max_pending=3)
    started, cancelled = asyncio.Event(), asyncio.Event()
    never = asyncio.Event()

    async def stuck() -> None:
        started.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    await lanes.submit("a", stuck)
    await lanes.submit("a", stuck)  # queued behind, never runs
    await until(started)
    assert await lanes.close(0) == 1
    assert cancelled.is_set() and lanes.pending == 0 and lanes.busy_chats == 0
    assert await lanes.submit("b", stuck) is False  # room was given back, the lanes are closed


async def test_idle_chats_leave_nothing_behind() -> None:
    lanes = ChatLanes("test", slots=asyncio.Semaphore(8))
    count = 0

    async def job() -> None:
        nonlocal count
        count += 1

    for chat in range(2000):
        await lanes.submit(chat, job)
    await lanes.close(HANG_GUARD_S)
    assert count == 2000 and lanes.busy_chats == 0 and lanes.pending == 0


def test_recent_keys_remember_only_the_last_size_keys() -> None:
    recent = RecentKeys(3)
    assert [recent.add(key) for key in ("a", "b", "a", "c", "d")] == [True, True, False, True, True]
    assert len(recent) == 3
    assert recent.add("d") is False and recent.add("a") is True  # "a" was the oldest: forgotten
    for n in range(100_000):
        recent.add(n)
    assert len(recent) == 3
    with pytest.raises(ValueError):
        RecentKeys(0)
