"""The nightly pass collects garbage (issue 15 #12, #15): scheduled pairs past
``conversation.keep_scheduled``, MEMORY.md versions past ``memory.versions``, cached vectors no chunk
uses. Real SQLite; times are injected through the rows, never waited for."""

from __future__ import annotations

from datetime import date

import numpy as np
from support.bot import is_summary_request, make_services

from memory import Turn

NO_DREAM = {"dream": {"enabled": False}, "versions": {"keep": 2, "max_days": 365}}


def rows(services, sql: str) -> int:
    return int(services.memory.db.query(sql)[0][0])


def answer(request) -> str:
    return "- the user said hello" if is_summary_request(request) else "ok"


async def test_nightly_prunes_scheduled_pairs_versions_and_unused_vectors(tmp_path, fake_llm) -> None:
    fake_llm.responder = answer
    services = make_services(tmp_path / "ws", fake_llm.base_url, memory=NO_DREAM,
                             conversation={"max_age_days": 90, "keep_scheduled": 1})
    store = services.conversations
    for session in ("s1", "s2"):
        store.ensure_session(session, "alice")
        for i in range(3):
            store.append_messages(session, [Turn("user", f"[SCHEDULED] price check {i}"),
                                            Turn("assistant", f"price {i}")])
        store.append_messages(session, [Turn("user", "hello"), Turn("assistant", "hi")])
    for i in range(4):
        services.dreamer.memory_file.write("alice", f"- fact {i}\n".encode(), f"edit {i}")
    with services.memory.db.transaction() as conn:
        services.memory.embed_cache.store_vectors(conn, "old-model", {"h1": np.ones(4, dtype=np.float32)})
    assert rows(services, "SELECT count(*) FROM messages") == 16 and services.dreamer.memory_file.version_count() == 4

    await services.nightly(date.today(), 1)
    kept = [m.text for m in store.messages_between("s1", 1, 100)]
    assert kept == ["[SCHEDULED] price check 2", "price 2", "hello", "hi"]
    assert rows(services, "SELECT count(*) FROM messages") == 8
    assert [v.entries for v in services.dreamer.memory_file.versions("alice")] == [1, 1]
    assert services.dreamer.memory_file.read("alice") == b"- fact 3\n"
    assert rows(services, "SELECT count(*) FROM embed_cache") == 1  # first seen unused: marked only
    assert store.job_counts() == {"done": 2}

    with services.memory.db.transaction() as conn:  # as if marked 8 days ago
        conn.execute("UPDATE embed_cache_unused SET since = since - 8 * 86400")
    await services.nightly(date.today(), 1)
    assert rows(services, "SELECT count(*) FROM embed_cache") == 0
    assert rows(services, "SELECT count(*) FROM messages") == 8 and services.dreamer.memory_file.version_count() == 2
    await services.aclose()


async def test_nightly_prunes_old_usage_rows_and_records_its_success_only_when_every_step_passed(
        tmp_path, fake_llm, monkeypatch) -> None:
    from datetime import datetime, timedelta

    from bridge.ops.usage import TurnRecord

    fake_llm.responder = answer
    services = make_services(tmp_path / "ws", fake_llm.base_url, memory=NO_DREAM, usage={"keep_days": 30})
    now = datetime.now()
    for age_days in (0, 29, 31, 400):
        services.usage.record(TurnRecord(now - timedelta(days=age_days), "alice", "telegram", "answered", 10, 1,
                                         request_ms=(100.0,)))
    assert services.nightly_last_success() is None
    monkeypatch.setattr(services.usage, "prune", lambda before: 1 / 0)  # one step fails: the night goes on
    await services.nightly(date.today(), 1)
    assert services.nightly_last_success() is None
    monkeypatch.undo()
    await services.nightly(date.today(), 1)
    success = services.nightly_last_success()
    assert success is not None and success.tzinfo is not None and abs(success.timestamp() - now.timestamp()) < 600
    assert rows(services, "SELECT count(*) FROM usage_turns") == 2
    assert services.usage.request_latencies(0) == [100.0, 100.0]
    assert rows(services, "SELECT count(*) FROM usage_daily") == 2  # today's and 29 days ago
    await services.aclose()
