"""A worker cut off from Redis (real redis-server behind a TCP proxy the test cuts) while it answers."""

from __future__ import annotations

import asyncio
import itertools
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import HANG_GUARD_S
from redis.asyncio import Redis
from support.bot import dm
from support.cluster import Role, cluster_config, wait_all
from support.tcp_proxy import TcpProxy

from bridge.cluster.keys import FIELD, GROUP, Keys, encode_message, shard_of
from bridge.scopes import scope_for
from channels import IncomingMessage

pytestmark = pytest.mark.slow
SHARDS = 2
TTL = 2.0


def echo(body: dict) -> str:
    return "re: " + [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def chat_in(shard: int) -> int:
    """A private Telegram chat whose scope lives in ``shard``."""
    for chat in range(7000, 8000):
        message = IncomingMessage(channel="telegram", chat_id=str(chat), chat_type="direct", user_id=str(chat),
                                  user_name="u", text="", message_id="1")
        if shard_of(scope_for(message), SHARDS) == shard:
            return chat
    raise AssertionError(f"no chat in shard {shard}")


def configs(tmp_path: Path, redis_url: str, proxy: TcpProxy, llm_url: str, telegram_url: str,
            ttl: float) -> tuple[Path, Path]:
    """The deployment's config, and the same reaching Redis through ``proxy`` (for the role cut off)."""
    common = {"llm_url": llm_url, "telegram_url": telegram_url, "shards": SHARDS, "lease_ttl_s": ttl}
    return (cluster_config(tmp_path, redis_url=redis_url, **common),
            cluster_config(tmp_path, redis_url=proxy.url(), name="through-proxy.yaml", **common))


def stored_texts(root: Path, shard: int) -> list[str]:
    with sqlite3.connect(root / "shards" / str(shard) / "index.db") as db:
        return [row[0] for row in db.execute("SELECT body FROM messages ORDER BY session_id, seq")]


class MidTurn:
    """Worker A (``a_config``) holds one of the two shards, worker B (``config``) the other; A has
    answered m0 of a chat of its shard and now waits on the LLM for m1, whose answer comes when
    ``release`` is set. ``sent()``: the chat's answers so far."""

    def __init__(self, fake_llm: Any, fake_telegram: Any) -> None:
        self.fake_llm, self.fake_telegram = fake_llm, fake_telegram
        self.release = asyncio.Event()
        self.roles: list[Role] = []

    def sent(self) -> list[str]:
        return [m["visible"] for m in self.fake_telegram.sent]

    async def start(self, a_config: Path, config: Path) -> None:
        self.a = await Role.start(a_config, "worker", "worker-a")
        self.roles.append(self.a)
        await self.a.wait_for(lambda: self.a.shards == {0, 1}, "both shards", timeout=120)
        receiver = await Role.start(config, "receiver", "receiver")
        self.b = await Role.start(config, "worker", "worker-b")
        self.roles += [receiver, self.b]
        await wait_all(self.roles, lambda: len(self.a.shards) == 1 and len(self.b.shards) == 1, "one shard each",
                       timeout=120)
        await receiver.wait_line("holds the poller lease")
        [self.shard] = self.a.shards
        self.chat = chat_in(self.shard)
        self.fake_telegram.push_text(self.chat, self.chat, "m0")
        await self.fake_telegram.wait_sent(1)
        held = self.fake_llm.hold_first(lambda body: body["messages"][-1].get("content") == "m1", self.release)
        self.fake_telegram.push_text(self.chat, self.chat, "m1")
        await asyncio.wait_for(held.wait(), HANG_GUARD_S)

    async def shard_moved(self) -> None:
        await self.b.wait_for(lambda: self.b.shards == {0, 1}, "A's shard", timeout=HANG_GUARD_S)

    async def finish(self, a_gave_up: Callable[[], bool]) -> None:
        """Until A gave its shard up (or m1 was answered twice), then m2 answered."""
        await wait_all(self.roles, lambda: self.sent().count("re: m1") >= 2 or ("re: m1" in self.sent() and a_gave_up()),
                       "m1 answered by B and A's shard given up (or m1 answered twice)")
        self.fake_telegram.push_text(self.chat, self.chat, "m2")
        await wait_all(self.roles, lambda: "re: m2" in self.sent(), "m2 answered")

    async def stop(self) -> None:
        for role in self.roles:
            await role.stop()

    def check(self, root: Path) -> None:
        """Each message answered once, and A's late answer stored nowhere."""
        assert self.sent() == ["re: m0", "re: m1", "re: m2"]
        assert stored_texts(root, self.shard) == ["m0", "re: m0", "m1", "re: m1", "m2", "re: m2"]


@pytest.mark.timeout(300)
async def test_a_worker_cut_off_mid_turn_neither_sends_nor_writes_once_its_shard_moved(
        tmp_path, redis_server, fake_llm, fake_telegram) -> None:
    fake_llm.responder = echo
    scene = MidTurn(fake_llm, fake_telegram)
    async with TcpProxy(redis_server.port) as proxy:
        direct, cut_off = configs(tmp_path, redis_server.url, proxy, fake_llm.base_url, fake_telegram.base_url, TTL)
        try:
            await scene.start(cut_off, direct)
            proxy.cut()
            await scene.shard_moved()
            scene.release.set()  # A's turn gets its answer only now, after the shard moved
            await scene.finish(lambda: any("stopping work on it" in line for line in scene.a.lines))
            proxy.heal()
        finally:
            await scene.stop()
    scene.check(tmp_path / "cluster")
    assert any("lease not renewed" in line for line in scene.a.lines), scene.a.log()


@pytest.mark.timeout(300)
async def test_a_polling_receiver_cut_off_from_redis_stops_polling_before_another_takes_over(
        tmp_path, redis_server, fake_llm, fake_telegram) -> None:
    fake_llm.responder = echo
    ttl = 3.0
    async with TcpProxy(redis_server.port) as proxy:
        direct, cut_off = configs(tmp_path, redis_server.url, proxy, fake_llm.base_url, fake_telegram.base_url, ttl)
        worker = await Role.start(direct, "worker", "worker")
        first = await Role.start(cut_off, "receiver", "receiver-a")
        roles = [worker, first]
        try:
            await first.wait_line("holds the poller lease", timeout=120)
            second = await Role.start(direct, "receiver", "receiver-b")
            roles.append(second)
            await second.wait_line("receiver running", timeout=120)
            fake_telegram.push_text(5, 5, "m0")
            await fake_telegram.wait_sent(1)
            proxy.cut()
            await first.wait_line("stops polling before another can take the lease")
            taken_early = any("holds the poller lease" in line for line in second.lines)
            await second.wait_line("holds the poller lease")
            fake_telegram.push_text(5, 5, "m1")
            await fake_telegram.wait_sent(2)
            proxy.heal()
            fake_telegram.push_text(5, 5, "m2")
            await fake_telegram.wait_sent(3)
        finally:
            for role in roles:
                await role.stop()
    assert not taken_early, "the second receiver polled while the first still did"
    assert [m["visible"] for m in fake_telegram.sent] == ["re: m0", "re: m1", "re: m2"]


@pytest.mark.timeout(300)
async def test_a_worker_paused_mid_turn_past_its_lease_sends_nothing_when_it_resumes(
        tmp_path, redis_server, fake_llm, fake_telegram) -> None:
    """A worker starved of CPU (here: stopped with SIGSTOP) past its lease, while its turn's answer
    waits for it: the shard moves, and once it runs again it neither sends nor stores that answer."""
    fake_llm.responder = echo
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=SHARDS, lease_ttl_s=TTL)
    scene = MidTurn(fake_llm, fake_telegram)
    try:
        await scene.start(config, config)
        scene.a.process.send_signal(signal.SIGSTOP)
        try:
            await scene.shard_moved()
            scene.release.set()  # the answer reaches A's socket while A is stopped
            await wait_all(scene.roles, lambda: "re: m1" in scene.sent(), "m1 answered by B")
        finally:
            scene.a.process.send_signal(signal.SIGCONT)
        await scene.finish(lambda: not scene.a.shards)
    finally:
        await scene.stop()
    scene.check(tmp_path / "cluster")


