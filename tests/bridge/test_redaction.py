"""A Redis URL's password never reaches a log line or a command's output (#34.10)."""

from __future__ import annotations

from pathlib import Path

from fakes.telegram_server import FakeTelegram
from redis.asyncio import Redis
from support.cli import membridge
from support.cluster import Role, cluster_config
from support.ports import free_port
from support.redis_server import RedisServer

PASSWORD = "S3cretPassw0rd"


def test_redact_url_hides_passwords_and_keeps_where_it_points() -> None:
    from bridge.redaction import redact_url

    assert redact_url(f"redis://:{PASSWORD}@10.0.0.5:6379/0") == "redis://:***@10.0.0.5:6379/0"
    assert redact_url(f"rediss://bot:{PASSWORD}@cache.example:6380/2") == "rediss://bot:***@cache.example:6380/2"
    assert redact_url(f"redis://10.0.0.5/0?password={PASSWORD}&db=1") == "redis://10.0.0.5/0?password=***&db=1"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert redact_url(None) == ""


async def test_cluster_status_never_shows_the_password(tmp_path: Path) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"  # nothing listens: the refusal names the URL
    config = cluster_config(tmp_path, redis_url=url, llm_url="http://127.0.0.1:9/v1", telegram_url="http://127.0.0.1:9/bot")
    code, out, err = await membridge(config, "cluster", "status")
    assert code == 1 and f"cannot reach Redis at redis://:***@127.0.0.1:{url.rsplit(':', 1)[1]}" in err
    assert PASSWORD not in out + err


async def test_a_worker_start_line_never_shows_the_password(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    await server.start()
    try:
        admin = Redis.from_url(server.url)
        await admin.config_set("requirepass", PASSWORD)
        await admin.aclose()
        url = server.url.replace("redis://", f"redis://:{PASSWORD}@")
        async with FakeTelegram() as telegram:
            config = cluster_config(tmp_path, redis_url=url, llm_url="http://127.0.0.1:9/v1",
                                    telegram_url=telegram.base_url)
            worker = await Role.start(config, "worker", "worker")
            try:
                await worker.wait_line("worker running")
                await worker.wait_line(" holds shards ")
            finally:
                await worker.stop()
        assert any(f"redis://:***@127.0.0.1:{server.port}/0" in line for line in worker.lines), worker.log()
        assert not any(PASSWORD in line for line in worker.lines), worker.log()
    finally:
        await server.stop()
