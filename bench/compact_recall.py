"""Recall of the compact (int8) vector scan against an exact float32 scan, on real vectors.

    .venv/bin/python bench/compact_recall.py INDEX_DB [--others] [--rows 800000]

``INDEX_DB``: an index.db whose embedding cache holds real vectors (the local USE model), e.g. the
workspace ``bench_sync_ab.py`` syncs (18,805 entry vectors). Questions: 60 of ``make_queries``
(English, 2-char CJK, mixed) and the first 200 characters of 40 chunk texts, embedded with the
local model. For K = 32 and 64 (the engine asks for ``candidates × 2`` = 64 entries): recall@K of
the scan's best K (what :class:`memory.vectors.vector_cache.VectorCache` returns; the same set as its
best K re-scored exactly) and of its best 2 × K re-scored exactly (what it returned before), the rank in the scan's order that holds all of the exact top K, and the scan's largest
error. ``--rows N``: the scan's cost (median of 7, wall and CPU) over N random rows, float32 with
numpy against int8 with SimSIMD. ``--others`` (needs ``pip install faiss-cpu``, not a dependency):
the same rank for coarser codes (4-bit and 6-bit scalar, 64-byte product codes, sign bits) and the
recall of an IVF partition, the alternatives measured before int8 was chosen.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from common import make_queries

from memory.vectors import compact
from memory.vectors.embedding import LocalEmbedding


def load(db: Path) -> tuple[np.ndarray, np.ndarray]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute("SELECT vector FROM embed_cache WHERE model LIKE 'local:%'").fetchall()
    vectors = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    texts = [r[0] for r in conn.execute("SELECT text FROM chunks LIMIT 40")]
    queries = make_queries(60)
    model = LocalEmbedding()
    asked = queries.english[:40] + queries.cjk2[:10] + queries.mixed[:10] + [t[:200] for t in texts]
    return vectors, np.vstack([model.embed_query(q) for q in asked]).astype(np.float32)


def worst_rank(order: np.ndarray, exact: np.ndarray) -> int:
    """1-based rank in ``order`` by which every row of ``exact`` has come."""
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return int(rank[exact].max()) + 1


def int8_recall(vectors: np.ndarray, probes: np.ndarray) -> None:
    codes, scales = compact.encode(vectors)
    error = 0.0
    for k in (32, 64):
        for rescore in (1, 2):
            recalls, ranks = [], []
            for probe in probes:
                truth = vectors @ probe
                approx = compact.scores(codes, scales, probe)
                error = max(error, float(np.abs(approx - truth).max()))
                order = np.argsort(-approx, kind="stable")
                exact = np.argsort(-truth, kind="stable")[:k]
                picked = order[: k * rescore]
                picked = picked[np.argsort(-truth[picked], kind="stable")][:k]
                recalls.append(len(set(exact) & set(picked)) / k)
                ranks.append(worst_rank(order, exact))
            print(f"int8, K={k}, re-score {rescore}×K: recall@{k} {np.mean(recalls):.4f} (min {min(recalls):.3f});"
                  f" scan rank holding the exact top {k}: p50 {np.percentile(ranks, 50):.0f},"
                  f" p99 {np.percentile(ranks, 99):.0f}, max {max(ranks)}")
    print(f"largest |scan - exact| over {len(vectors):,} rows × {len(probes)} questions: {error:.4f}")


def others(vectors: np.ndarray, probes: np.ndarray, k: int = 64) -> None:
    import faiss

    faiss.omp_set_num_threads(1)
    exact = [np.argsort(-(vectors @ p))[:k] for p in probes]
    dim = vectors.shape[1]

    def report(name: str, index: object) -> None:
        _, order = index.search(probes, len(vectors))  # type: ignore[attr-defined]
        ranks = [worst_rank(o, e) for o, e in zip(order, exact, strict=True)]
        print(f"{name}: scan rank holding the exact top {k}: p50 {np.percentile(ranks, 50):.0f},"
              f" p99 {np.percentile(ranks, 99):.0f}, max {max(ranks)} of {len(vectors):,}")

    for name, kind in (("4-bit scalar", faiss.ScalarQuantizer.QT_4bit), ("6-bit scalar", faiss.ScalarQuantizer.QT_6bit)):
        index = faiss.IndexScalarQuantizer(dim, kind, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.add(vectors)
        report(name, index)
    product = faiss.IndexPQFastScan(dim, 128, 4, faiss.METRIC_INNER_PRODUCT)
    product.train(vectors)
    product.add(vectors)
    report("64-byte product codes", product)
    signs = faiss.IndexBinaryFlat(dim)
    signs.add(np.packbits(vectors > 0, axis=1))
    _, order = signs.search(np.packbits(probes > 0, axis=1), len(vectors))
    ranks = [worst_rank(o, e) for o, e in zip(order, exact, strict=True)]
    print(f"sign bits: scan rank holding the exact top {k}: p50 {np.percentile(ranks, 50):.0f},"
          f" p99 {np.percentile(ranks, 99):.0f}, max {max(ranks)} of {len(vectors):,}")
    lists = 4 * int(len(vectors) ** 0.5)
    ivf = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(dim), dim, lists, faiss.ScalarQuantizer.QT_8bit,
                                        faiss.METRIC_INNER_PRODUCT)
    ivf.train(vectors)
    ivf.add(vectors)
    for share in (0.1, 0.3):
        ivf.nprobe = int(lists * share)
        _, found = ivf.search(probes, k)
        recall = np.mean([len(set(e) & set(f)) / k for e, f in zip(exact, found, strict=True)])
        print(f"IVF, {lists} lists, {share:.0%} probed: recall@{k} {recall:.3f}")


def scan_cost(rows: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    probe = rng.normal(size=dim).astype(np.float32)

    def timed(call: Callable[[], object]) -> str:
        call()
        walls, cpus = [], []
        for _ in range(7):
            started, cpu = time.perf_counter(), time.process_time()
            call()
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        return f"{np.median(walls) * 1000:.1f} ms wall, {np.median(cpus) * 1000:.1f} ms CPU"

    codes = rng.integers(-127, 128, size=(rows, dim), dtype=np.int8)
    scales = np.ones(rows, dtype=np.float32)
    int8 = timed(lambda: compact.scores(codes, scales, probe))
    print(f"scan of {rows:,} rows: int8 (SimSIMD) {int8}", flush=True)
    matrix = rng.normal(size=(rows, dim)).astype(np.float32)
    print(f"scan of {rows:,} rows: float32 (numpy) {timed(lambda: matrix @ probe)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index_db", type=Path)
    parser.add_argument("--others", action="store_true")
    parser.add_argument("--rows", type=int, default=0)
    args = parser.parse_args()
    vectors, probes = load(args.index_db)
    int8_recall(vectors, probes)
    if args.others:
        others(vectors, probes)
    if args.rows:
        scan_cost(args.rows, vectors.shape[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