async def until_a_read_waits(redis: Redis) -> None:
    """Until a client waits in XREADGROUP, as Redis's own list of its clients says (asked every ms)."""
    for _ in range(int(HANG_GUARD_S * 1000)):
        if any(client["cmd"] == "xreadgroup" and "b" in client["flags"] for client in await redis.client_list()):
            return
        await asyncio.sleep(0.001)
    raise AssertionError("no client waits in XREADGROUP")


@pytest.mark.timeout(300)
async def test_an_entry_handed_to_a_read_whose_reply_was_lost_is_answered_before_later_ones(
        tmp_path, redis_server, redis: Redis, fake_llm, fake_telegram) -> None:
    """Redis hands m1 to the worker's waiting XREADGROUP, and the reply never arrives (the link is cut,
    then the connection drops, as when Redis restarts): m1 sits in the worker's pending list, unseen.
    It is answered before m2, which came after it (found by scripts/stress across a Redis restart)."""
    fake_llm.responder = echo
    stream = Keys("membridge").stream(0)
    sent = lambda: [m["visible"] for m in fake_telegram.sent]  # noqa: E731
    async with TcpProxy(redis_server.port) as proxy:
        config = cluster_config(tmp_path, redis_url=proxy.url(), llm_url=fake_llm.base_url,
                                telegram_url=fake_telegram.base_url, shards=1, lease_ttl_s=TTL)
        worker = await Role.start(config, "worker", "worker")
        try:
            await worker.wait_for(lambda: worker.shards == {0}, "the shard", timeout=120)
            for attempt in itertools.count():  # until Redis hands m1 to a read the cut leaves waiting for its reply
                await until_a_read_waits(redis)
                proxy.cut()
                m1 = f"m1 (try {attempt})"
                entry = await redis.xadd(stream, {FIELD: encode_message(dm(m1, user="7"))})
                if await redis.xpending_range(stream, GROUP, entry, entry, 1):
                    break
                proxy.heal()  # the read had just ended: m1 is read the ordinary way; try again
                await worker.wait_for(lambda m1=m1: f"re: {m1}" in sent(), "the answer to a message read normally")
            await redis.xadd(stream, {FIELD: encode_message(dm("m2", user="7"))})
            proxy.heal()
            await worker.wait_for(lambda: "re: m2" in sent() and f"re: {m1}" in sent(), "both answers")
        finally:
            await worker.stop()
    assert sent()[-2:] == [f"re: {m1}", "re: m2"]


