from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest

from memory import Database
from memory.conversations.conversations import ConversationStore
from memory.conversations.turns import Turn


@pytest.fixture
def store(tmp_path) -> ConversationStore:
    made = ConversationStore(Database(tmp_path / "index.db"))
    made.ensure_session("s1", "alice")
    return made


def turn(text: str, tools: int = 0) -> list[Turn]:
    turns = [Turn("user", text)]
    for i in range(tools):
        turns.append(Turn("assistant", "", {"calls": f"c{i}"}))
        turns.append(Turn("tool", "[]", {"answers": f"c{i}"}))
    turns.append(Turn("assistant", f"re: {text}"))
    return turns


def test_seq_continues_and_is_safe_under_concurrent_writers(tmp_path) -> None:
    stores = [ConversationStore(Database(tmp_path / "index.db")) for _ in range(4)]
    stores[0].ensure_session("s", "alice")

    def write(store: ConversationStore, who: int) -> None:
        for i in range(25):
            store.append_messages("s", [Turn("user", f"{who}-{i}")])

    threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seqs = [m.seq for m in stores[0].context_messages("s")]
    assert seqs == list(range(1, 101))


def test_an_answer_to_a_forgotten_message_is_not_stored(store) -> None:
    [asked] = store.append_messages("s1", [Turn("user", "my code is 4471")])
    assert store.user_seq("s1", "my code is 4471") == asked and store.user_seq("s1", "other") is None
    assert store.forget_text("alice", lambda text: "4471" in text) == 1  # while the model was answering
    noted: list[str] = []
    assert store.append_messages("s1", [Turn("assistant", "noted: 4471")], lambda _conn: noted.append("x"),
                                 answering=asked) == []
    assert store.context_messages("s1") == [] and noted == [] and store.user_seq("s1", "my code is 4471") is None
    [again] = store.append_messages("s1", [Turn("user", "hello")])
    assert store.append_messages("s1", [Turn("assistant", "hi")], answering=again) == [again + 1]


def test_max_turns_counts_visible_user_turns_only(store) -> None:
    for i in range(5):
        store.append_messages("s1", turn(f"q{i}", tools=3))
    loaded = store.load_messages("s1", 2)
    assert [m.text for m in loaded if m.role == "user"] == ["q3", "q4"]
    assert len(loaded) == 2 * (1 + 6 + 1)
    with pytest.raises(ValueError):
        store.load_messages("s1", 0)


def test_clear_context_keeps_rows_on_disk_and_queues_them_for_daily_memory(store) -> None:
    store.append_messages("s1", turn("old"))
    job = store.clear_context("s1", "2026-12-02")
    assert job is not None and (job.seq_from, job.seq_to, job.reason, job.day) == (1, 2, "clear", "2026-12-02")
    assert store.load_messages("s1", 10) == []
    store.append_messages("s1", turn("new"))
    assert [m.text for m in store.load_messages("s1", 10)] == ["new", "re: new"]
    assert store.messages_between("s1", 1, 2) == turn("old")
    assert store.clear_context("s1", "2026-12-02").seq_from == 3  # only what the first clear did not take


def test_trim_moves_the_boundary_and_records_one_job(store) -> None:
    for i in range(3):
        store.append_messages("s1", turn(f"q{i}"))
    job = store.trim("s1", 5, "trim", "2026-12-02")
    assert job is not None and (job.seq_from, job.seq_to, job.scope, job.reason) == (1, 4, "alice", "trim")
    assert store.trim("s1", 5, "trim", "2026-12-02") is None  # no double job for the same range
    assert [j.id for j in store.pending_jobs()] == [job.id]
    assert [m.text for m in store.load_messages("s1", 10)] == ["q2", "re: q2"]


def test_prune_scheduled_keeps_the_newest_pairs(store) -> None:
    for i in range(5):
        store.append_messages("s1", [Turn("user", f"[SCHEDULED] price check {i}"),
                                     Turn("assistant", f"price {i}")])
    store.append_messages("s1", turn("real"))
    assert store.prune_scheduled_messages("s1", 2) == 6
    contents = [m.text for m in store.load_messages("s1", 10)]
    assert contents == ["[SCHEDULED] price check 3", "price 3", "[SCHEDULED] price check 4", "price 4", "real", "re: real"]


def queued(store: ConversationStore) -> list[tuple[int, int, str]]:
    """Every job's range and reason, oldest first."""
    return [tuple(row) for row in store.db.query("SELECT seq_from, seq_to, reason FROM jobs ORDER BY id")]


