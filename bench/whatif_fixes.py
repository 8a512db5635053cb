"""What the fixes proposed in bench/README.md would gain, measured by patching them in at run time.

Nothing in memory/ is changed: each variant runs in its own process, monkeypatches the proposed
change into the imported modules and measures the same operation as bench_memory.py, on a
workspace that ``bench_memory.py --workdir DIR`` left behind.

    .venv/bin/python bench/whatif_fixes.py sync   /tmp/mbfull/A    # full keyword-only sync (scratch copy)
    .venv/bin/python bench/whatif_fixes.py resync /tmp/mbfull/B    # hybrid no-change re-sync, disk check
    .venv/bin/python bench/whatif_fixes.py search /tmp/mbfull/B    # hybrid search p50/p95

The patches are sketches of the fixes, good enough to measure them, not the code to ship.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import make_queries, percentile  # noqa: E402

import numpy as np  # noqa: E402

from memory import HashEmbedding, MemoryManager, MemorySettings, Workspace  # noqa: E402
from memory import manager as manager_module  # noqa: E402
from memory import storage as storage_module  # noqa: E402
from memory.keyword import segment  # noqa: E402
from memory.vectors import LanceDBBackend  # noqa: E402

BIG_SCOPE = "telegram-chat-1001"
USER_SCOPE = "telegram-100000"

VARIANTS = {
    "sync": ["as-is", "deferred-fts", "deferred-fts+no-trigram"],
    "resync": ["as-is", "range-sql", "scandir-walk", "range-sql+scandir-walk"],
    "search": ["as-is", "scope-unindexed", "scope-unindexed+in-memory-vectors"],
}


# ------------------------------------------------------------------ patches
def in_tree(function: object, marker: str) -> bool:
    """True when the tree's own code already contains a fix (its source has ``marker``)."""
    try:
        return marker in inspect.getsource(function)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False


def tree_buffers_fts() -> bool:
    return hasattr(storage_module.IndexStorage, "write")


def patch_no_trigram_in_tree() -> None:
    """For a tree that already buffers FTS writes (``IndexStorage.write``): leave ``chunks_tri`` out."""

    def flush(self: Any, conn: Any) -> None:
        deletes, inserts = self._fts_deletes or [], self._fts_inserts or []
        conn.executemany("INSERT INTO chunks_fts (chunks_fts, rowid, scope_tag, seg) VALUES ('delete', ?, ?, ?)",
                         [(r, t, segment(x)) for r, t, x in deletes])
        conn.executemany("INSERT INTO chunks_fts (rowid, scope_tag, seg) VALUES (?, ?, ?)",
                         [(r, t, segment(x)) for r, t, x in inserts])

    storage_module.IndexStorage._flush_fts = flush  # type: ignore[attr-defined,method-assign]


def patch_deferred_fts(with_trigram: bool) -> None:
    """Fix 1: write every ``chunks`` row first, then all FTS5 rows in bulk, in the same transaction.

    FTS5 flushes its pending terms at every statement savepoint; interleaving a ``chunks`` UPSERT
    (which opens one) after each FTS insert turns one bulk write into one tiny segment per chunk.
    """
    pending: list[tuple[str, int, str, str]] = []

    def fts_insert(_conn: Any, rowid: int, tag: str, text: str) -> None:
        pending.append(("insert", rowid, tag, text))

    def fts_delete(_conn: Any, rowid: int, tag: str, text: str) -> None:
        pending.append(("delete", rowid, tag, text))

    original = storage_module.Database.transaction

    @contextmanager
    def transaction(self: storage_module.Database) -> Iterator[Any]:
        with original(self) as conn:
            yield conn
            if pending:
                deletes = [(r, t, x) for kind, r, t, x in pending if kind == "delete"]
                inserts = [(r, t, x) for kind, r, t, x in pending if kind == "insert"]
                pending.clear()
                conn.executemany("INSERT INTO chunks_fts (chunks_fts, rowid, scope_tag, seg) VALUES ('delete', ?, ?, ?)",
                                 [(r, t, segment(x)) for r, t, x in deletes])
                conn.executemany("INSERT INTO chunks_tri (chunks_tri, rowid, text) VALUES ('delete', ?, ?)",
                                 [(r, x) for r, _t, x in deletes])
                conn.executemany("INSERT INTO chunks_fts (rowid, scope_tag, seg) VALUES (?, ?, ?)",
                                 [(r, t, segment(x)) for r, t, x in inserts])
                if with_trigram:
                    conn.executemany("INSERT INTO chunks_tri (rowid, text) VALUES (?, ?)", [(r, x) for r, _t, x in inserts])

    storage_module.IndexStorage._fts_insert = staticmethod(fts_insert)  # type: ignore[method-assign,assignment]
    storage_module.IndexStorage._fts_delete = staticmethod(fts_delete)  # type: ignore[method-assign,assignment]
    storage_module.Database.transaction = transaction  # type: ignore[method-assign,assignment]


