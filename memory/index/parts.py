"""What the indexer and its writer use of their owner: the pieces indexing shares with search.

The :class:`~memory.manager.MemoryManager` owns one of each (the database, the index storage and its
embedding cache, the workspace lock, the embedder, the vector backend and its RAM cache) and hands
itself over as :class:`IndexParts`; the indexer reads them through it at each use, so a lock swapped
after construction (a test does) is the one every pass takes. Being a protocol, it lets the index
depend on nothing above it: the manager imports the indexer, never the other way round.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..config import MemorySettings
    from ..files.locks import WorkspaceLock
    from ..files.scopes import Workspace
    from ..vectors.backend import VectorBackend
    from ..vectors.embed_cache import EmbeddingCache
    from ..vectors.embedding import EmbeddingProvider
    from ..vectors.vector_cache import VectorCache
    from .database import Database
    from .storage import IndexStorage


class IndexParts(Protocol):
    """The shared pieces, read-only: the owner decides what they are (the vectors on first use)."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def settings(self) -> MemorySettings: ...

    @property
    def db(self) -> Database: ...

    @property
    def storage(self) -> IndexStorage: ...

    @property
    def embed_cache(self) -> EmbeddingCache: ...

    @property
    def embedder(self) -> EmbeddingProvider | None: ...

    @property
    def lock(self) -> WorkspaceLock: ...

    @property
    def closing(self) -> threading.Event: ...

    @property
    def vectors(self) -> VectorBackend | None: ...

    @property
    def vector_cache(self) -> VectorCache | None: ...