def test_retention_keeps_turns_until_they_are_in_daily_memory_then_deletes_them(store) -> None:
    store.append_messages("s1", turn("ancient"))
    later = time.time() + 31 * 86400
    assert store.cleanup(max_age_days=30, now=later) == 0  # never queued: deleting would lose it
    [job] = store.record_daily_jobs(time.time() + 1, "2026-12-02")
    assert store.cleanup(max_age_days=30, now=later) == 0  # queued, not yet written
    store.finish_job(job.id)
    assert store.cleanup(max_age_days=30, now=later) == 2
    assert store.context_messages("s1") == [] and store.get_session("s1") is None


def test_a_trim_after_the_nightly_summary_queues_only_the_turns_it_did_not_take(store) -> None:
    """Issue 15 #5: a turn goes to daily memory once, whichever of the nightly summary and a trim
    takes it first (the trim used to start at the old context boundary)."""
    for i in range(3):
        store.append_messages("s1", turn(f"q{i}"))  # seq 1-6
    store.record_daily_jobs(time.time() + 1, "2026-12-02")
    store.append_messages("s1", turn("q3"))  # seq 7-8
    store.append_messages("s1", turn("q4"))  # seq 9-10
    assert next(m.text for m in store.load_messages("s1", 10)) == "q0"  # the summary left the context as it was
    store.trim("s1", 9, "trim", "2026-12-03")
    store.record_daily_jobs(time.time() + 1, "2026-12-03")
    assert queued(store) == [(1, 6, "daily"), (7, 8, "trim"), (9, 10, "daily")]
    assert store.record_daily_jobs(time.time() + 1, "2026-12-03") == []


def test_the_nightly_summary_takes_only_turns_written_before_its_night_ends(store) -> None:
    store.append_messages("s1", turn("tonight"))
    assert store.record_daily_jobs(time.time() - 60, "2026-12-01") == []
    [job] = store.record_daily_jobs(time.time() + 1, "2026-12-02")
    assert (job.seq_from, job.seq_to, job.day, job.scope) == (1, 2, "2026-12-02", "alice")


def test_a_chat_that_comes_back_after_cleanup_has_its_new_turns_summarised(store) -> None:
    """Issue 15 #6: cleanup deleted an idle session but kept its nightly-summary row, so the new
    turns of the same chat (seq from 1 again) counted as already summarised."""
    for i in range(3):
        store.append_messages("s1", turn(f"old {i}"))
    [job] = store.record_daily_jobs(time.time() + 1, "2026-09-01")
    store.finish_job(job.id)
    assert store.cleanup(max_age_days=90, now=time.time() + 91 * 86400) == 6
    store.ensure_session("s1", "alice")
    store.append_messages("s1", turn("back again"))
    [job] = store.record_daily_jobs(time.time() + 1, "2026-12-02")
    assert store.messages_between("s1", job.seq_from, job.seq_to) == turn("back again")


def test_seq_never_reuses_a_number_a_job_already_covers(store) -> None:
    store.append_messages("s1", turn("real"))
    store.append_messages("s1", [Turn("user", "[SCHEDULED] ping"), Turn("assistant", "pong")])
    store.record_daily_jobs(time.time() + 1, "2026-12-02")  # seq 1-4
    assert store.prune_scheduled_messages("s1", 0) == 2  # the newest rows, 3 and 4, go
    assert store.append_messages("s1", turn("next")) == [5, 6]
    [job] = store.record_daily_jobs(time.time() + 1, "2026-12-02")
    assert store.messages_between("s1", job.seq_from, job.seq_to) == turn("next")


def test_a_summary_finished_after_clear_stays_out_of_the_fresh_context(store) -> None:
    """Issue 15 #4b: the summary of turns trimmed before /clear belongs to the old context."""
    for i in range(3):
        store.append_messages("s1", turn(f"q{i}"))
    trimmed = store.trim("s1", 5, "trim", "2026-12-02")
    assert trimmed is not None
    store.clear_context("s1", "2026-12-02")
    assert store.remember_summary(trimmed, "- old thread", 2000) is False
    assert store.get_session("s1").summary is None
    store.append_messages("s1", turn("fresh"))
    later = store.trim("s1", 9, "trim", "2026-12-02")
    assert later is not None and store.remember_summary(later, "- new thread", 2000) is True
    assert store.get_session("s1").summary == "- new thread"


def test_a_summary_of_turns_still_in_the_context_is_not_added_to_it(store) -> None:
    store.append_messages("s1", turn("q0"))
    [daily] = store.record_daily_jobs(time.time() + 1, "2026-12-02")
    assert store.remember_summary(daily, "- q0 again", 2000) is False
    assert store.get_session("s1").summary is None


