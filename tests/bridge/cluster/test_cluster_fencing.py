"""Fencing: a worker whose grant of a shard is stale writes nothing to the shard and sends nothing."""

from __future__ import annotations

import pytest
from support.bot import dm, make_services
from support.channel import RecordingChannel

from bridge.cluster.fencing import LOCAL_SHARE, FenceBehind, Fenced, FencedChannel, ShardFence
from bridge.ledger import TurnState
from channels import Reply
from memory import Turn


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def daily_bytes(workspace, scope: str) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(workspace.rglob("memory/*.md")) if scope in str(path))


async def test_an_older_holder_cannot_write_the_shard_once_a_newer_one_opened_it(tmp_path, fake_llm) -> None:
    shard = tmp_path / "shards" / "0"
    old, new = make_services(shard, fake_llm.base_url), make_services(shard, fake_llm.base_url)
    old_fence, new_fence = ShardFence(0, 7, 15.0, 0.0, clock=Clock()), ShardFence(0, 8, 15.0, 0.0, clock=Clock())
    old_fence.deadline = new_fence.deadline = float("inf")  # only the tokens are under test here
    old_fence.install(old.memory.db, old.memory.lock, "host:1:old")
    old.conversations.ensure_session("s", "telegram-42", "telegram")
    old.conversations.append_messages("s", [Turn("user", "before the move")])
    old.memory.append_daily("telegram-42", "- written before the move\n")
    new_fence.install(new.memory.db, new.memory.lock, "host:2:new")
    files_before = daily_bytes(shard, "telegram-42")

    with pytest.raises(Fenced, match=r"newer holder \(fencing token 8, ours 7\)"):
        old.conversations.append_messages("s", [Turn("assistant", "the stale answer")])
    with pytest.raises(Fenced, match="newer holder"):
        old.memory.append_daily("telegram-42", "- the stale note\n")
    with pytest.raises(Fenced):
        old_fence.check()

    assert [t.text for t in new.conversations.load_messages("s", 10)] == ["before the move"]
    assert daily_bytes(shard, "telegram-42") == files_before
    new.conversations.append_messages("s", [Turn("assistant", "the new holder's answer")])
    new.memory.append_daily("telegram-42", "- the new holder's note\n")
    assert b"the new holder's note" in daily_bytes(shard, "telegram-42")
    await old.aclose()
    await new.aclose()


async def test_a_worker_stops_writing_by_its_own_clock_before_the_lease_can_expire(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "shard", fake_llm.base_url)
    clock = Clock()
    ttl = 15.0
    fence = ShardFence(3, 1, ttl, granted_at=clock.now, clock=clock)
    fence.install(services.memory.db, services.memory.lock, "host:1:a")
    services.conversations.ensure_session("s", "telegram-42", "telegram")
    clock.now += ttl / 3
    fence.renewed(sent_at=clock.now)  # a renewal sent now succeeded: good until LOCAL_SHARE of the TTL from now
    clock.now += ttl * LOCAL_SHARE - 0.01
    services.conversations.append_messages("s", [Turn("user", "still ours")])
    clock.now += 0.02  # the renewals since failed (cut off): the lease in Redis lasts until ttl after the last
    assert fence.expired() and clock.now < fence.deadline - fence.valid_s + ttl
    with pytest.raises(Fenced, match="shard 3: lease not renewed in time"):
        services.conversations.append_messages("s", [Turn("assistant", "too late")])
    with pytest.raises(Fenced, match="not renewed in time"):
        services.memory.append_daily("telegram-42", "- too late\n")
    assert [t.text for t in services.conversations.load_messages("s", 10)] == ["still ours"]
    assert not list((tmp_path / "shard").rglob("memory/*.md"))
    fence.revoke()
    clock.now = 0.0
    with pytest.raises(Fenced):
        fence.check()
    await services.aclose()


async def test_a_shard_holding_a_larger_token_than_granted_is_told(tmp_path, fake_llm) -> None:
    """Redis lost its counter: the holder learns the token to go past (the worker asks Redis for one)."""
    shard = tmp_path / "shard"
    first, second = make_services(shard, fake_llm.base_url), make_services(shard, fake_llm.base_url)
    ShardFence(0, 41, 15.0, Clock()(), clock=Clock()).install(first.memory.db, first.memory.lock, "a")
    fence = ShardFence(0, 2, 15.0, Clock()(), clock=Clock())
    with pytest.raises(FenceBehind) as behind:
        fence.install(second.memory.db, second.memory.lock, "b")
    assert behind.value.stored == 41
    fence.regrant(42)
    fence.install(second.memory.db, second.memory.lock, "b")
    fence.check()
    await first.aclose()
    await second.aclose()


async def test_a_fenced_channel_sends_nothing_once_the_grant_is_stale(tmp_path) -> None:
    clock = Clock()
    inner = RecordingChannel()
    fence = ShardFence(0, 1, 3.0, clock.now, clock=clock)
    channel = FencedChannel(inner, fence)
    message = dm("hello")
    await channel.send(Reply("first"), message)
    clock.now += 3.0 * LOCAL_SHARE
    with pytest.raises(Fenced):
        await channel.send(Reply("second"), message)
    assert [reply.text for reply, _to in inner.sent] == ["first"]


async def test_a_reply_already_out_is_recorded_sent_past_the_clock_but_not_past_a_newer_holder(
        tmp_path, fake_llm) -> None:
    """The lease's clock ran out (or the lease was found lost) while a reply was going out: the reply
    is recorded sent, so the shard's next holder does not send it again; every other write is still
    refused. Once a newer holder opened the shard, even that record is refused."""
    shard = tmp_path / "shard"
    services = make_services(shard, fake_llm.base_url)
    clock = Clock()
    fence = ShardFence(2, 5, 15.0, granted_at=clock.now, clock=clock)
    fence.install(services.memory.db, services.memory.lock, "host:1:a")
    services.conversations.ensure_session("s", "telegram-42", "telegram")
    clock.now += 15.0  # past this worker's own deadline
    with pytest.raises(Fenced, match="not renewed in time"):
        services.conversations.append_messages("s", [Turn("user", "too late")])
    services.ledger.mark_sent("telegram::42:1")
    fence.revoke()  # the next renewal said the lease is gone
    services.ledger.mark_sent("telegram::42:2")
    assert [services.ledger.get(f"telegram::42:{n}").state for n in (1, 2)] == [TurnState.SENT, TurnState.SENT]

    newer = make_services(shard, fake_llm.base_url)
    ShardFence(2, 6, 15.0, granted_at=0.0, clock=Clock()).install(newer.memory.db, newer.memory.lock, "host:2:b")
    with pytest.raises(Fenced, match=r"newer holder \(fencing token 6, ours 5\)"):
        services.ledger.mark_sent("telegram::42:3")
    assert newer.ledger.get("telegram::42:3") is None
    await services.aclose()
    await newer.aclose()
