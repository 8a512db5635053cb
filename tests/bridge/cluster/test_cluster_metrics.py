"""A worker's /metrics and /readyz over real Redis: lease moves when a worker is killed, per-shard
stream figures, and readiness that follows Redis going away and coming back."""

from __future__ import annotations

import pytest
from support.cluster import Role, cluster_config, wait_all
from support.ports import free_port
from support.scrape import delta, eventually, probe, scrape, value

pytestmark = pytest.mark.slow
SHARDS = 4


def _config(tmp_path, redis_server, fake_llm, fake_telegram, name: str, port: int):
    return cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                          telegram_url=fake_telegram.base_url, shards=SHARDS, lease_ttl_s=2.0, name=name,
                          metrics={"port": port})


@pytest.mark.timeout(300)
async def test_a_killed_workers_shards_move_and_the_survivor_counts_and_reports_them(
        tmp_path, redis_server, fake_llm, fake_telegram) -> None:
    ports = free_port(), free_port(), free_port()
    configs = [_config(tmp_path, redis_server, fake_llm, fake_telegram, f"r{n}.yaml", port) for n, port in enumerate(ports)]
    workers = [await Role.start(config, "worker", f"worker-{n}") for n, config in enumerate(configs[:2])]
    base = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        await wait_all(workers, lambda: all(len(w.shards) == SHARDS // 2 for w in workers), "two workers, two shards each")
        before = await scrape(base[1])
        held = (value(before, "membridge_cluster_lease_moves_total", change="claimed")
                - value(before, "membridge_cluster_lease_moves_total", change="released"))
        assert held == 2  # (it may have claimed more while the other was starting, and handed them back)
        survivor_shards = sorted(workers[1].shards)

        async def backlog_published() -> bool:
            samples = await scrape(base[1])
            return all(("membridge_cluster_lag", frozenset({("shard", str(n))})) in samples for n in survivor_shards)

        await eventually(backlog_published, "the survivor's shards in its /metrics")
        workers[0].kill()
        await wait_all(workers[1:], lambda: len(workers[1].shards) == SHARDS, "the survivor holding every shard")
        after = await scrape(base[1])
        assert delta(before, after, "membridge_cluster_lease_moves_total", change="claimed") == 2
        assert delta(before, after, "membridge_cluster_lease_moves_total", change="lost") == 0
        assert value(after, "membridge_cluster_pending", shard=str(survivor_shards[0])) == 0
        assert (await probe(base[1], "/readyz"))[0] == 200

        receiver = await Role.start(configs[2], "receiver", "receiver")
        workers.append(receiver)
        await receiver.wait_line("holds the poller lease")
        assert (await probe(base[2], "/readyz")) == (200, {"status": "ready", "checks": {"redis": "ok"}})
        fake_llm.reply("hello from a worker")
        fake_telegram.push_text(7001, 7001, "hi")
        await fake_telegram.wait_sent(1)

        async def answered_and_timed() -> bool:
            return delta(after, await scrape(base[1]), "membridge_turn_seconds_count", channel="telegram") == 1

        await eventually(answered_and_timed, "the worker's turn latency")
        answered = await scrape(base[1])
        assert delta(after, answered, "membridge_turns_total", channel="telegram", outcome="answered") == 1
        assert delta(after, answered, "membridge_model_requests_total", model="gpt-4o-mini", outcome="ok") == 1

        await redis_server.stop()

        async def not_ready() -> bool:
            return (await probe(base[1], "/readyz"))[0] == 503

        await eventually(not_ready, "/readyz to turn 503 with Redis gone", timeout=10)
        _status, body = await probe(base[1], "/readyz")
        assert body["checks"]["redis"].startswith(f"Redis at {redis_server.url} does not answer")
        assert all(result == "ok" for name, result in body["checks"].items() if name != "redis")
        assert await probe(base[1], "/healthz") == (200, {"status": "alive"})
        fake_llm.reply("answered after the outage")
        fake_telegram.push_text(7002, 7002, "are you there?")  # the receiver holds it while Redis is away

        async def held() -> bool:
            return value(await scrape(base[2]), "membridge_receiver_held_messages") == 1

        await eventually(held, "the receiver to hold the message")
        await redis_server.start()

        async def ready() -> bool:
            return (await probe(base[1], "/readyz"))[0] == 200

        await eventually(ready, "/readyz back to 200 with Redis back", timeout=10)
        await fake_telegram.wait_sent(2)
        assert value(await scrape(base[2]), "membridge_receiver_held_messages") == 0
    finally:
        for worker in workers:
            await worker.stop()
