"""A write waits out another process's long write lock (a forget's VACUUM) instead of failing (#34.14).

The other process holds SQLite's write lock the way a VACUUM does, for longer than the busy
timeout (shortened here, 30 s in use): the turn's write waits, says so in the log, and lands once
the lock is free. Before, it failed with "database is locked" and the message was lost.
"""

from __future__ import annotations

import threading
from pathlib import Path

from support.logs import watching
from support.sqlite_locker import write_lock_held

import memory.index.database as database
from memory import Turn
from memory.conversations.conversations import ConversationStore
from memory.index.database import Database


def test_a_write_waits_out_a_lock_held_past_the_busy_timeout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(database, "BUSY_TIMEOUT_S", 0.2, raising=False)
    store = ConversationStore(Database(tmp_path / "index.db"))
    store.ensure_session("alice|chat", "alice")
    outcome: dict[str, object] = {}

    def write() -> None:
        try:
            outcome["seqs"] = store.append_messages("alice|chat", [Turn("user", "hello")])
        except Exception as exc:  # what the turn used to end with
            outcome["error"] = exc

    writer = threading.Thread(target=write)
    with watching("memory.index.database", "still waiting for the write lock") as waiting:
        with write_lock_held(tmp_path / "index.db") as release:
            writer.start()
            assert waiting.seen.wait(60), f"the write never said it was waiting: {outcome}"
            assert writer.is_alive()  # waiting, not failed
            release()
        writer.join(60)
    assert outcome == {"seqs": [1]}
    assert [t.text for t in store.messages_between("alice|chat", 1, 1)] == ["hello"]
