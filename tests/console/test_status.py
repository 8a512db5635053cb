"""GET /api/status: the status page's figures, read back from index.db (the usage book, the jobs
table, the nightly meta), exactly, and behind the console's tokens."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from support.bot import make_services

from bridge.console import create_app
from bridge.console.status import status_view
from bridge.ops.usage import TurnRecord
from bridge.wiring.app import NIGHTLY_RUN_KEY, NIGHTLY_SUCCESS_KEY, Services

NOW = datetime(2026, 12, 7, 10, 30, tzinfo=UTC).timestamp()


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console={"token": "read-tok"})
    yield services
    services.close()


def _turn(services: Services, hours_ago: float, scope: str, outcome: str, tokens: tuple[int, int] = (0, 0),
          ms: tuple[float, ...] = ()) -> None:
    at = datetime.fromtimestamp(NOW - hours_ago * 3600)
    services.usage.record(TurnRecord(at, scope, "telegram", outcome, *tokens, request_ms=ms))


def test_status_counts_the_last_24_hours_by_outcome_and_by_hour(services: Services) -> None:
    _turn(services, 0.1, "telegram-1", "answered", (100, 10), (200.0, 400.0))
    _turn(services, 0.2, "telegram-1", "failed", ms=(30_000.0,))
    _turn(services, 2.5, "telegram-2", "answered", (50, 5), (100.0,))
    _turn(services, 3.0, "telegram-2", "refused")
    _turn(services, 3.0, "telegram-2", "deduplicated")
    _turn(services, 30, "telegram-3", "answered", (999, 9), (5.0,))  # yesterday: outside every figure
    services.usage.record(TurnRecord(datetime.fromtimestamp(NOW - 360), "telegram-2", "", "answered", 70, 7,
                                     request_ms=(900.0,), kind="flush"))  # upkeep: a model request, not a turn
    status = status_view(services, now=NOW)
    assert status["turns_24h"] == {"answered": 2, "refused": 1, "failed": 1, "deduplicated": 1}
    hours = status["turns_by_hour"]
    assert len(hours) == 24
    assert hours[0]["hour"] == "2026-12-06T11:00:00+00:00" and hours[-1]["hour"] == "2026-12-07T10:00:00+00:00"
    assert hours[-1] == {"hour": "2026-12-07T10:00:00+00:00", "answered": 1, "failed": 1}
    assert hours[-3] == {"hour": "2026-12-07T08:00:00+00:00", "answered": 1, "failed": 0}
    assert sum(hour["answered"] for hour in hours) == 2
    assert status["model_latency_ms"] == {"p50": 400.0, "p95": 30000.0, "count": 5}
    assert status["flush_backlog"] == {"pending": 0, "oldest_pending_age_s": None}


def test_status_top_usage_flush_backlog_and_nightly(services: Services) -> None:
    now = time.time()
    today = datetime.now()
    for n in range(12):
        services.usage.record(TurnRecord(today, f"telegram-{n}", "telegram", "answered", 10 * n, n))
    services.usage.record(TurnRecord(today, "telegram-2", "", "answered", 500, 50, kind="dream"))
    assert services.conversations.job_backlog() == ({}, None)
    with services.memory.db.transaction() as conn:  # a flush job the worker has not run yet
        conn.execute("INSERT INTO jobs (kind, session_id, scope, seq_from, seq_to, reason, day, created_at)"
                     " VALUES ('flush', 'telegram-1|c', 'telegram-1', 1, 2, 'trim', '2026-12-07', ?)", (now - 90,))
    services.memory.set_meta(NIGHTLY_SUCCESS_KEY, "2026-12-07T00:01:02+01:00")
    services.memory.set_meta(NIGHTLY_RUN_KEY, today.date().isoformat())
    status = status_view(services, now=now)
    assert [row["scope"] for row in status["top_usage"]] == ["telegram-2"] + [f"telegram-{n}" for n in range(11, 2, -1)]
    assert status["top_usage"][:2] == [
        {"scope": "telegram-2", "prompt_tokens": 520, "completion_tokens": 52, "turns": 1, "upkeep_tokens": 550},
        {"scope": "telegram-11", "prompt_tokens": 110, "completion_tokens": 11, "turns": 1, "upkeep_tokens": 0}]
    assert status["flush_backlog"]["pending"] == 1
    assert 90 <= status["flush_backlog"]["oldest_pending_age_s"] < 100
    assert status["nightly"]["last_success"] == "2026-12-07T00:01:02+01:00"
    next_run = datetime.fromisoformat(status["nightly"]["next_run"])
    assert next_run.tzinfo is not None and next_run.date() == today.date() + timedelta(days=1)


@pytest.fixture
async def client(services: Services) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(create_app(services))) as test_client:
        yield test_client


async def test_the_status_endpoint_needs_a_token_and_answers_every_key(client: TestClient) -> None:
    assert (await client.get("/api/status")).status == 401
    response = await client.get("/api/status", headers={"Authorization": "Bearer read-tok"})
    assert response.status == 200
    body = await response.json()
    assert list(body) == ["turns_24h", "turns_by_hour", "model_latency_ms", "flush_backlog", "nightly", "top_usage",
                          "warnings"]
    assert body["turns_24h"] == {"answered": 0, "refused": 0, "failed": 0, "deduplicated": 0}
    assert body["model_latency_ms"] == {"p50": None, "p95": None, "count": 0}
    assert body["nightly"]["last_success"] is None and body["top_usage"] == [] and body["warnings"] == []
