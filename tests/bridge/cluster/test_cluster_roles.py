"""Receivers and shard workers as real processes over real Redis, fake Telegram and a fake LLM."""

from __future__ import annotations

import asyncio
import collections
import os
from pathlib import Path
from typing import Any

import pytest
from fakes import HANG_GUARD_S
from fakes.telegram_server import FakeTelegram
from redis.asyncio import Redis
from support.cluster import Role, cluster_config, wait_all

from bridge.cluster.keys import Keys, shard_of
from bridge.cluster.leases import holder_pid
from bridge.scopes import scope_for
from bridge.wiring.worker import SUMMARY_PROMPT
from channels import IncomingMessage

pytestmark = pytest.mark.slow
SHARDS = 8


def respond(body: dict[str, Any]) -> str:
    """A turn answers ``re: <the user's text>``; a daily-memory summary lists each user line."""
    messages = body["messages"]
    if messages[0]["content"] == SUMMARY_PROMPT:
        said = [line.removeprefix("user: ") for line in messages[-1]["content"].splitlines()
                if line.startswith("user: ")]
        return "\n".join(f"- noted {text}" for text in said) or "NONE"
    return "re: " + [m for m in messages if m["role"] == "user"][-1]["content"]


def chat_id(chat: int) -> int:
    return 5000 + chat


def shard_of_chat(chat: int) -> int:
    """The shard of a private Telegram chat, derived by the function the receiver uses."""
    message = IncomingMessage(channel="telegram", chat_id=str(chat_id(chat)), chat_type="direct",
                              user_id=str(chat_id(chat)), user_name="u", text="", message_id="1")
    return shard_of(scope_for(message), SHARDS)


def answers_by_chat(telegram: FakeTelegram) -> dict[int, list[str]]:
    answers: dict[int, list[str]] = collections.defaultdict(list)
    for sent in telegram.sent:
        answers[int(sent["chat_id"])].append(sent["visible"])
    return answers


