"""Cluster benchmark (issue 19): turns per second with 1, 2 and 3 shard workers, and the latency a
turn gains by going through Redis instead of staying in one process.

    .venv/bin/python bench/bench_cluster.py            # 600 chats x 2 messages per worker count
    .venv/bin/python bench/bench_cluster.py --quick    # 120 chats x 2 messages

Every role is a real process (``python -m bridge run --role ...``) against a real redis-server on
127.0.0.1, the fake Telegram Bot API and the fake OpenAI server of ``tests/fakes``. The fake LLM
takes 200 ms per answer and each worker answers at most 4 chats at once
(``bridge.max_concurrent_chats: 4``), so one worker is saturated at about 20 turns/s and more
workers can only go faster by sharing the chats. 12 shards spread evenly over 1, 2 or 3 workers.

Throughput: every message is queued at Telegram at once, the clock runs from the first push to the
last answer. A worker answers the chats of its shards only, so the run lasts as long as the busiest
worker needs: with few chats, the hash gives one worker many more than another (120 chats over 12
shards hold 4 to 16 chats each; one worker of three may get 16+15+14+14 = 59 while the other two share
61), which alone caps 3 workers at 2.0x one in that split and at 2.5x in the median split of the
shards. With 600 chats the median cap is 2.8x. Hence many chats with a few messages each, and the chats each
worker held are printed with the figures (``busiest``: its chats over the mean). The CPU the workers
spend per turn (all threads, from /proc) is printed too: on a shared machine it is the cost that
decides how far more workers go.

Latency: 30 messages sent one after another (each waits for its answer) to a single process
(``membridge run``) and to a receiver with one worker; the p50 difference is what the cluster adds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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

from bridge.cluster.keys import shard_of

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


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chats_held(workers: list[Role], chats: int) -> list[int]:
    """How many of the benchmark's chats (scope ``telegram-<user>``) each worker's shards hold."""
    shards = [shard_of(f"telegram-{7000 + chat}", SHARDS) for chat in range(chats)]
    return [sum(1 for shard in shards if shard in worker.shards) for worker in workers]


async def throughput(folder: Path, workers: int, chats: int, per_chat: int) -> tuple[float, list[int], float]:
    """(turns/s, chats each worker held, worker CPU ms per turn)."""
    async def body(telegram: FakeTelegram, roles: list[Role]) -> tuple[float, list[int], float]:
        started = roles[:workers]
        cpu_before = sum(cpu_seconds(role.process.pid) for role in started)
        start = time.perf_counter()
        for turn in range(per_chat):
            for chat in range(chats):
                telegram.push_text(7000 + chat, 7000 + chat, f"c{chat}-m{turn}")
        await wait_all(roles, lambda: len(telegram.sent) >= chats * per_chat, "every answer", timeout=1800)
        turns = chats * per_chat
        rate = turns / (time.perf_counter() - start)
        cpu_ms = (sum(cpu_seconds(role.process.pid) for role in started) - cpu_before) * 1000 / turns
        return rate, chats_held(started, chats), cpu_ms

    result: tuple[float, list[int], float] = await _cluster(folder, workers, body)
    return result


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
    chats, per_chat = (120, 2) if quick else (600, 2)
    print(f"machine: {machine_info()}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rates = {}
    for workers in (1, 2, 3):
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as folder:
            rates[workers], held, cpu_ms = await throughput(Path(folder), workers, chats, per_chat)
        print(f"{workers} worker(s): {rates[workers]:.1f} turns/s ({chats} chats x {per_chat} messages; chats per "
              f"worker {'/'.join(map(str, held))}, busiest {max(held) * workers / chats:.2f}x the mean; "
              f"worker CPU {cpu_ms:.1f} ms/turn; load average {os.getloadavg()[0]:.1f})")
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
