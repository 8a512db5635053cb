from __future__ import annotations

import threading
import time

import pytest

from memory import Database
from memory.conversations import ConversationStore


@pytest.fixture
def store(tmp_path) -> ConversationStore:
    made = ConversationStore(Database(tmp_path / "index.db"))
    made.ensure_session("s1", "alice")
    return made


def turn(text: str, tools: int = 0) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": text}]
    for i in range(tools):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function",
                         "function": {"name": "memory_search", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "[]"})
    messages.append({"role": "assistant", "content": f"re: {text}"})
    return messages


def test_seq_continues_and_is_safe_under_concurrent_writers(tmp_path) -> None:
    stores = [ConversationStore(Database(tmp_path / "index.db")) for _ in range(4)]
    stores[0].ensure_session("s", "alice")

    def write(store: ConversationStore, who: int) -> None:
        for i in range(25):
            store.append_messages("s", [{"role": "user", "content": f"{who}-{i}"}])

    threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seqs = [m.seq for m in stores[0].context_messages("s")]
    assert seqs == list(range(1, 101))


def test_max_turns_counts_visible_user_turns_only(store) -> None:
    for i in range(5):
        store.append_messages("s1", turn(f"q{i}", tools=3))
    loaded = store.load_messages("s1", 2)
    assert [m["content"] for m in loaded if m["role"] == "user"] == ["q3", "q4"]
    assert len(loaded) == 2 * (1 + 6 + 1)
    with pytest.raises(ValueError):
        store.load_messages("s1", 0)


def test_clear_context_keeps_rows_on_disk(store) -> None:
    store.append_messages("s1", turn("old"))
    store.clear_context("s1")
    assert store.load_messages("s1", 10) == []
    store.append_messages("s1", turn("new"))
    assert [m["content"] for m in store.load_messages("s1", 10)] == ["new", "re: new"]
    assert store.messages_between("s1", 1, 2) == turn("old")


def test_trim_moves_the_boundary_and_records_one_job(store) -> None:
    for i in range(3):
        store.append_messages("s1", turn(f"q{i}"))
    job = store.trim("s1", 5, "trim", "2026-12-02")
    assert job is not None and (job.seq_from, job.seq_to, job.scope, job.reason) == (0, 4, "alice", "trim")
    assert store.trim("s1", 5, "trim", "2026-12-02") is None  # no double job for the same range
    assert [j.id for j in store.pending_jobs()] == [job.id]
    assert [m["content"] for m in store.load_messages("s1", 10)] == ["q2", "re: q2"]


def test_prune_scheduled_keeps_the_newest_pairs(store) -> None:
    for i in range(5):
        store.append_messages("s1", [{"role": "user", "content": f"[SCHEDULED] price check {i}"},
                                     {"role": "assistant", "content": f"price {i}"}])
    store.append_messages("s1", turn("real"))
    assert store.prune_scheduled_messages("s1", 2) == 6
    contents = [m["content"] for m in store.load_messages("s1", 10)]
    assert contents == ["[SCHEDULED] price check 3", "price 3", "[SCHEDULED] price check 4", "price 4", "real", "re: real"]


def test_retention_cleanup_runs_and_deletes_old_rows(store) -> None:
    store.append_messages("s1", turn("ancient"))
    assert store.cleanup(max_age_days=30, now=time.time() + 31 * 86400) == 2
    assert store.context_messages("s1") == []
