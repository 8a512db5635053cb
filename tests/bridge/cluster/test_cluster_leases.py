"""Leases against a real redis-server."""

from __future__ import annotations

from bridge.cluster.leases import Leases, holder_pid


async def test_only_the_holder_renews_or_releases(redis) -> None:
    a, b = Leases(redis, "host:1:aa", 30), Leases(redis, "host:2:bb", 30)
    assert await a.claim("lease:0")
    assert not await b.claim("lease:0")
    assert not await b.renew("lease:0")
    await b.release("lease:0")
    assert await redis.get("lease:0") == "host:1:aa"
    assert await a.renew("lease:0")
    assert 29_000 < await redis.pttl("lease:0") <= 30_000
    await a.release("lease:0")
    assert await redis.get("lease:0") is None
    assert await b.claim("lease:0")


async def test_each_grant_carries_a_larger_token_and_a_lapsed_lease_is_lost(redis) -> None:
    a, b = Leases(redis, "host:1:aa", 30), Leases(redis, "host:2:bb", 30)
    first = await a.claim("lease:1")
    assert first >= 1
    await redis.delete("lease:1")  # as if it expired: a's token may be stale now
    assert not await a.renew("lease:1")
    second = await b.claim("lease:1")
    await b.release("lease:1")
    third = await a.claim("lease:1")
    assert first < second < third
    assert await b.advance("lease:1", 100) == 0  # only the holder may move its token on
    assert await a.advance("lease:1", 100) == 101
    await a.release("lease:1")
    assert await b.claim("lease:1") == 102


def test_the_holder_names_its_process() -> None:
    assert holder_pid("vm:4242:abcdef") == 4242
    assert holder_pid("garbage") is None