def patch_range_sql() -> None:
    """Fix 2: ``vec_model != ?`` cannot use ``chunks_vec_model``; ``< ? OR > ?`` can (MULTI-INDEX OR)."""

    def chunks_needing_vectors(self: storage_module.IndexStorage, model: str,
                               scope: str | None = None) -> list[tuple[str, str, str, str, str]]:
        sql = ("SELECT id, scope, path, text, text_hash FROM chunks"
               " WHERE (vec_model IS NULL OR vec_model < ? OR vec_model > ?)")
        params: tuple[object, ...] = (model, model)
        if scope is not None:
            sql += " AND scope = ?"
            params += (scope,)
        return [tuple(row) for row in self.db.query(sql, params)]  # type: ignore[misc]

    storage_module.IndexStorage.chunks_needing_vectors = chunks_needing_vectors  # type: ignore[method-assign]


def patch_scandir_walk() -> None:
    """Fix 3: walk with ``os.scandir`` (d_type answers is_dir/is_symlink; strings, not PurePaths)."""

    def walk(self: MemoryManager, scope: str, top: Path, relative_to: Path, *,
             skip_dirs: set[str] = frozenset(), skip_files: set[str] = frozenset()) -> Iterator[Any]:  # type: ignore[assignment]
        prefix = len(os.fspath(relative_to)) + 1
        start = os.fspath(top)
        if not os.path.isdir(start):
            return
        stack: list[tuple[str, bool]] = [(start, True)]
        while stack:
            directory, at_top = stack.pop()
            try:
                entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
            except OSError:
                continue
            subdirs: list[str] = []
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if not (at_top and name in skip_dirs):
                        subdirs.append(entry.path)
                    continue
                if not name.endswith(".md") or (at_top and name in skip_files) or entry.is_symlink():
                    continue
                stat = entry.stat()
                yield manager_module._DiskFile(scope, entry.path[prefix:].replace(os.sep, "/"), Path(entry.path),
                                               stat.st_mtime, stat.st_size)
            stack.extend((path, False) for path in reversed(subdirs))

    manager_module.MemoryManager._walk = walk  # type: ignore[method-assign,assignment]


def patch_scope_unindexed() -> None:
    """Fix 4: ``+c.scope`` keeps the planner on the id index instead of scanning a whole scope."""

    def chunks_by_ids(self: storage_module.IndexStorage, ids: Sequence[str],
                      scopes: Sequence[str]) -> dict[str, storage_module.StoredChunk]:
        found: dict[str, storage_module.StoredChunk] = {}
        marks = ",".join("?" * len(scopes))
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            rows = self.db.query(
                f"SELECT {storage_module._CHUNK_COLUMNS} FROM chunks c WHERE c.id IN ({','.join('?' * len(batch))})"
                f" AND +c.scope IN ({marks})",
                (*batch, *scopes),
            )
            for row in rows:
                found[row[1]] = storage_module._stored(row)
        return found

    storage_module.IndexStorage.chunks_by_ids = chunks_by_ids  # type: ignore[method-assign]


class InMemoryExactBackend(LanceDBBackend):
    """Fix 5 (sketch): exact cosine over per-scope float32 blocks held in RAM; LanceDB stays the store.

    Loaded once here; the real thing would apply upserts/deletes to the blocks as it writes them.
    """

    _ids: np.ndarray
    _rows: dict[str, np.ndarray]
    _blocks: dict[str, np.ndarray]
    loaded_seconds: float = 0.0
    resident_mb: float = 0.0

    def load(self) -> None:
        started = time.perf_counter()
        table = self._open()
        assert table is not None
        data = table.to_arrow()
        self._ids = np.array(data.column("id").to_pylist(), dtype=object)
        width = data.schema.field("vector").type.list_size
        matrix = data.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, width).astype(np.float32)
        by_scope: dict[str, list[int]] = {}
        for index, scope in enumerate(data.column("scope").to_pylist()):
            by_scope.setdefault(scope, []).append(index)
        self._rows = {scope: np.array(rows, dtype=np.int64) for scope, rows in by_scope.items()}
        self._blocks = {scope: np.ascontiguousarray(matrix[rows]) for scope, rows in self._rows.items()}
        self.loaded_seconds = time.perf_counter() - started
        self.resident_mb = sum(block.nbytes for block in self._blocks.values()) / 2**20

    def search(self, vector: np.ndarray, scopes: Sequence[str], limit: int,
               **_options: Any) -> list[tuple[str, float]]:  # always exact; later trees pass exact=
        query = vector.astype(np.float32)
        ids: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        for scope in scopes:
            block = self._blocks.get(scope)
            if block is None or not len(block):
                continue
            similarity = block @ query
            k = min(limit, len(similarity))
            top = np.argpartition(-similarity, k - 1)[:k]
            ids.append(self._ids[self._rows[scope][top]])
            scores.append(similarity[top])
        if not ids:
            return []
        all_ids = np.concatenate(ids)
        all_scores = np.concatenate(scores)
        order = np.argsort(-all_scores)[:limit]
        return [(str(all_ids[i]), float(all_scores[i])) for i in order]


