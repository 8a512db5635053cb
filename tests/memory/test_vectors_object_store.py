"""The vectors on object storage (``memory.vectors.uri: s3://...``): LanceDB against a real S3 server
on 127.0.0.1, read back object by object."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from support.forgetting import plant
from support.object_store import Bucket, s3_bucket

from memory import HashEmbedding, MemoryManager, MemorySettings, Workspace
from memory.conversations.conversations import ConversationStore
from memory.files.memory_file import MemoryFile
from memory.privacy.forgetting import Forgetter

TOKEN = "Zorblaxquint"
TODAY = date(2026, 12, 2)


@pytest.fixture
def bucket() -> Iterator[Bucket]:
    with s3_bucket() as made:
        yield made


@pytest.fixture
def stack(workspace: Workspace, bucket: Bucket) -> Iterator[tuple[MemoryManager, Forgetter]]:
    settings = MemorySettings(vector_cache_mb=0,  # every vector search goes to LanceDB, i.e. to the bucket
                              vectors={"uri": bucket.uri("bot"), "storage_options": bucket.storage_options()})
    manager = MemoryManager(workspace, settings, embedder=HashEmbedding(), today=lambda: TODAY)
    yield manager, Forgetter(manager, ConversationStore(manager.db), MemoryFile(manager))
    manager.close()


def test_sync_search_and_forget_keep_the_vectors_in_the_bucket(stack, bucket: Bucket) -> None:
    manager, forgetter = stack
    plant(manager, forgetter, "alice", TOKEN)
    plant(manager, forgetter, "bob", TOKEN)
    assert manager.vectors is not None
    stored = bucket.objects("bot/")
    assert any(key.endswith(".manifest") for key in stored) and any(key.endswith(".lance") for key in stored)
    assert not (manager.workspace.root / "vectors").exists()  # nothing went to the local folder
    entries = manager.storage.entry_counts()
    assert manager.vectors.count() == entries["alice"] + entries["bob"] > 0
    query = HashEmbedding().embed([f"- the {TOKEN} box is in the attic"])[0]
    best = manager.vectors.search(query, ["alice"], 3)[0][0]  # one vector per note: the entry itself
    assert manager.storage.chunks_of_entries([best], ["alice"])[best].text == f"- the {TOKEN} box is in the attic\n- likes green tea"
    assert TOKEN in manager.search(TOKEN, "alice")[0].text

    removed = set(manager.vectors.ids()) - _ids_after(lambda: forgetter.forget("alice", TOKEN.lower()), manager)
    assert removed and not any(bucket.occurrences(chunk_id) for chunk_id in removed)  # old versions purged too
    assert [r.text for r in manager.search(TOKEN, "alice") if TOKEN in r.text] == []
    assert manager.search(TOKEN, "bob")

    bob = [(r.path, r.text) for r in manager.search("green tea", "bob")]
    forgetter.erase("alice")
    assert bucket.occurrences("alice") == {}  # no row names the scope, in any version left in the bucket
    assert bucket.occurrences("bob")
    assert [(r.path, r.text) for r in manager.search("green tea", "bob")] == bob != []


def test_a_second_process_opens_the_same_vectors(stack, bucket: Bucket, tmp_path: Path) -> None:
    """Another manager (a worker taking a shard over) with the same URI finds what the first wrote."""
    manager, forgetter = stack
    plant(manager, forgetter, "alice", TOKEN)
    other = MemoryManager(Workspace(manager.workspace.root), manager.settings, embedder=HashEmbedding(),
                          today=lambda: TODAY)
    try:
        assert other.vectors is not None and other.vectors.ids() == manager.vectors.ids() != set()
    finally:
        other.close()


def test_a_relative_folder_is_refused() -> None:
    with pytest.raises(ValueError, match="absolute folder or an object-store URI"):
        MemorySettings(vectors={"uri": "vectors-elsewhere"})


def _ids_after(change, manager: MemoryManager) -> set[str]:  # type: ignore[no-untyped-def]
    change()
    assert manager.vectors is not None
    return manager.vectors.ids()


def test_a_workspace_moves_its_vectors_by_copying_the_folder(workspace: Workspace, bucket: Bucket) -> None:
    """README: an existing workspace's ``vectors/`` uploaded as it is (``aws s3 sync``) is the table."""
    local = MemoryManager(workspace, MemorySettings(vector_cache_mb=0), embedder=HashEmbedding(), today=lambda: TODAY)
    local.append_daily("alice", f"- the {TOKEN} box is in the attic")
    assert local.indexer.sync("alice").ok
    local.indexer.finish_indexing()
    ids = local.vectors.ids() if local.vectors is not None else set()
    local.close()
    for path in workspace.vectors_dir.rglob("*"):
        if path.is_file():
            bucket.client.upload_file(str(path), bucket.name, f"moved/{path.relative_to(workspace.vectors_dir).as_posix()}")
    settings = MemorySettings(vector_cache_mb=0, vectors={"uri": bucket.uri("moved"),
                                                          "storage_options": bucket.storage_options()})
    moved = MemoryManager(workspace, settings, embedder=HashEmbedding(), today=lambda: TODAY)
    try:
        assert moved.vectors is not None and moved.vectors.ids() == ids != set()
        assert TOKEN in moved.search(TOKEN, "alice")[0].text
    finally:
        moved.close()
