"""The embedding provider as the bridge uses it: the configured one, with its throughput counted.

``/metrics`` gets ``membridge_embedded_texts_total`` and ``membridge_embedding_seconds_total`` from
here, so memory (which knows nothing of the bridge) stays as it is. prometheus-client is imported
on the first embedding, which is heavy anyway: a command that never embeds never pays for it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory import EmbeddingProvider

if TYPE_CHECKING:
    import numpy as np


class MeteredEmbedder(EmbeddingProvider):
    """Delegates to ``inner``; counts each text embedded and the time it took."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.max_batch = inner.max_batch
        self.similarity_floor = inner.similarity_floor

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        vectors = self.inner.embed(texts)
        _count(len(texts), time.perf_counter() - started)
        return vectors

    def embed_query(self, text: str, *, threads: int | None = None) -> np.ndarray:
        started = time.perf_counter()
        vector = self.inner.embed_query(text, threads=threads)
        _count(1, time.perf_counter() - started)
        return vector


def _count(texts: int, seconds: float) -> None:
    from . import metrics

    metrics.EMBEDDED_TEXTS.inc(texts)
    metrics.EMBEDDING_SECONDS.inc(seconds)
