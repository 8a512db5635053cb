"""A search's own sync never holds up the bot: it embeds outside the workspace lock, and leaves a
big backlog to a background sync instead of embedding it inside a chat turn."""

from __future__ import annotations

import threading

from support.files import write

from memory import HashEmbedding


class GatedEmbedding(HashEmbedding):
    """Embeds notes only when the test opens the gate (questions pass); says when one waits."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        self.gate = threading.Event()

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.waiting.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts)

    def embed_query(self, text, *, threads=None):  # type: ignore[no-untyped-def]
        return super().embed([text])[0]


def test_a_note_written_while_a_search_embeds_does_not_wait(workspace, make_manager) -> None:
    embedder = GatedEmbedding()
    manager = make_manager(embedder=embedder)
    write(workspace, "alice", "memory/2026-12-01.md", "- the spare key is under the blue pot\n")
    found: list[list[str]] = []
    search = threading.Thread(target=lambda: found.append([h.text for h in manager.search("spare key", "alice")]))
    search.start()
    assert embedder.waiting.wait(30)  # the search is embedding the new note now
    writer = threading.Thread(target=manager.append_daily, args=("alice", "- bought milk\n"))
    writer.start()
    writer.join(10)
    blocked = writer.is_alive()
    embedder.gate.set()
    search.join(30)
    writer.join(30)
    assert not blocked, "append_daily waited for the search's embedding"
    assert found == [["- the spare key is under the blue pot"]]


def test_a_big_backlog_is_synced_in_the_background_not_in_the_turn(workspace, make_manager) -> None:
    embedder = GatedEmbedding()
    manager = make_manager(embedder=embedder)
    for n in range(70):
        write(workspace, "alice", f"memory/2026-{1 + n // 28:02d}-{1 + n % 28:02d}.md", f"- note {n} about the garden\n")
    assert manager.search("garden", "alice") == []  # answered at once, from the index as it is
    assert embedder.waiting.wait(30)  # ...while a background sync embeds the backlog
    background = manager.indexer._background_sync
    assert background is not None
    embedder.gate.set()
    background.join(30)
    assert len(manager.search("garden", "alice", limit=100)) == 70
