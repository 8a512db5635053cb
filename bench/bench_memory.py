"""Memory index benchmark: sync and search at 10,000 and 100,000 chunks.

    .venv/bin/python bench/bench_memory.py            # full size (several minutes)
    .venv/bin/python bench/bench_memory.py --quick    # 10x smaller, under a minute

Workspace A is 1,000 files of ~10 chunks (~10k chunks); workspace B is 1,000 files of ~100 chunks
(~100k chunks). Each is indexed twice from scratch: keyword-only (``embedding.provider: none``) and
hybrid with :class:`HashEmbedding` (dim 512, batches of 256, the real local model's shape) so the
figures are the index's own cost, not a model's. Latency loops call ``search(auto_sync=False)``;
the cost of the default path's periodic on-disk change check is measured on its own.

Prints a table and writes the figures as JSON to ``bench/results/memory-<date>[-quick].json``.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    GeneratedWorkspace,
    Latency,
    QuerySets,
    Report,
    WorkspaceSpec,
    directory_size_mb,
    generate_workspace,
    machine_info,
    make_queries,
    measure,
    peak_rss_mb,
    source_fingerprint,
    timed,
)

from memory import HashEmbedding, LanceDBBackend, MemoryManager, MemorySettings, Workspace
from memory.files.scopes import KNOWLEDGE_SCOPE
from memory.manager import append_text

HYBRID_DIM = 512
HYBRID_BATCH = 256
NO_ANN = 10**12  # an ann_threshold no table reaches: brute-force vector search

TARGET_HYBRID_P50_MS = 20.0
TARGET_KEYWORD_P50_MS = 5.0
TARGET_CJK2_P50_MS = 10.0
TARGET_RESYNC_S = 0.100
TARGET_KEYWORD_SYNC_S = 1.0


def hash_embedder() -> HashEmbedding:
    return HashEmbedding(dim=HYBRID_DIM, batch_size=HYBRID_BATCH, model_id=f"hash:{HYBRID_DIM}")


def open_manager(ws: GeneratedWorkspace, embedder: HashEmbedding | None, ann_threshold: int,
                 vector_cache_mb: int = MemorySettings().vector_cache_mb) -> MemoryManager:
    """A manager as the bot opens one; ``vector_cache_mb=0`` sends vector search to LanceDB."""
    settings = MemorySettings(ann_threshold=max(256, ann_threshold), vector_cache_mb=vector_cache_mb)
    return MemoryManager(Workspace(ws.root), settings, embedder=embedder, today=lambda: ws.today)


def reset_index(root: Path) -> None:
    """Drop the index (SQLite and LanceDB), keep the markdown files."""
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (root / name).unlink(missing_ok=True)
    shutil.rmtree(root / "vectors", ignore_errors=True)


def repeated(call: Any, times: int) -> list[float]:
    out: list[float] = []
    for _ in range(times):
        seconds, _result = timed(call)
        out.append(seconds)
    return out


def ann_index_present(backend: LanceDBBackend) -> bool:
    """True when the table has a vector index (a scalar index on ``scope`` does not count)."""
    table = backend._open()
    try:
        indices = table.list_indices() if table is not None else []
    except Exception:
        return False
    return any("vector" in list(getattr(index, "columns", [])) for index in indices)


def wait_for_ann_index(backend: LanceDBBackend, timeout_s: float = 900.0) -> bool:
    """Poll until the table has an index (a background build finishes) or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ann_index_present(backend):
            return True
        time.sleep(0.25)
    return ann_index_present(backend)


def tie_aware_recall(manager: MemoryManager, scope: str, queries: list[str], depth: int = 32) -> float:
    """Share of LanceDB's exact top ``depth`` (scope + knowledge) that the in-RAM search matches: a
    hit counts when its similarity reaches LanceDB's last. HashEmbedding gives many rows the very
    same similarity, and which of the tied rows an exact search returns is arbitrary."""
    assert manager.vectors is not None and manager.vector_cache is not None
    scopes = [scope, KNOWLEDGE_SCOPE]
    shares = []
    for query in queries:
        vector = manager.retriever._query_vector(query)
        assert vector is not None
        exact = manager.vectors.search(vector, scopes, depth, exact=True)
        ram = manager.vector_cache.search(vector, scopes, depth, manager.embed_cache.generations(scopes)) or []
        floor = exact[-1][1] - 1e-5 if exact else 0.0
        shares.append(sum(1 for _, score in ram if score >= floor) / max(1, len(exact)))
    return statistics.fmean(shares)


