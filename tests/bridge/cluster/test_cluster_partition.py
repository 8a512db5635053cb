"""A worker cut off from Redis (real redis-server behind a TCP proxy the test cuts) while it answers."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from fakes import HANG_GUARD_S
from support.cluster import Role, cluster_config, wait_all
from support.tcp_proxy import TcpProxy

from bridge.cluster.keys import shard_of
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


@pytest.mark.timeout(300)
async def test_a_worker_cut_off_mid_turn_neither_sends_nor_writes_once_its_shard_moved(
        tmp_path, redis_server, fake_llm, fake_telegram) -> None:
    fake_llm.responder = echo
    release = asyncio.Event()
    async with TcpProxy(redis_server.port) as proxy:
        direct, cut_off = configs(tmp_path, redis_server.url, proxy, fake_llm.base_url, fake_telegram.base_url, TTL)
        a = await Role.start(cut_off, "worker", "worker-a")
        roles = [a]
        try:
            await a.wait_for(lambda: a.shards == {0, 1}, "both shards", timeout=120)
            receiver = await Role.start(direct, "receiver", "receiver")
            b = await Role.start(direct, "worker", "worker-b")
            roles += [receiver, b]
            await wait_all(roles, lambda: len(a.shards) == 1 and len(b.shards) == 1, "one shard each", timeout=120)
            await receiver.wait_line("holds the poller lease")
            [shard] = a.shards
            chat = chat_in(shard)
            fake_telegram.push_text(chat, chat, "m0")
            await fake_telegram.wait_sent(1)
            held = fake_llm.hold_first(lambda body: body["messages"][-1].get("content") == "m1", release)
            fake_telegram.push_text(chat, chat, "m1")
            await asyncio.wait_for(held.wait(), HANG_GUARD_S)  # A waits on the LLM for m1
            proxy.cut()
            await b.wait_for(lambda: b.shards == {0, 1}, "the cut-off worker's shard", timeout=HANG_GUARD_S)
            release.set()  # A's turn gets its answer only now, after the shard moved
            sent = lambda: [m["visible"] for m in fake_telegram.sent]  # noqa: E731
            await wait_all(roles, lambda: sent().count("re: m1") >= 2
                           or ("re: m1" in sent() and any("stopping work on it" in line for line in a.lines)),
                           "m1 answered by B and A's shard given up (or m1 answered twice)")
            proxy.heal()
            fake_telegram.push_text(chat, chat, "m2")
            await wait_all(roles, lambda: "re: m2" in sent(), "m2 answered")
        finally:
            for role in roles:
                await role.stop()
    assert sent() == ["re: m0", "re: m1", "re: m2"]
    assert any("lease not renewed" in line for line in a.lines), a.log()
    assert stored_texts(tmp_path / "cluster", shard) == ["m0", "re: m0", "m1", "re: m1", "m2", "re: m2"]


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