def daily_lines(root: Path) -> list[str]:
    return [line for path in sorted(root.glob("shards/*/**/memory/*.md"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("- noted ")]


def fair(workers: list[Role]) -> bool:
    """Every shard held, by exactly one worker, shares differing by at most one."""
    held = [worker.shards for worker in workers]
    union = set().union(*held)
    return (union == set(range(SHARDS)) and sum(map(len, held)) == SHARDS
            and max(map(len, held)) - min(map(len, held)) <= 1)


async def push_all(telegram: FakeTelegram, chats: int, per_chat: int) -> None:
    for turn in range(per_chat):
        for chat in range(chats):
            telegram.push_text(chat_id(chat), chat_id(chat), f"c{chat}-m{turn}")


def assert_answered_once_in_order(telegram: FakeTelegram, chats: int, per_chat: int) -> None:
    answers = answers_by_chat(telegram)
    for chat in range(chats):
        assert answers[chat_id(chat)] == [f"re: c{chat}-m{turn}" for turn in range(per_chat)], f"chat {chat}"
    assert len(telegram.sent) == chats * per_chat


class LockWatch:
    """Samples /proc/locks: which process holds each shard workspace's lock, against its lease."""

    def __init__(self, root: Path, redis: Redis, keys: Keys) -> None:
        self.root, self.redis, self.keys = root, redis, keys
        self.checked = 0
        self.mismatches: list[str] = []

    def _held_locks(self) -> dict[int, int]:
        """inode -> pid of every flock on this machine."""
        held: dict[int, int] = {}
        for line in Path("/proc/locks").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[1] == "FLOCK":
                held[int(parts[5].split(":")[2])] = int(parts[4])
        return held

    async def run(self, stop: asyncio.Event) -> None:
        """Each sample reads the leases, the locks, then the leases again: a lease that changed in
        between (a shard handed over just then) proves nothing either way and is skipped."""
        lease_keys = [self.keys.lease(shard) for shard in range(SHARDS)]
        while not stop.is_set():
            before = await self.redis.mget(lease_keys)
            locks = self._held_locks()
            after = await self.redis.mget(lease_keys)
            for shard in range(SHARDS):
                lock = self.root / "shards" / str(shard) / ".lock"
                if before[shard] != after[shard] or not lock.exists():
                    continue
                if (pid := locks.get(os.stat(lock).st_ino)) is None:
                    continue
                self.checked += 1
                if after[shard] is None or holder_pid(after[shard]) != pid:
                    self.mismatches.append(f"shard {shard}: lock held by pid {pid}, lease by {after[shard]}")
            await asyncio.sleep(0.02)  # a sampling interval, not a wait for something to happen


async def lease_moved(redis: Redis, shard: int, old: str, deadline: float) -> float:
    """When another worker holds ``shard``'s lease (asked of Redis until then, or the deadline)."""
    loop = asyncio.get_running_loop()
    while await redis.get(Keys("membridge").lease(shard)) in (old, None):
        assert loop.time() < deadline, f"shard {shard}'s lease never moved from {old}"
        await asyncio.sleep(0.01)  # between two polls of a condition, not a wait for time to pass
    return loop.time()


async def start_workers(config: Path, count: int) -> list[Role]:
    return [await Role.start(config, "worker", f"worker{i}") for i in range(count)]


async def stop_all(roles: list[Role]) -> None:
    codes = await asyncio.gather(*(role.stop() for role in roles))
    for role, code in zip(roles, codes, strict=True):
        assert code in (0, -9), f"{role.name} exited {code}:\n{role.log()}"


@pytest.mark.timeout(600)
async def test_one_receiver_three_workers_answer_every_message_once_in_order(
        tmp_path, redis_server, redis, fake_llm, fake_telegram) -> None:
    chats, per_chat = 50, 20
    fake_llm.responder = respond
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=SHARDS, lease_ttl_s=5.0,
                            context={"max_turns": 3})
    workers = await start_workers(config, 3)
    receiver = await Role.start(config, "receiver", "receiver")
    roles = [*workers, receiver]
    watch = LockWatch(tmp_path / "cluster", redis, Keys("membridge"))
    stop_watch = asyncio.Event()
    watcher = asyncio.create_task(watch.run(stop_watch))
    try:
        await wait_all(roles, lambda: fair(workers), "3 workers sharing 8 shards", timeout=120)
        await receiver.wait_line("holds the poller lease")
        await push_all(fake_telegram, chats, per_chat)
        await wait_all(roles, lambda: len(fake_telegram.sent) >= chats * per_chat, "every answer", timeout=500)
    finally:
        stop_watch.set()
        await watcher
        await stop_all(roles)
    assert_answered_once_in_order(fake_telegram, chats, per_chat)
    assert watch.checked > 0 and watch.mismatches == []
    lines = daily_lines(tmp_path / "cluster")
    assert lines and len(lines) == len(set(lines))


@pytest.mark.timeout(600)
async def test_a_worker_killed_mid_turn_loses_nothing_answers_once_and_its_shards_move(
        tmp_path, redis_server, redis, fake_llm, fake_telegram) -> None:
    chats, ttl = 12, 2.0
    victim_chat, victim_text = 3, "c3-m2"
    fake_llm.responder = respond
    caught = fake_llm.hold_first(lambda body: body["messages"][-1].get("content") == victim_text)
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=SHARDS, lease_ttl_s=ttl,
                            context={"max_turns": 2})
    workers = await start_workers(config, 3)
    receiver = await Role.start(config, "receiver", "receiver")
    roles = [*workers, receiver]
    loop = asyncio.get_running_loop()
    try:
        await wait_all(roles, lambda: fair(workers), "3 workers sharing 8 shards", timeout=120)
        await receiver.wait_line("holds the poller lease")
        await push_all(fake_telegram, chats, 2)  # m0, m1 everywhere, answered before the kill
        await wait_all(roles, lambda: len(fake_telegram.sent) >= chats * 2, "the first answers", timeout=300)
        fake_telegram.push_text(chat_id(victim_chat), chat_id(victim_chat), victim_text)
        await asyncio.wait_for(caught.wait(), 120)  # the victim's turn is waiting on the LLM
        shard = shard_of_chat(victim_chat)
        holder = await redis.get(Keys("membridge").lease(shard))
        victim = next(worker for worker in workers if worker.worker_id == holder)
        victim.kill()
        killed_at = loop.time()
        survivors = [worker for worker in workers if worker is not victim]
        moved_after = await lease_moved(redis, shard, holder, loop.time() + HANG_GUARD_S) - killed_at
        await wait_all(survivors, lambda: any(shard in worker.shards for worker in survivors), "the shard opening")
        for turn in range(3, 6):  # later messages of every chat, the victim's included
            for chat in range(chats):
                fake_telegram.push_text(chat_id(chat), chat_id(chat), f"c{chat}-m{turn}")
        for chat in range(chats):
            if chat != victim_chat:
                fake_telegram.push_text(chat_id(chat), chat_id(chat), f"c{chat}-m2")
        expected = chats * 6
        await wait_all(roles, lambda: len(fake_telegram.sent) >= expected, "every answer", timeout=300)
        restarted = await Role.start(config, "worker", "worker-restarted")
        roles.append(restarted)
        await wait_all(roles, lambda: fair([*survivors, restarted]), "the restarted worker taking its share")
    finally:
        await stop_all(roles)
    # The lease expires at most lease_ttl_s after the victim's last renewal, and a survivor looks
    # every third of it: claimed within 4/3 of the TTL, with room for a busy machine's scheduling.
    assert moved_after <= 2 * ttl, f"shard {shard} moved {moved_after:.1f}s after the kill"
    answers = answers_by_chat(fake_telegram)
    assert answers[chat_id(victim_chat)] == [f"re: c{victim_chat}-m{turn}" for turn in range(6)]
    for chat in range(chats):
        if chat != victim_chat:  # m2 came after m3-m5 here: each chat in the order it was sent
            order = [0, 1, 3, 4, 5, 2]
            assert answers[chat_id(chat)] == [f"re: c{chat}-m{turn}" for turn in order], f"chat {chat}"
    assert len(fake_telegram.sent) == chats * 6
    asked = [body for body in fake_llm.requests if body["messages"][-1].get("content") == victim_text]
    assert len(asked) == 2  # the killed turn, then once more by the shard's new holder
    lines = daily_lines(tmp_path / "cluster")
    assert lines and len(lines) == len(set(lines))


