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
    from .config import DreamSettings, EmbeddingSettings, MemorySettings, RerankSettings, StrictSettings
    from .consolidation.dream import DeepDream, DreamResult
    from .consolidation.flush import Flusher, Summarizer, conversation_text
    from .conversations.conversations import ConversationStore, StoredMessage, session_id
    from .conversations.exchanges import Cursor, Exchange
    from .conversations.flush_jobs import FailingJob, FlushJob
    from .conversations.turns import Turn
    from .files.line_removal import NothingToForget
    from .files.locks import WorkspaceLock, WorkspaceLockTimeout, WriteWithdrawn
    from .files.memory_file import MemoryFile, Version, count_entries, unified_diff, versioned_file
    from .files.scopes import (
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
    from .index.chunker import Chunk, chunk_text
    from .index.database import Database
    from .index.keyword import count_cjk
    from .index.report import SyncReport
    from .knowledge.knowledge import KnowledgeNotFound, KnowledgePage, KnowledgeService
    from .knowledge.knowledge_names import KnowledgeError
    from .manager import IndexCheck, MemoryManager
    from .privacy.forgetting import ForgetDeferred, ForgetElsewhere, Forgetter, pending_forget_jobs
    from .privacy.holdings import ScopeFile, scope_files
    from .privacy.portability import Portability, PortabilityError, TransferReport
    from .retrieval.recall import Recalled
    from .retrieval.recall_log import RecallState
    from .retrieval.rerank import Reranker, make_reranker, reranked_order
    from .retrieval.result import Match, SearchResult
    from .vectors.backend import LanceDBBackend, VectorBackend, VectorRow
    from .vectors.embedding import (
        EmbeddingError,
        EmbeddingProvider,
        HashEmbedding,
        LocalEmbedding,
        OpenAIEmbedding,
        make_embedder,
    )

#: Public name -> the module (relative to this package) that defines it.
_HOMES = {
    "Chunk": "index.chunker",
    "chunk_text": "index.chunker",
    "DreamSettings": "config",
    "EmbeddingSettings": "config",
    "MemorySettings": "config",
    "RerankSettings": "config",
    "StrictSettings": "config",
    "ConversationStore": "conversations.conversations",
    "Cursor": "conversations.exchanges",
    "Exchange": "conversations.exchanges",
    "FailingJob": "conversations.flush_jobs",
    "FlushJob": "conversations.flush_jobs",
    "StoredMessage": "conversations.conversations",
    "session_id": "conversations.conversations",
    "DeepDream": "consolidation.dream",
    "DreamResult": "consolidation.dream",
    "EmbeddingError": "vectors.embedding",
    "EmbeddingProvider": "vectors.embedding",
    "HashEmbedding": "vectors.embedding",
    "LocalEmbedding": "vectors.embedding",
    "OpenAIEmbedding": "vectors.embedding",
    "make_embedder": "vectors.embedding",
    "Flusher": "consolidation.flush",
    "Summarizer": "consolidation.flush",
    "conversation_text": "consolidation.flush",
    "ForgetDeferred": "privacy.forgetting",
    "ForgetElsewhere": "privacy.forgetting",
    "Forgetter": "privacy.forgetting",
    "NothingToForget": "files.line_removal",
    "pending_forget_jobs": "privacy.forgetting",
    "count_cjk": "index.keyword",
    "KnowledgeNotFound": "knowledge.knowledge",
    "KnowledgePage": "knowledge.knowledge",
    "KnowledgeService": "knowledge.knowledge",
    "KnowledgeError": "knowledge.knowledge_names",
    "WorkspaceLock": "files.locks",
    "WorkspaceLockTimeout": "files.locks",
    "WriteWithdrawn": "files.locks",
    "IndexCheck": "manager",
    "MemoryManager": "manager",
    "MemoryFile": "files.memory_file",
    "Version": "files.memory_file",
    "count_entries": "files.memory_file",
    "unified_diff": "files.memory_file",
    "versioned_file": "files.memory_file",
    "MemoryPathError": "files.scopes",
    "SyncReport": "index.report",
    "Portability": "privacy.portability",
    "PortabilityError": "privacy.portability",
    "TransferReport": "privacy.portability",
    "Reranker": "retrieval.rerank",
    "make_reranker": "retrieval.rerank",
    "reranked_order": "retrieval.rerank",
    "SearchResult": "retrieval.result",
    "Match": "retrieval.result",
    "Recalled": "retrieval.recall",
    "RecallState": "retrieval.recall_log",
    "ScopeFile": "privacy.holdings",
    "scope_files": "privacy.holdings",
    "DAILY_DIR": "files.scopes",
    "GLOBAL_SCOPE": "files.scopes",
    "KNOWLEDGE_DIR": "files.scopes",
    "KNOWLEDGE_SCOPE": "files.scopes",
    "MEMORY_FILE": "files.scopes",
    "ScopeError": "files.scopes",
    "Workspace": "files.scopes",
    "validate_scope": "files.scopes",
    "Database": "index.database",
    "Turn": "conversations.turns",
    "LanceDBBackend": "vectors.backend",
    "VectorBackend": "vectors.backend",
    "VectorRow": "vectors.backend",
}

__all__ = [
    "DAILY_DIR",
    "GLOBAL_SCOPE",
    "KNOWLEDGE_DIR",
    "KNOWLEDGE_SCOPE",
    "MEMORY_FILE",
    "Chunk",
    "ConversationStore",
    "Cursor",
    "Database",
    "DeepDream",
    "DreamResult",
    "DreamSettings",
    "EmbeddingError",
    "EmbeddingProvider",
    "EmbeddingSettings",
    "Exchange",
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
    "RecallState",
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
