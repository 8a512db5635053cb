"""membridge's memory core: files on disk, a SQLite + vector index, hybrid search.

The package knows nothing of chats or channels: callers pass an explicit scope to everything.

Its public names are imported on first use (PEP 562): ``from memory import MemorySettings`` loads
the settings only, not numpy and LanceDB, so commands that never search (``memory history``,
``memory get``, ``knowledge list``) start in a fraction of the time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .chunker import Chunk, chunk_text
    from .config import DreamSettings, EmbeddingSettings, MemorySettings
    from .embedding import (
        EmbeddingError,
        EmbeddingProvider,
        HashEmbedding,
        LocalEmbedding,
        OpenAIEmbedding,
        make_embedder,
    )
    from .locks import WorkspaceLock, WorkspaceLockTimeout
    from .manager import MemoryManager, MemoryPathError, SyncReport
    from .retrieval.result import SearchResult
    from .scopes import GLOBAL_SCOPE, KNOWLEDGE_SCOPE, ScopeError, Workspace, validate_scope
    from .storage import Database
    from .vectors import LanceDBBackend, VectorBackend

#: Public name -> the module (relative to this package) that defines it.
_HOMES = {
    "Chunk": "chunker",
    "chunk_text": "chunker",
    "DreamSettings": "config",
    "EmbeddingSettings": "config",
    "MemorySettings": "config",
    "EmbeddingError": "embedding",
    "EmbeddingProvider": "embedding",
    "HashEmbedding": "embedding",
    "LocalEmbedding": "embedding",
    "OpenAIEmbedding": "embedding",
    "make_embedder": "embedding",
    "WorkspaceLock": "locks",
    "WorkspaceLockTimeout": "locks",
    "MemoryManager": "manager",
    "MemoryPathError": "manager",
    "SyncReport": "manager",
    "SearchResult": "retrieval.result",
    "GLOBAL_SCOPE": "scopes",
    "KNOWLEDGE_SCOPE": "scopes",
    "ScopeError": "scopes",
    "Workspace": "scopes",
    "validate_scope": "scopes",
    "Database": "storage",
    "LanceDBBackend": "vectors",
    "VectorBackend": "vectors",
}

__all__ = [
    "GLOBAL_SCOPE",
    "KNOWLEDGE_SCOPE",
    "Chunk",
    "Database",
    "DreamSettings",
    "EmbeddingError",
    "EmbeddingProvider",
    "EmbeddingSettings",
    "HashEmbedding",
    "LanceDBBackend",
    "LocalEmbedding",
    "MemoryManager",
    "MemoryPathError",
    "MemorySettings",
    "OpenAIEmbedding",
    "ScopeError",
    "SearchResult",
    "SyncReport",
    "VectorBackend",
    "Workspace",
    "WorkspaceLock",
    "WorkspaceLockTimeout",
    "chunk_text",
    "make_embedder",
    "validate_scope",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` when it is first asked for, and keep the name."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
