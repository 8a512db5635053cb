"""membridge's memory core: files on disk, a SQLite + vector index, hybrid search.

The package knows nothing of chats or channels: callers pass an explicit scope to everything.
"""

from __future__ import annotations

from .chunker import Chunk, chunk_text
from .config import DreamSettings, EmbeddingSettings, MemorySettings
from .embedding import EmbeddingError, EmbeddingProvider, HashEmbedding, LocalEmbedding, OpenAIEmbedding, make_embedder
from .locks import WorkspaceLock, WorkspaceLockTimeout
from .manager import MemoryManager, MemoryPathError, SyncReport
from .retrieval import SearchResult
from .scopes import GLOBAL_SCOPE, KNOWLEDGE_SCOPE, ScopeError, Workspace, validate_scope
from .storage import Database
from .vectors import LanceDBBackend, VectorBackend

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