# ------------------------------------------------------------- measurements
def hybrid_manager(root: Path, vectors: LanceDBBackend | None = None) -> MemoryManager:
    embedder = HashEmbedding(dim=512, batch_size=256, model_id="hash:512")
    return MemoryManager(Workspace(root), MemorySettings(), embedder=embedder, vectors=vectors,
                         today=lambda: date(2026, 12, 1))


def median_ms(call: Any, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def run_sync(root: Path, variant: str) -> str:
    note = ""
    if variant != "as-is":
        if tree_buffers_fts():
            note = " [FTS buffering already in this tree]"
            if "no-trigram" in variant:
                patch_no_trigram_in_tree()
        else:
            patch_deferred_fts(with_trigram="no-trigram" not in variant)
    scratch = Path(tempfile.mkdtemp(prefix="membridge-whatif-"))
    try:
        for sub in ("scopes", "knowledge"):
            shutil.copytree(root / sub, scratch / sub, copy_function=shutil.copy2)
        manager = MemoryManager(Workspace(scratch), MemorySettings(), embedder=None, today=lambda: date(2026, 12, 1))
        started = time.perf_counter()
        report = manager.sync()
        seconds = time.perf_counter() - started
        chunks = manager.storage.count_chunks()
        manager.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return f"full keyword-only sync {seconds:6.2f} s ({report.files_scanned} files, {chunks:,} chunks){note}"


def run_resync(root: Path, variant: str) -> str:
    note = ""
    if "range-sql" in variant:
        if in_tree(storage_module.IndexStorage.chunks_needing_vectors, "vec_model <"):
            note = " [range SQL already in this tree]"
        else:
            patch_range_sql()
    if "scandir-walk" in variant:
        patch_scandir_walk()
    manager = hybrid_manager(root)
    manager.sync()
    resync = median_ms(manager.sync, 7)
    big = median_ms(lambda: manager._disk_changed(BIG_SCOPE), 20)  # noqa: SLF001
    user = median_ms(lambda: manager._disk_changed(USER_SCOPE), 20)  # noqa: SLF001
    files = len(manager._disk_files(None)[0])  # noqa: SLF001
    manager.close()
    return (f"no-change hybrid re-sync {resync:6.1f} ms | disk check big scope {big:5.1f} ms,"
            f" user scope {user:4.1f} ms ({files} files){note}")


def run_search(root: Path, variant: str, n_queries: int) -> str:
    note = ""
    if "scope-unindexed" in variant:
        if in_tree(storage_module.IndexStorage.chunks_by_ids, "+c.scope"):
            note = "[+c.scope already in this tree] "
        else:
            patch_scope_unindexed()
    vectors: InMemoryExactBackend | None = None
    if "in-memory" in variant:
        vectors = InMemoryExactBackend(root / "vectors", "hash:512")
        vectors.load()
    manager = hybrid_manager(root, vectors)
    queries = make_queries(n_queries)
    parts: list[str] = []
    for scope_label, scope in (("user", USER_SCOPE), ("big", BIG_SCOPE)):
        for kind in ("english", "mixed"):
            batch: list[str] = getattr(queries, kind)
            for query in batch[:5]:
                manager.search(query, scope, auto_sync=False)
            samples = []
            for query in batch:
                started = time.perf_counter()
                manager.search(query, scope, auto_sync=False)
                samples.append((time.perf_counter() - started) * 1000)
            parts.append(f"{scope_label}/{kind} p50 {percentile(samples, 50):5.1f} p95 {percentile(samples, 95):5.1f} ms")
    manager.close()
    if vectors is not None:
        parts.append(f"(matrix {vectors.resident_mb:.0f} MiB, loaded in {vectors.loaded_seconds:.1f} s)")
    return note + " | ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=sorted(VARIANTS))
    parser.add_argument("workspace", type=Path, help="a workspace left by bench_memory.py --workdir (A or B)")
    parser.add_argument("--variant", help="run one variant in this process (used internally)")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    if args.variant is None:
        for variant in VARIANTS[args.what]:
            command = [sys.executable, __file__, args.what, str(args.workspace), "--variant", variant,
                       "--queries", str(args.queries)]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            line = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr.strip()[-500:]
            print(f"{variant:36s} {line}", flush=True)
        return 0
    if args.what == "sync":
        print(run_sync(args.workspace, args.variant))
    elif args.what == "resync":
        print(run_resync(args.workspace, args.variant))
    else:
        print(run_search(args.workspace, args.variant, args.queries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
