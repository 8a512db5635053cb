"""How long Prometheus waits for a cluster worker's /metrics: 64 shards, each with its own workspace.

    .venv/bin/python bench/bench_scrape.py              # 64 shards, 200 scrapes
    .venv/bin/python bench/bench_scrape.py --shards 16

Each shard is an open ``Services`` (its own index.db, as ``run --role worker`` holds them) with
usage rows, flush jobs (some pending) and chunks; the per-shard stream gauges are set as the
worker's loop sets them. The endpoints are served as a worker serves them (bridge/ops/health.py, from
their own thread), and each scrape is one HTTP GET of /metrics, timed from the client, so the time
includes reading every shard's flush backlog and nightly meta (its chunk counts are read once a
minute). The first scrape, which reads the chunk counts, is reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path

from common import machine_info, percentile

from bridge.config import parse_config
from bridge.ops import metrics
from bridge.ops.health import start_health
from bridge.ops.usage import TurnRecord
from bridge.wiring.app import Services


def open_shard(root: Path, number: int, port: int) -> Services:
    services = Services(parse_config({"workspace": str(root / f"shard-{number}"), "embedding": {"provider": "none"},
                                      "metrics": {"port": port}}))
    for day in range(3):
        services.memory.append_daily(f"telegram-{number}", f"- note {day} of shard {number}")
    services.memory.indexer.sync()
    now = datetime.now()
    for turn in range(50):
        services.usage.record(TurnRecord(now, f"telegram-{number}-{turn % 5}", "telegram", "answered", 500, 50,
                                         request_ms=(300.0,)))
    services.conversations.job_counts()  # creates the jobs table
    with services.memory.db.transaction() as conn:
        conn.executemany("INSERT INTO jobs (kind, session_id, scope, seq_from, seq_to, reason, day, status, created_at)"
                         " VALUES ('flush', 's', 'telegram-1', 1, 2, 'trim', '2026-12-07', ?, ?)",
                         [("pending" if n % 10 == 0 else "done", time.time() - n) for n in range(40)])
    metrics.STREAM_LENGTH.labels(str(number)).set(1000)
    metrics.STREAM_PENDING.labels(str(number)).set(2)
    metrics.STREAM_LAG.labels(str(number)).set(0)
    return services


def scrape(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as response:
        response.read()
    return (time.perf_counter() - started) * 1000


async def main_async(args: argparse.Namespace) -> None:
    print(f"machine: {machine_info()}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="membridge-scrape-"))
    port = args.port
    shards = [open_shard(root, n, port) for n in range(args.shards)]
    stop = start_health(shards[0].config.metrics, lambda: [], lambda: shards)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        first = await asyncio.to_thread(scrape, url)
        samples = sorted([await asyncio.to_thread(scrape, url) for _ in range(args.scrapes)])
        size = len(await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read()))
    finally:
        stop()
        for services in shards:
            services.close()
        shutil.rmtree(root, ignore_errors=True)
    print(f"{args.shards} shards, {args.scrapes} scrapes of {size:,} bytes: first {first:.1f} ms; "
          f"median {percentile(samples, 50):.1f} ms, p95 {percentile(samples, 95):.1f} ms, max {samples[-1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--port", type=int, default=19464)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
