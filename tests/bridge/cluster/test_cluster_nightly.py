"""Each shard's nightly pass runs once a day, on whichever worker holds it, and status shows it."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.cluster import ROOT, Role, cluster_config

pytestmark = pytest.mark.slow
NIGHT_LINE = "embedding cache:"  # the nightly pass's last step says what it collected


async def status_json(config: Path) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config), "cluster", "status", "--json", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return dict(json.loads(out))


async def nights_shown(config: Path, day: str, timeout: float = 60) -> list[str | None]:
    """Ask ``cluster status`` until every shard shows ``day`` (a worker mirrors it every lease tick)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        nights = [shard["last_nightly"] for shard in (await status_json(config))["shards"]]
        if all(night == day for night in nights) or asyncio.get_running_loop().time() > deadline:
            return nights
        await asyncio.sleep(0.2)  # between two polls of a condition, not a wait for time to pass


@pytest.mark.timeout(300)
async def test_a_shards_night_runs_once_a_day_whoever_holds_it(tmp_path, redis_server, fake_llm,
                                                               fake_telegram) -> None:
    config = cluster_config(tmp_path, redis_url=redis_server.url, llm_url=fake_llm.base_url,
                            telegram_url=fake_telegram.base_url, shards=2, lease_ttl_s=1.5,
                            memory={"dream": {"enabled": False, "time": "00:00", "jitter_minutes": 0}})
    today, tomorrow = date.today(), date.today() + timedelta(days=1)
    first = await Role.start(config, "worker", "first")
    try:
        await first.wait_for(lambda: sum(NIGHT_LINE in line for line in first.lines) == 2, "two nightly passes")
        assert await nights_shown(config, today.isoformat()) == [today.isoformat()] * 2
    finally:
        assert await first.stop() == 0, first.log()
    second = await Role.start(config, "worker", "second")
    try:
        for shard in (0, 1):  # the day is read from the shard: tonight's pass is already done
            await second.wait_line(f"shard {shard}: nightly pass next at {tomorrow:%Y-%m-%d} 00:00")
    finally:
        assert await second.stop() == 0, second.log()
    assert not any(NIGHT_LINE in line for line in second.lines), second.log()
    assert sum(NIGHT_LINE in line for line in first.lines) == 2
