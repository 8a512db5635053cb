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
    from .config import DreamSettings, EmbeddingSettings, MemorySettings, RerankSettings, StrictSettings
    from .conversations import ConversationStore, StoredMessage, session_id
    from .database import Database
    from .dream import DeepDream, DreamResult
    from .embedding import (
        EmbeddingError,
        EmbeddingProvider,
        HashEmbedding,
        LocalEmbedding,
        OpenAIEmbedding,
        make_embedder,
    )
    from .flush import Flusher, Summarizer, conversation_text
    from .flush_jobs import FailingJob, FlushJob
    from .forgetting import ForgetDeferred, ForgetElsewhere, Forgetter, pending_forget_jobs
    from .holdings import ScopeFile, scope_files
    from .indexer import SyncReport
    from .keyword import count_cjk
    from .knowledge import KnowledgeNotFound, KnowledgePage, KnowledgeService
    from .knowledge_names import KnowledgeError
    from .line_removal import NothingToForget
    from .locks import WorkspaceLock, WorkspaceLockTimeout, WriteWithdrawn
    from .manager import IndexCheck, MemoryManager
    from .memory_file import MemoryFile, Version, count_entries, unified_diff, versioned_file
    from .portability import Portability, PortabilityError, TransferReport
    from .rerank import Reranker, make_reranker, reranked_order
    from .retrieval.recall import Recalled
    from .retrieval.result import Match, SearchResult
    from .scopes import (
        DAILY_DIR,
        GLOBAL_SCOPE,
        KNOWLEDGE_DIR,
        KNOWLEDGE_SCOPE,
        MEMORY_FILE,
        MemoryPathError,
        ScopeError,
        Workspace,
        validate_scope,
    )
    from .turns import Turn
    from .vectors import LanceDBBackend, VectorBackend, VectorRow

#: Public name -> the module (relative to this package) that defines it.
_HOMES = {
    "Chunk": "chunker",
    "chunk_text": "chunker",
    "DreamSettings": "config",
    "EmbeddingSettings": "config",
    "MemorySettings": "config",
    "RerankSettings": "config",
    "StrictSettings": "config",
    "ConversationStore": "conversations",
    "FailingJob": "flush_jobs",
    "FlushJob": "flush_jobs",
    "StoredMessage": "conversations",
    "session_id": "conversations",
    "DeepDream": "dream",
    "DreamResult": "dream",
    "EmbeddingError": "embedding",
    "EmbeddingProvider": "embedding",
    "HashEmbedding": "embedding",
    "LocalEmbedding": "embedding",
    "OpenAIEmbedding": "embedding",
    "make_embedder": "embedding",
    "Flusher": "flush",
    "Summarizer": "flush",
    "conversation_text": "flush",
    "ForgetDeferred": "forgetting",
    "ForgetElsewhere": "forgetting",
    "Forgetter": "forgetting",
    "NothingToForget": "line_removal",
    "pending_forget_jobs": "forgetting",
    "count_cjk": "keyword",
    "KnowledgeNotFound": "knowledge",
    "KnowledgePage": "knowledge",
    "KnowledgeService": "knowledge",
    "KnowledgeError": "knowledge_names",
    "WorkspaceLock": "locks",
    "WorkspaceLockTimeout": "locks",
    "WriteWithdrawn": "locks",
    "IndexCheck": "manager",
    "MemoryManager": "manager",
    "MemoryFile": "memory_file",
    "Version": "memory_file",
    "count_entries": "memory_file",
    "unified_diff": "memory_file",
    "versioned_file": "memory_file",
    "MemoryPathError": "scopes",
    "SyncReport": "indexer",
    "Portability": "portability",
    "PortabilityError": "portability",
    "TransferReport": "portability",
    "Reranker": "rerank",
    "make_reranker": "rerank",
    "reranked_order": "rerank",
    "SearchResult": "retrieval.result",
    "Match": "retrieval.result",
    "Recalled": "retrieval.recall",
    "ScopeFile": "holdings",
    "scope_files": "holdings",
    "DAILY_DIR": "scopes",
    "GLOBAL_SCOPE": "scopes",
    "KNOWLEDGE_DIR": "scopes",
    "KNOWLEDGE_SCOPE": "scopes",
    "MEMORY_FILE": "scopes",
    "ScopeError": "scopes",
    "Workspace": "scopes",
    "validate_scope": "scopes",
    "Database": "database",
    "Turn": "turns",
    "LanceDBBackend": "vectors",
    "VectorBackend": "vectors",
    "VectorRow": "vectors",
}

__all__ = [
    "DAILY_DIR",
    "GLOBAL_SCOPE",
    "KNOWLEDGE_DIR",
    "KNOWLEDGE_SCOPE",
    "MEMORY_FILE",
    "Chunk",
    "ConversationStore",
    "Database",
    "DeepDream",
    "DreamResult",
    "DreamSettings",
    "EmbeddingError",
    "EmbeddingProvider",
    "EmbeddingSettings",
    "FailingJob",
    "FlushJob",
    "Flusher",
    "ForgetDeferred",
    "ForgetElsewhere",
    "Forgetter",
    "HashEmbedding",
    "IndexCheck",
    "KnowledgeError",
    "KnowledgeNotFound",
    "KnowledgePage",
    "KnowledgeService",
    "LanceDBBackend",
    "LocalEmbedding",
    "Match",
    "MemoryFile",
    "MemoryManager",
    "MemoryPathError",
    "MemorySettings",
    "NothingToForget",
    "OpenAIEmbedding",
    "Portability",
    "PortabilityError",
    "Recalled",
    "RerankSettings",
    "Reranker",
    "ScopeError",
    "ScopeFile",
    "SearchResult",
    "StoredMessage",
    "StrictSettings",
    "Summarizer",
    "SyncReport",
    "TransferReport",
    "Turn",
    "VectorBackend",
    "VectorRow",
    "Version",
    "Workspace",
    "WorkspaceLock",
    "WorkspaceLockTimeout",
    "WriteWithdrawn",
    "chunk_text",
    "conversation_text",
    "count_cjk",
    "count_entries",
    "make_embedder",
    "make_reranker",
    "pending_forget_jobs",
    "reranked_order",
    "scope_files",
    "session_id",
    "unified_diff",
    "validate_scope",
    "versioned_file",
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
