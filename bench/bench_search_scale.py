"""Hybrid search at full size over an index already built: latency (wall and CPU), RAM, recall.

    .venv/bin/python bench/bench_search_scale.py DIR/B [--cache-mb 512] [--queries 200] [--embedder local]

``DIR/B`` is workspace B of ``bench_memory.py --workdir DIR`` (97,548 chunks, ~750k entry vectors)
with its hybrid index (``HashEmbedding(512)``, no ANN index). A full ``bench_memory.py`` run
rebuilds that index three times (keyword, hybrid, ANN phases): on the shared 2-core guest one hybrid
sync of B takes ~17 minutes, so this script measures the search side alone on the index as it is.
With ``--embedder local`` the index is the bundled model's, as a user's ``membridge memory sync``
of the same files builds it with the default config (real sentence vectors: what a big block's
heads, :mod:`memory.vectors.heads`, are for), and the questions are embedded by that model. To
build it: ``common.generate_workspace(DIR, WorkspaceSpec(files=1000, chunks_per_file=100))``, a
config file holding ``workspace: DIR`` (and any ``llm`` values), then ``python -m bridge --config
FILE memory sync`` (~23 minutes on the 2-core guest); pass ``DIR`` here.

Per scope (the user scope and the big scope, each with the knowledge base): the first search
(which loads the scope's vectors into RAM), then p50/p95 of wall and CPU time (``process_time``:
what the search itself cost, whatever else the machine ran) over English queries, each scope its
own (a question is embedded as a user's would be, not taken from the query cache), and the vector
cache's bytes. Then recall@32 (20 queries) of the in-RAM vector search against LanceDB's exact scan, counted
tie-aware (nan for a scope searched in LanceDB): a hit counts when its exact similarity reaches LanceDB's 32nd (HashEmbedding gives
many rows the very same similarity, and which of the tied rows an exact search returns is arbitrary).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory import HYBRID_DIM as DIM
from bench_memory import NO_ANN, hash_embedder, tie_aware_recall
from common import WorkspaceSpec, make_queries, peak_rss_mb

from memory import EmbeddingSettings, MemoryManager, MemorySettings, Workspace, make_embedder
from memory.files.scopes import KNOWLEDGE_SCOPE

USER_SCOPE, BIG_SCOPE = "telegram-100000", "telegram-chat-1001"
TODAY = WorkspaceSpec(files=1, chunks_per_file=1).last_day.toordinal() + 1


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def timed_searches(manager: MemoryManager, scope: str, queries: list[str]) -> dict[str, float]:
    for query in queries[:5]:
        manager.search(query, scope, auto_sync=False)
    wall, cpu = [], []
    for query in queries:
        started, cpu_started = time.perf_counter(), time.process_time()
        manager.search(query, scope, auto_sync=False)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    return {"wall_p50_ms": statistics.median(wall), "wall_p95_ms": percentile(wall, 0.95),
            "cpu_p50_ms": statistics.median(cpu), "cpu_p95_ms": percentile(cpu, 0.95)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", help="workspace B of bench_memory.py --workdir, with its hybrid index")
    parser.add_argument("--cache-mb", type=int, default=MemorySettings().vector_cache_mb)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", choices=("hash", "local"), default="hash",
                        help="the model the index was built with: hash (HashEmbedding(512)) or local (the bundled model)")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    root = Path(args.root)
    if args.embedder == "hash":
        settings, embedder = MemorySettings(ann_threshold=NO_ANN, vector_cache_mb=args.cache_mb), hash_embedder()
    else:
        settings, embedder = MemorySettings(vector_cache_mb=args.cache_mb), make_embedder(EmbeddingSettings(), root / "cache")
    manager = MemoryManager(Workspace(root), settings, embedder=embedder, today=lambda: date.fromordinal(TODAY))
    pool = make_queries(2 * args.queries).english
    rows = manager.storage.entry_counts()
    result: dict[str, object] = {"root": args.root, "embedder": args.embedder, "cache_mb": args.cache_mb,
                                 "queries": args.queries,
                                 "entry_vectors": {s: rows.get(s, 0) for s in (USER_SCOPE, BIG_SCOPE, KNOWLEDGE_SCOPE)}}
    for part, (label, scope) in enumerate((("user scope", USER_SCOPE), ("big scope", BIG_SCOPE))):
        queries = pool[part * args.queries : (part + 1) * args.queries]
        started = time.perf_counter()
        manager.search(queries[-1], scope, auto_sync=False)
        first = (time.perf_counter() - started) * 1000
        figures = timed_searches(manager, scope, queries)
        cache = manager.vector_cache
        in_ram = cache is not None and cache.fits(manager.retriever.vector_rows([scope, KNOWLEDGE_SCOPE]), DIM)
        figures |= {"first_search_ms": first, "cache_mib": (cache.nbytes if cache else 0) / 2**20,
                    "recall@32": tie_aware_recall(manager, scope, queries[:20]) if in_ram else float("nan")}
        result[label] = figures
        print(f"{label}: " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()), flush=True)
    result["peak_rss_mib"] = peak_rss_mb()
    print(f"peak RSS {result['peak_rss_mib']:.0f} MiB")
    manager.close()
    out = Path(__file__).resolve().parent / "results" / f"search-scale-{date.today().isoformat()}{'-' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