@pytest.mark.timeout(300)
async def test_redis_restart_receivers_retry_and_nothing_is_lost(
        tmp_path, redis_server, fake_llm, fake_telegram) -> None:
    """Redis goes away with a turn in flight and messages arriving: the turn's reply still goes out and
    its XACK waits for Redis; the receiver holds the new messages; all answered once, in order."""
    chats = 5
    fake_llm.responder = respond
    release = asyncio.Event()
    in_flight = fake_llm.hold_first(lambda body: body["messages"][-1].get("content") == "c0-m2", release)
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=4, lease_ttl_s=2.0)
    worker = await Role.start(config, "worker", "worker")
    receiver = await Role.start(config, "receiver", "receiver")
    roles = [worker, receiver]
    try:
        await worker.wait_for(lambda: len(worker.shards) == 4, "all 4 shards", timeout=120)
        await receiver.wait_line("holds the poller lease")
        await push_all(fake_telegram, chats, 2)
        await wait_all(roles, lambda: len(fake_telegram.sent) >= chats * 2, "the first answers", timeout=120)
        fake_telegram.push_text(chat_id(0), chat_id(0), "c0-m2")
        await asyncio.wait_for(in_flight.wait(), HANG_GUARD_S)  # the worker waits on the LLM for c0-m2
        await redis_server.stop()
        release.set()
        await wait_all(roles, lambda: len(fake_telegram.sent) > chats * 2, "the reply of the turn in flight")
        await worker.wait_line("acknowledging")  # its XACK is retried while Redis is away
        for turn in (2, 3):
            for chat in range(chats):
                if (chat, turn) != (0, 2):
                    fake_telegram.push_text(chat_id(chat), chat_id(chat), f"c{chat}-m{turn}")
        await receiver.wait_line("Redis unavailable")
        await redis_server.start()
        await wait_all(roles, lambda: len(fake_telegram.sent) >= chats * 4, "the answers after the restart",
                       timeout=120)
        await receiver.wait_line("Redis is back")
    finally:
        await stop_all(roles)
    assert any("waits for it; retrying in" in line for line in receiver.lines)
    assert_answered_once_in_order(fake_telegram, chats, 4)