class MemoryBench:
    def __init__(self, report: Report, queries: QuerySets, *, resync_repeats: int) -> None:
        self.report = report
        self.queries = queries
        self.resync_repeats = resync_repeats

    # ----------------------------------------------------------------- helpers
    def search_loop(self, section: str, label: str, manager: MemoryManager, scope: str, queries: list[str],
                    *, target: float | None = None, auto_sync: bool = False) -> Latency:
        def call(query: str) -> int:
            return len(manager.search(query, scope, auto_sync=auto_sync))

        latency, hits = measure(queries, call)
        latency.extra["mean_results"] = statistics.fmean(hits) if hits else 0.0
        latency.extra["empty_results"] = sum(1 for h in hits if h == 0)
        self.report.details.setdefault(section, {})[label] = latency.to_dict()
        self.report.add(section, f"{label} p50", latency.p50_ms, "ms", target=target,
                        note=f"n={latency.n}, mean results {latency.extra['mean_results']:.1f}")
        self.report.add(section, f"{label} p95", latency.p95_ms, "ms")
        return latency

    def count_rows(self, manager: MemoryManager, scope: str) -> int:
        return manager.storage.count_chunks(scope) + manager.storage.count_chunks(KNOWLEDGE_SCOPE)

    def one_file_change(self, section: str, label: str, manager: MemoryManager, ws: GeneratedWorkspace,
                        text: str) -> None:
        """Append a line to the newest daily file of the big scope, then sync that scope."""
        target = ws.daily_files[ws.big_scope][0]
        append_text(target, text)
        seconds, report = timed(lambda: manager.indexer.sync(ws.big_scope))
        self.report.add(section, f"{label}: 1 file changed, sync(big scope)", seconds * 1000, "ms",
                        note=f"chunks written {report.chunks_written}, vectors {report.vectors_written}")

    # ------------------------------------------------------------ keyword side
    def keyword_phase(self, section: str, ws: GeneratedWorkspace, *, searches: bool, target_sync: bool,
                      search_targets: bool) -> None:
        reset_index(ws.root)
        manager = open_manager(ws, None, NO_ANN)
        seconds, sync = timed(manager.indexer.sync)
        chunks = manager.storage.count_chunks()
        self.report.details.setdefault(section, {})["keyword_full_sync"] = {
            "seconds": seconds, "files": sync.files_scanned, "chunks": chunks,
            "db_mb": directory_size_mb(ws.root / "index.db") if (ws.root / "index.db").exists() else 0.0,
        }
        self.report.add(section, f"full sync keyword-only ({sync.files_scanned} files, {chunks:,} chunks)", seconds,
                        "s", target=TARGET_KEYWORD_SYNC_S if target_sync else None,
                        note="searchable; the trigram index fills in the background")
        self.trigram_complete(section, manager, seconds)
        times = repeated(manager.indexer.sync, self.resync_repeats)
        self.report.add(section, "no-change re-sync keyword-only (median)", statistics.median(times) * 1000, "ms",
                        target=TARGET_RESYNC_S * 1000, note=f"{self.resync_repeats} runs, min {min(times) * 1000:.1f} ms")
        if searches:
            self.keyword_searches(section, ws, manager, search_targets)
        self.auto_sync_cost(section, ws, manager)
        self.one_file_change(section, "keyword-only", manager, ws, "- 21:00 appended keyword benchmark line 教程.")
        self.report.add(section, "peak RSS after keyword phase", peak_rss_mb(), "MiB")
        manager.close()

    def trigram_complete(self, section: str, manager: MemoryManager, sync_seconds: float) -> None:
        """Wait for the background trigram fill a full sync starts, so later figures see a whole index."""
        fill_seconds, _ = timed(manager.indexer.finish_indexing)
        self.report.add(section, "  trigram index complete (from the start of the sync)", sync_seconds + fill_seconds,
                        "s", note=f"{fill_seconds:.2f} s after sync() returned")

    def keyword_searches(self, section: str, ws: GeneratedWorkspace, manager: MemoryManager, targets: bool) -> None:
        q = self.queries
        for scope_label, scope in (("user scope", ws.user_scope), ("big scope", ws.big_scope)):
            rows = self.count_rows(manager, scope)
            self.report.details.setdefault(section, {})[f"rows searched ({scope_label})"] = rows
            prefix = f"keyword-only {scope_label} ({rows:,} chunks incl. knowledge)"
            self.search_loop(section, f"{prefix} English", manager, scope, q.english,
                             target=TARGET_KEYWORD_P50_MS if targets else None)
            self.search_loop(section, f"{prefix} 2-char CJK", manager, scope, q.cjk2,
                             target=TARGET_CJK2_P50_MS if targets else None)
            self.search_loop(section, f"{prefix} 1-char CJK", manager, scope, q.cjk1)
            self.search_loop(section, f"{prefix} mixed 'Python 教程'", manager, scope, q.mixed)

    def auto_sync_cost(self, section: str, ws: GeneratedWorkspace, manager: MemoryManager) -> None:
        """The default search path checks the disk for changes at most every 2 s per scope."""
        for scope_label, scope in (("user scope", ws.user_scope), ("big scope", ws.big_scope)):
            times = repeated(lambda scope=scope: manager.indexer._disk_changed(scope), 20)
            files = len(manager.indexer.scanner.files(scope)[0])
            self.report.add(section, f"auto_sync disk check, {scope_label} ({files} files incl. knowledge), median",
                            statistics.median(times) * 1000, "ms")
        # The same check as the search path pays it: auto_sync=True with the 2 s window expired.
        query = self.queries.english[0]
        scope = ws.big_scope

        def forced(_: object) -> int:
            manager.indexer._last_disk_check.clear()
            return len(manager.search(query, scope, auto_sync=True))

        with_check, _ = measure(list(range(20)), forced, warmup=2)
        without, _ = measure(list(range(20)), lambda _: len(manager.search(query, scope, auto_sync=False)), warmup=2)
        self.report.add(section, "search auto_sync=True, check due (big scope) p50", with_check.p50_ms, "ms",
                        note=f"same query with auto_sync=False: {without.p50_ms:.2f} ms")
        self.report.add(section, "search auto_sync=False, same query (big scope) p50", without.p50_ms, "ms")

    # ------------------------------------------------------------- hybrid side
    def hybrid_phase(self, section: str, ws: GeneratedWorkspace, *, searches: bool, ann: bool,
                     search_targets: bool) -> None:
        reset_index(ws.root)
        embedder = hash_embedder()
        manager = open_manager(ws, embedder, NO_ANN)
        seconds, sync = timed(manager.indexer.sync)
        chunks = manager.storage.count_chunks()
        self.report.details.setdefault(section, {})["hybrid_full_sync"] = {
            "seconds": seconds, "files": sync.files_scanned, "chunks": chunks, "embed_calls": sync.embed_calls,
            "embedder_calls": embedder.calls, "vectors_written": sync.vectors_written,
            "vectors_mb": directory_size_mb(ws.root / "vectors"),
            "db_mb": directory_size_mb(ws.root / "index.db") if (ws.root / "index.db").exists() else 0.0,
        }
        self.report.add(section, f"full sync hybrid HashEmbedding(512) ({chunks:,} chunks, no ANN build)", seconds, "s",
                        note=f"{sync.embed_calls} embed calls")
        self.report.add(section, "  embedding calls in full hybrid sync", float(sync.embed_calls), "calls",
                        note=f"batch {HYBRID_BATCH}; {sync.vectors_written} vectors written")
        self.trigram_complete(section, manager, seconds)
        times = repeated(manager.indexer.sync, self.resync_repeats)
        self.report.add(section, "no-change re-sync hybrid (median)", statistics.median(times) * 1000, "ms",
                        target=TARGET_RESYNC_S * 1000, note=f"{self.resync_repeats} runs, embed calls {embedder.calls - sync.embed_calls}")
        if searches:
            self.first_searches(section, ws, embedder)
            self.hybrid_searches(section, ws, manager, "vectors in RAM (default)", search_targets)
            self.ram_recall(section, ws, manager)
            lance = open_manager(ws, embedder, NO_ANN, vector_cache_mb=0)
            try:
                self.hybrid_searches(section, ws, lance, "LanceDB exact scan", False)
            finally:
                lance.close()
        if ann:
            self.ann_phase(section, ws, manager, embedder, search_targets)
        self.one_file_change(section, "hybrid" + (" (ANN index present)" if ann else ""), manager, ws,
                             "- 21:05 appended hybrid benchmark line about Python 教程.")
        self.report.add(section, "peak RSS after hybrid phase", peak_rss_mb(), "MiB")
        manager.close()

    def hybrid_searches(self, section: str, ws: GeneratedWorkspace, manager: MemoryManager, mode: str,
                        targets: bool) -> None:
        q = self.queries
        for scope_label, scope in (("user scope", ws.user_scope), ("big scope", ws.big_scope)):
            prefix = f"hybrid {mode} {scope_label}"
            self.search_loop(section, f"{prefix} English", manager, scope, q.english,
                             target=TARGET_HYBRID_P50_MS if targets else None)
            self.search_loop(section, f"{prefix} 2-char CJK", manager, scope, q.cjk2)
            self.search_loop(section, f"{prefix} mixed 'Python 教程'", manager, scope, q.mixed)

    def first_searches(self, section: str, ws: GeneratedWorkspace, embedder: HashEmbedding) -> None:
        """A fresh manager's first search of a scope loads its vectors (and knowledge's) into RAM."""
        fresh = open_manager(ws, embedder, NO_ANN)
        try:
            for scope_label, scope in (("user scope", ws.user_scope), ("big scope", ws.big_scope)):
                seconds, _ = timed(lambda scope=scope: fresh.search(self.queries.english[-1], scope, auto_sync=False))
                self.report.add(section, f"first hybrid search, {scope_label} (loads its vectors into RAM)",
                                seconds * 1000, "ms")
        finally:
            fresh.close()

    def ram_recall(self, section: str, ws: GeneratedWorkspace, manager: MemoryManager) -> None:
        """The in-RAM search must return what LanceDB's exact scan returns (recall 1.0, ties aside)."""
        recall = tie_aware_recall(manager, ws.big_scope, self.queries.english[:50])
        self.report.add(section, "in-RAM vector search recall@32 vs LanceDB exact (big scope)", recall, "ratio",
                        note="a hit counts when its similarity reaches LanceDB's 32nd (HashEmbedding ties)")

    def ann_phase(self, section: str, ws: GeneratedWorkspace, manager: MemoryManager, embedder: HashEmbedding,
                  targets: bool) -> None:
        assert manager.vectors is not None
        probe = self.queries.english[:50]
        scopes = [ws.big_scope, KNOWLEDGE_SCOPE]
        vectors = [embedder.embed([query])[0] for query in probe]
        brute = [{cid for cid, _ in manager.vectors.search(v, scopes, 32, exact=True)} for v in vectors]
        # A second backend over the same table with a threshold it passes: the same maintain() a
        # sync runs (with the default ann_threshold=20000 a sync past it builds it in a background thread).
        builder = LanceDBBackend(ws.root / "vectors", embedder.model_id, ann_threshold=256)
        present_before = ann_index_present(builder)
        started = time.perf_counter()
        builder.maintain()
        returned = time.perf_counter() - started
        ready = wait_for_ann_index(builder)  # maintain() may build it in a background thread
        seconds = time.perf_counter() - started
        self.report.details.setdefault(section, {})["ann_build"] = {
            "maintain_returned_after_s": returned, "index_ready_after_s": seconds, "index_present": ready,
            "index_present_before": present_before}
        if not ready:
            print("  WARNING: no ANN index after maintain(); the 'ANN' loops below are brute force", flush=True)
        self.report.add(section, "ANN index build (IVF_PQ via maintain(), until the index exists)", seconds, "s",
                        note=f"{manager.vectors.count():,} vectors; maintain() returned after {returned:.2f} s;"
                             f" index present: {ready}")
        approx = [{cid for cid, _ in manager.vectors.search(v, scopes, 32)} for v in vectors]
        recall = statistics.fmean(len(a & b) / max(1, len(b)) for a, b in zip(approx, brute, strict=True))
        self.report.add(section, "LanceDB IVF_PQ recall@32 vs exact (big scope)", recall, "ratio")
        # A manager whose own ann_threshold the table passes, so that a tree which picks an exact
        # scan below the threshold takes the ANN path here.
        ann_manager = open_manager(ws, embedder, 256, vector_cache_mb=0)
        try:
            self.hybrid_searches(section, ws, ann_manager, "LanceDB IVF_PQ", False)
        finally:
            ann_manager.close()


