"""What one sync did: the :class:`SyncReport` the indexer fills and the writer adds its counts to.

Its own module so that the indexer and the writer both import it and neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SyncReport:
    """What one sync did, for its caller to show (``membridge memory sync``) or check; a sync that
    stopped says why in ``error`` instead of raising, so a search can go on with the old index."""

    files_scanned: int = 0
    files_changed: int = 0
    files_removed: int = 0
    chunks_written: int = 0
    chunks_removed: int = 0
    vectors_written: int = 0
    embed_calls: int = 0
    cache_hits: int = 0
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None
