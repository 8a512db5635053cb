"""ANN index vs exact search in the LanceDB backend: latency and recall@10.

Uses a workspace that ``bench_memory.py --workdir DIR`` left behind (synced with the hash
embedder, 512 dimensions), copies its vector table, builds the IVF_PQ index the way
``LanceDBBackend.maintain`` does, and compares per-scope searches against exact (flat) search.

    .venv/bin/python bench/bench_ann.py /tmp/mbfull/A [/tmp/mbfull/B]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory import HashEmbedding, MemoryManager, MemorySettings, Workspace
from memory.files.scopes import KNOWLEDGE_SCOPE
from memory.vectors.backend import LanceDBBackend

QUERIES = ["deploy the bot with docker", "meeting notes", "Python 教程", "部署机器人", "how to cook rice",
           "travel plans for march", "猫", "budget review", "doctor appointment", "learning the cello"]


def p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def run(workspace: Path) -> None:
    embedder = HashEmbedding(dim=512, batch_size=256, model_id="hash:512")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "ws"
        shutil.copytree(workspace, copy)
        manager = MemoryManager(Workspace(copy), MemorySettings(), embedder=embedder)
        backend = manager.vectors
        assert isinstance(backend, LanceDBBackend)
        table = backend._open()
        for index in table.list_indices():
            table.drop_index(index.name)
        scopes = [r[0] for r in manager.db.query(
            "SELECT scope FROM chunks WHERE scope != ? GROUP BY scope ORDER BY count(*) DESC", (KNOWLEDGE_SCOPE,))]
        picks = {"largest scope": scopes[0], "median scope": scopes[len(scopes) // 2]}
        vectors = embedder.embed(QUERIES)
        exact: dict[tuple[str, int], list[str]] = {}
        print(f"{workspace}: {backend.count()} vectors")
        for label, scope in picks.items():
            times = []
            for i, vector in enumerate(vectors):
                started = time.perf_counter()
                exact[(scope, i)] = [cid for cid, _ in backend.search(vector, [scope, KNOWLEDGE_SCOPE], 10, exact=True)]
                times.append(time.perf_counter() - started)
            print(f"  exact, no scalar index {label:14} ({scope}, {manager.storage.count_chunks(scope)} rows): "
                  f"p50 {p50(times):6.1f} ms")
        started = time.perf_counter()
        backend._ann_threshold = 1
        backend.maintain()
        backend.wait_for_index()
        print(f"  BITMAP(scope) + IVF_PQ index built in {time.perf_counter() - started:.1f} s")
        for label, scope in picks.items():
            times, recalls = [], []
            for i, vector in enumerate(vectors):
                started = time.perf_counter()
                found = [cid for cid, _ in backend.search(vector, [scope, KNOWLEDGE_SCOPE], 10)]
                times.append(time.perf_counter() - started)
                truth = exact[(scope, i)]
                recalls.append(len(set(found) & set(truth)) / max(1, len(truth)))
            print(f"  ANN (all partitions, refine 30) {label:14}: p50 {p50(times):6.1f} ms, recall@10 {np.mean(recalls):.3f}")
            times = []
            for vector in vectors:
                started = time.perf_counter()
                backend.search(vector, [scope, KNOWLEDGE_SCOPE], 10, exact=True)
                times.append(time.perf_counter() - started)
            print(f"  exact with BITMAP(scope) {label:14}: p50 {p50(times):6.1f} ms (recall 1.0)")
        manager.close()


if __name__ == "__main__":
    for path in sys.argv[1:] or ["/tmp/mbfull/A"]:
        run(Path(path))