async def until_lapsed(redis: Redis, key: str) -> None:
    """Until ``key`` (a lease) is gone from Redis (asked every ms)."""
    for _ in range(int(HANG_GUARD_S * 1000)):
        if not await redis.exists(key):
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{key} never lapsed")


@pytest.mark.timeout(300)
async def test_a_worker_paused_while_it_reads_leaves_no_read_waiting_in_redis_past_its_lease(
        tmp_path, redis_server, redis: Redis, fake_llm, fake_telegram) -> None:
    """A worker stopped (SIGSTOP: starved of CPU) while its XREADGROUP waits in Redis: by the time its
    lease lapses, that read has ended. A read still waiting then would be handed the chat's next
    message after the shard moved, and the next holder would answer the messages after it first."""
    fake_llm.responder = echo
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=1, lease_ttl_s=1.0)
    worker = await Role.start(config, "worker", "worker")
    lease = Keys("membridge").lease(0)
    try:
        await worker.wait_for(lambda: worker.shards == {0}, "the shard", timeout=120)
        await until_a_read_waits(redis)
        worker.process.send_signal(signal.SIGSTOP)
        try:
            await until_lapsed(redis, lease)
            waiting = [client for client in await redis.client_list()
                       if client["cmd"] == "xreadgroup" and "b" in client["flags"]]
        finally:
            worker.process.send_signal(signal.SIGCONT)
    finally:
        await worker.stop()
    assert waiting == [], f"a read still waits in Redis after the lease lapsed: {waiting}"