OLD_SCHEMA = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, scope TEXT NOT NULL, channel TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL, updated_at REAL NOT NULL,
    context_start_seq INTEGER NOT NULL DEFAULT 0, summary TEXT
);
CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    role TEXT NOT NULL, body TEXT NOT NULL, visible INTEGER NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE TABLE daily_summaries (session_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
"""


def test_an_older_index_keeps_what_it_already_summarised(tmp_path) -> None:
    path = tmp_path / "index.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
        now = time.time()
        conn.executemany("INSERT INTO sessions (id, scope, created_at, updated_at, context_start_seq) VALUES (?, 'a', ?, ?, ?)",
                         [("trimmed", now, now, 5), ("summarised", now, now, 0)])
        conn.executemany("INSERT INTO messages VALUES (?, ?, 'user', '{\"role\": \"user\"}', 1, ?)",
                         [(sid, seq, now) for sid in ("trimmed", "summarised") for seq in range(1, 9)])
        conn.execute("INSERT INTO daily_summaries VALUES ('summarised', 6)")
    store = ConversationStore(Database(path))
    jobs = {job.session_id: (job.seq_from, job.seq_to) for job in store.record_daily_jobs(now + 1, "2026-12-02")}
    assert jobs == {"trimmed": (5, 8), "summarised": (7, 8)}
    assert not store.db.query("SELECT 1 FROM sqlite_master WHERE name = 'daily_summaries'")
    ConversationStore(Database(path))  # opening it again changes nothing


V1_ROWS = [  # (seq, role, body) as format 1 stored them: the chat API's JSON
    (1, "user", '{"role": "user", "content": "我的猫叫 Tom"}'),
    (2, "assistant", '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",'
                     ' "function": {"name": "memory_write", "arguments": "{\\"text\\": \\"\\\\u732b Tom\\"}"}}]}'),
    (3, "tool", '{"role": "tool", "tool_call_id": "c1", "content": "saved"}'),
    (4, "assistant", '{"role": "assistant", "content": "记住了"}'),
]


def test_an_index_of_format_1_migrates_its_messages_to_turns_in_place(tmp_path) -> None:
    path = tmp_path / "index.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
        conn.execute("INSERT INTO sessions (id, scope, created_at, updated_at) VALUES ('a|chat', 'a', 1, 1)")
        conn.executemany("INSERT INTO messages VALUES ('a|chat', ?, ?, ?, ?, 1)",
                         [(seq, role, body, int(role == "user")) for seq, role, body in V1_ROWS])
    store = ConversationStore(Database(path))
    calls = ('[{"id": "c1", "type": "function", "function": {"name": "memory_write",'
             ' "arguments": "{\\"text\\": \\"\\\\u732b Tom\\"}"}}]')
    assert store.load_messages("a|chat", 5) == [
        Turn("user", "我的猫叫 Tom"), Turn("assistant", "", {"tool_calls": calls}),
        Turn("tool", "saved", {"tool_call_id": "c1"}), Turn("assistant", "记住了")]
    rows = store.db.query("SELECT seq, body, meta FROM messages ORDER BY seq")
    assert [tuple(row) for row in rows] == [(1, "我的猫叫 Tom", None), (2, "", json.dumps({"tool_calls": calls})),
                                            (3, "saved", '{"tool_call_id": "c1"}'), (4, "记住了", None)]
    assert [kind for kind, _where, _text in store.find_text("a", lambda text: "猫 Tom" in text)] == ["message"]
    ConversationStore(Database(path))  # opening it again changes nothing
    assert [tuple(row) for row in store.db.query("SELECT seq, body, meta FROM messages ORDER BY seq")] == \
        [tuple(row) for row in rows]


def test_a_scopes_exchanges_come_newest_first_with_their_answers_a_page_at_a_time(store) -> None:
    store.ensure_session("s2", "alice")
    store.ensure_session("b1", "bob")
    store.append_messages("s1", turn("one", tools=2))  # the answer is the last words, not a tool step
    store.append_messages("b1", turn("bob's"))  # another scope
    store.append_messages("s2", turn("two"))
    store.append_messages("s1", [Turn("user", "three")])  # not answered (yet)
    store.append_messages("s2", turn("four secret"))
    store.forget_text("alice", lambda text: "secret" in text)
    whole = [(e.chat, e.message, e.answer) for e in store.exchanges("alice", 10)]
    assert whole == [("s1", "three", None), ("s2", "two", "re: two"), ("s1", "one", "re: one")]
    pages, mark = [], None
    while page := store.exchanges("alice", 2, mark):
        pages.append([e.message for e in page])
        mark = page[-1].cursor
    assert pages == [["three", "two"], ["one"]]
    assert store.exchanges("nobody", 10) == []