def run(args: argparse.Namespace) -> int:
    scale = 10 if args.quick else 1
    n_queries = 50 if args.quick else max(200, args.queries)
    report = Report("membridge memory benchmark" + (" (quick)" if args.quick else ""))
    info = machine_info()
    sources = source_fingerprint()  # taken at start: the modules were imported just before
    print(f"machine: {info}", flush=True)
    queries = make_queries(n_queries)
    bench = MemoryBench(report, queries, resync_repeats=5)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="membridge-bench-"))
    started = time.perf_counter()
    try:
        if not args.only or args.only == "A":
            spec_a = WorkspaceSpec(files=1000 // scale, chunks_per_file=10)
            ws_a = generate_workspace(workdir / "A", spec_a)
            section = f"A: {ws_a.files} files x ~10 chunks"
            print(f"\n== {section} (generated in {ws_a.seconds:.1f} s, {ws_a.chars / 1e6:.1f} M chars)", flush=True)
            bench.keyword_phase(section, ws_a, searches=True, target_sync=True, search_targets=False)
            bench.hybrid_phase(section, ws_a, searches=True, ann=False, search_targets=False)
            gc.collect()
        if not args.only or args.only == "B":
            spec_b = WorkspaceSpec(files=1000 // scale, chunks_per_file=100)
            ws_b = generate_workspace(workdir / "B", spec_b)
            section = f"B: {ws_b.files} files x ~100 chunks"
            print(f"\n== {section} (generated in {ws_b.seconds:.1f} s, {ws_b.chars / 1e6:.1f} M chars)", flush=True)
            bench.keyword_phase(section, ws_b, searches=True, target_sync=True, search_targets=True)
            bench.hybrid_phase(section, ws_b, searches=True, ann=True, search_targets=True)
        report.add("process", "peak RSS (whole run)", peak_rss_mb(), "MiB")
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print("\n" + report.table())
    failed = [f for f in report.figures if f.verdict == "FAIL"]
    passed = [f for f in report.figures if f.verdict == "PASS"]
    print(f"\ntargets: {len(passed)} PASS, {len(failed)} FAIL; run took {elapsed:.0f} s")
    out = Path(__file__).resolve().parent / "results" / f"memory-{date.today().isoformat()}{'-quick' if args.quick else ''}{'-' + args.only if args.only else ''}{'-' + args.tag if args.tag else ''}.json"
    report.write_json(out, {"machine": info, "quick": args.quick, "queries_per_loop": n_queries,
                            "elapsed_s": elapsed, "workdir": str(workdir),
                            "sources": sources})
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10x smaller workspaces, 50 queries per loop")
    parser.add_argument("--queries", type=int, default=200, help="queries per latency loop (at least 200)")
    parser.add_argument("--only", choices=("A", "B"), help="run one workspace")
    parser.add_argument("--workdir", help="generate the workspaces here and keep them (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--tag", help="suffix of the results file name")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
