"""Cluster benchmark (issue 19): turns per second with 1, 2 and 3 shard workers, and the latency a
turn gains by going through Redis instead of staying in one process.

    .venv/bin/python bench/bench_cluster.py            # 120 chats x 5 messages per worker count
    .venv/bin/python bench/bench_cluster.py --quick    # 48 chats x 5 messages

Every role is a real process (``python -m bridge run --role ...``) against a real redis-server on
127.0.0.1, the fake Telegram Bot API and the fake OpenAI server of ``tests/fakes``. The fake LLM
takes 200 ms per answer and each worker answers at most 4 chats at once
(``bridge.max_concurrent_chats: 4``), so one worker is saturated at about 20 turns/s and more
workers can only go faster by sharing the chats. 12 shards spread evenly over 1, 2 or 3 workers.

Throughput: every message is queued at Telegram at once, the clock runs from the first push to the
last answer. Latency: 30 messages sent one after another (each waits for its answer) to a single
process (``membridge run``) and to a receiver with one worker; the p50 difference is what the
cluster adds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from common import machine_info
from fakes.openai_server import FakeOpenAI
from fakes.telegram_server import FakeTelegram
from support.cluster import Role, cluster_config, wait_all
from support.redis_server import RedisServer

SHARDS = 12
LLM_LATENCY_S = 0.2
LATENCY_TURNS = 30


def respond(body: dict[str, Any]) -> str:
    return "re: " + [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def fair(workers: list[Role]) -> bool:
    held = [worker.shards for worker in workers]
    return sum(map(len, held)) == SHARDS and max(map(len, held)) - min(map(len, held)) <= 1


async def _deployment(folder: Path, redis: RedisServer, llm: FakeOpenAI, telegram: FakeTelegram) -> Path:
    return cluster_config(folder, redis_url=redis.url, llm_url=llm.base_url, telegram_url=telegram.base_url,
                          shards=SHARDS, lease_ttl_s=5.0, bridge={"max_concurrent_chats": 4},
                          logging={"level": "warning"})


async def _cluster(folder: Path, workers: int, body: Any) -> Any:
    """Redis, the fakes, one receiver and ``workers`` workers, ready; then ``body(telegram, roles)``."""
    redis = RedisServer(folder / "redis")
    await redis.start()
    try:
        async with FakeOpenAI() as llm, FakeTelegram() as telegram:
            llm.responder, llm.latency_s = respond, LLM_LATENCY_S
            config = await _deployment(folder, redis, llm, telegram)
            started = [await Role.start(config, "worker", f"worker{i}") for i in range(workers)]
            receiver = await Role.start(config, "receiver", "receiver")
            roles = [*started, receiver]
            try:
                await wait_all(roles, lambda: fair(started), "the shards spread", timeout=300)
                await receiver.wait_line("holds the poller lease", timeout=300)
                return await body(telegram, roles)
            finally:
                for role in roles:
                    await role.stop()
    finally:
        await redis.stop()


async def throughput(folder: Path, workers: int, chats: int, per_chat: int) -> float:
    async def body(telegram: FakeTelegram, roles: list[Role]) -> float:
        start = time.perf_counter()
        for turn in range(per_chat):
            for chat in range(chats):
                telegram.push_text(7000 + chat, 7000 + chat, f"c{chat}-m{turn}")
        await wait_all(roles, lambda: len(telegram.sent) >= chats * per_chat, "every answer", timeout=1200)
        return chats * per_chat / (time.perf_counter() - start)

    return await _cluster(folder, workers, body)


async def _one_by_one(telegram: FakeTelegram, roles: list[Role]) -> list[float]:
    times = []
    for turn in range(LATENCY_TURNS):
        start = time.perf_counter()
        telegram.push_text(9000, 9000, f"latency-{turn}")
        await wait_all(roles, lambda turn=turn: len(telegram.sent) > turn, "the answer", timeout=120)
        times.append(time.perf_counter() - start)
    return times[3:]  # the first turns open the shard's workspace


async def cluster_latency(folder: Path) -> list[float]:
    return await _cluster(folder, 1, _one_by_one)


async def single_latency(folder: Path) -> list[float]:
    async with FakeOpenAI() as llm, FakeTelegram() as telegram:
        llm.responder, llm.latency_s = respond, LLM_LATENCY_S
        config = cluster_config(folder, redis_url="", llm_url=llm.base_url, telegram_url=telegram.base_url,
                                logging={"level": "info"})
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", "--config", str(config), "run", cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        bot = Role("single", process)
        try:
            await bot.wait_line("running:", timeout=300)
            return await _one_by_one(telegram, [bot])
        finally:
            await bot.stop()


async def main(quick: bool) -> None:
    chats, per_chat = (48, 5) if quick else (120, 5)
    print(f"machine: {machine_info()}")
    rates = {}
    for workers in (1, 2, 3):
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as folder:
            rates[workers] = await throughput(Path(folder), workers, chats, per_chat)
        print(f"{workers} worker(s): {rates[workers]:.1f} turns/s ({chats} chats x {per_chat} messages)")
    print(f"3 workers / 1 worker: {rates[3] / rates[1]:.2f}x (target >= 2.5x)")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as folder:
        single = await single_latency(Path(folder))
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as folder:
        cluster = await cluster_latency(Path(folder))
    p50_single, p50_cluster = statistics.median(single), statistics.median(cluster)
    print(f"turn latency p50: single process {p50_single * 1000:.1f} ms, receiver + 1 worker "
          f"{p50_cluster * 1000:.1f} ms; added {(p50_cluster - p50_single) * 1000:.1f} ms (target <= 10 ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer chats")
    asyncio.run(main(parser.parse_args().quick))
