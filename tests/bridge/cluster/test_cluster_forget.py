"""Forget and erase in a cluster reach Redis: the shard's stream, and the files Redis keeps on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from redis.asyncio import Redis
from support.bot import dm, make_config
from support.cli import membridge
from support.cluster import Role, cluster_config, wait_all

from bridge.cluster.keys import GROUP, Keys, encode_message
from bridge.cluster.scrub import StreamForgetter, shard_of_workspace

pytestmark = pytest.mark.slow
SECRET = b"zorblaxquint"


def echo(body: dict) -> str:
    return "re: " + [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def id_order(entry_id: str) -> tuple[int, int]:
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


def holding(folder: Path, needle: bytes = SECRET) -> list[str]:
    """Every file under ``folder`` whose bytes hold ``needle`` (any case)."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*")
                  if path.is_file() and needle in path.read_bytes().lower())


@pytest.mark.timeout(300)
async def test_a_forget_in_chat_leaves_no_byte_of_the_text_in_redis_and_keeps_the_backlog(
        tmp_path, redis_server, redis: Redis, fake_llm, fake_telegram) -> None:
    fake_llm.responder = echo
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=1)
    worker = await Role.start(config, "worker", "worker")
    receiver = await Role.start(config, "receiver", "receiver")
    roles = [worker, receiver]
    sent = lambda: [m["visible"] for m in fake_telegram.sent]  # noqa: E731
    try:
        await worker.wait_for(lambda: worker.shards == {0}, "the shard", timeout=120)
        await receiver.wait_line("holds the poller lease")
        fake_telegram.push_text(11, 11, "my locker code is Zorblaxquint")
        fake_telegram.push_text(12, 12, "another person says hello")
        await wait_all(roles, lambda: len(sent()) == 2, "both answers")
        assert holding(redis_server.folder)  # the stream and the append-only file hold it now
        fake_telegram.push_text(11, 11, "/memory forget! zorblaxquint")
        await wait_all(roles, lambda: any(text.startswith("Forgotten for good") for text in sent()), "the forget")
        assert holding(redis_server.folder) == []
        stream = Keys("membridge").stream(0)
        bodies = [fields["message"] for _id, fields in await redis.xrange(stream)]
        assert not any("orblaxquint" in body.lower() for body in bodies)
        fake_telegram.push_text(12, 12, "still there?")  # the stream and its group still work
        await wait_all(roles, lambda: "re: still there?" in sent(), "an answer after the forget")
        groups = await redis.xinfo_groups(stream)
        assert [group["name"] for group in groups] == [GROUP]
    finally:
        for role in roles:
            await role.stop()
    assert holding(redis_server.folder) == []
    assert holding(tmp_path / "cluster") == []
    assert sent().count("re: my locker code is Zorblaxquint") == 1


async def test_the_stream_rebuilt_by_a_forget_keeps_every_unanswered_message_where_it_was(
        tmp_path, redis_server, redis: Redis) -> None:
    """Unread entries stay unread, pending ones stay pending with their consumer, the forgotten and the
    answered ones go; new entries get later ids. An erase takes all of the scope's."""
    config = make_config(tmp_path / "cluster" / "shards" / "0", "http://127.0.0.1:9/v1",
                         cluster={"redis_url": redis_server.url, "root": str(tmp_path / "cluster"), "shards": 1})
    assert shard_of_workspace(config) == 0
    stream = Keys("membridge").stream(0)
    await redis.xgroup_create(stream, GROUP, id="0", mkstream=True)

    async def add(user: str, text: str) -> str:
        return await redis.xadd(stream, {"message": encode_message(dm(text, user=user))})

    answered = await add("1", "answered long ago")
    await redis.xreadgroup(GROUP, "w1", {stream: ">"}, count=1)
    await redis.xack(stream, GROUP, answered)
    in_hand = await add("1", "in hand at w1")
    secret_pending = await add("1", "pending Zorblaxquint")
    await redis.xreadgroup(GROUP, "w1", {stream: ">"}, count=2)
    other_pending = await add("2", "other person's Zorblaxquint")
    await redis.xreadgroup(GROUP, "w2", {stream: ">"}, count=1)
    secret_unread = await add("1", "unread zorblaxquint")
    unread = await add("1", "unread plain")
    last = unread

    StreamForgetter(config, 0)("telegram-1", lambda text: "zorblaxquint" in text.lower())

    ids = [entry_id for entry_id, _fields in await redis.xrange(stream)]
    assert ids == [in_hand, other_pending, unread]
    assert secret_pending not in ids and secret_unread not in ids and answered not in ids
    pending = await redis.xpending_range(stream, GROUP, "-", "+", 10)
    assert [(p["message_id"], p["consumer"]) for p in pending] == [(in_hand, "w1"), (other_pending, "w2")]
    [[_stream, delivered]] = await redis.xreadgroup(GROUP, "w3", {stream: ">"})
    assert [entry_id for entry_id, _fields in delivered] == [unread]
    newer = await add("1", "after the forget")
    assert id_order(newer) > id_order(last)
    StreamForgetter(config, 0)("telegram-2", None)  # erase
    assert [entry_id for entry_id, _f in await redis.xrange(stream)] == [in_hand, unread, newer]
    assert holding(redis_server.folder) == []


@pytest.mark.timeout(300)
async def test_a_forget_that_cannot_reach_redis_stays_recorded_and_finishes_at_the_next_start(
        tmp_path, redis_server, redis: Redis) -> None:
    root = tmp_path / "cluster"
    config = tmp_path / "shard0.yaml"
    config.write_text(yaml.safe_dump({
        "workspace": str(root / "shards" / "0"), "embedding": {"provider": "none"},
        "cluster": {"redis_url": redis_server.url, "root": str(root), "shards": 1}}))
    code, _out, err = await membridge(config, "memory", "add", "my locker code is Zorblaxquint",
                                        "--scope", "telegram-1", "--create")
    assert code == 0, err
    stream = Keys("membridge").stream(0)
    await redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
    await redis.xadd(stream, {"message": encode_message(dm("my locker code is Zorblaxquint", user="1"))})
    await redis_server.stop()
    code, _out, err = await membridge(config, "memory", "forget", "zorblaxquint", "--scope", "telegram-1")
    assert code == 1 and "Redis is unreachable" in err and "the forget stays recorded" in err
    assert "Traceback" not in err
    await redis_server.start()
    assert holding(redis_server.folder)
    code, _out, err = await membridge(config, "memory", "search", "locker", "--scope", "telegram-1")
    assert code == 0, err
    assert holding(redis_server.folder) == [] and holding(root) == []
