"""A flush job that keeps failing is retried with backoff until it lands; its turns are never lost."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from memory import ConversationStore, Flusher, FlushJob, Turn


async def summarize(_job: FlushJob, _messages: Sequence[Turn]) -> str:
    return "- bought a red kite"


async def test_a_flush_job_that_keeps_failing_is_retried_with_backoff_until_it_lands(make_manager) -> None:
    manager = make_manager(embedder=None)
    store = ConversationStore(manager.db)
    now = [datetime(2026, 12, 1, 12, 0)]
    flusher = Flusher(store, manager, clock=lambda: now[0])
    session = store.ensure_session("alice|chat", "alice").id
    store.append_messages(session, [Turn("user", "I bought a red kite"), Turn("assistant", "nice")])
    job = store.trim(session, 3, "trim", "2026-12-01")
    assert job is not None
    blocker = manager.workspace.daily_dir("alice")  # a file where the folder goes: every append fails
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder", encoding="utf-8")

    waits = []
    for attempt in range(1, 9):  # far past the 5 attempts that used to give it up for good
        assert await flusher.run_pending(summarize) == 0
        assert await flusher.run_pending(summarize) == 0  # just failed: not due again yet, so not tried
        [failing] = store.failing_jobs()
        assert failing.attempts == attempt and "memory" in (failing.error or "")
        waits.append(failing.next_try_at - failing.last_try_at)
        now[0] += timedelta(hours=2)
    assert waits == [30, 60, 120, 240, 480, 960, 1920, 3600]
    [pending] = store.pending_jobs()
    assert (pending.id, pending.attempts) == (job.id, 8)

    assert store.cleanup(0, now=time.time() + 60) == 0  # retention keeps the turns of a job still retrying
    assert [t.text for t in store.messages_between(session, 1, 2)] == ["I bought a red kite", "nice"]

    blocker.unlink()
    now[0] += timedelta(hours=2)
    assert await flusher.run_pending(summarize) == 1
    assert store.pending_jobs() == [] and store.failing_jobs() == []
    daily = manager.workspace.daily_file("alice", "2026-12-01").read_text(encoding="utf-8")
    assert daily.endswith("- bought a red kite\n")
