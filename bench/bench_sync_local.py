"""Full sync with the real local model against the model alone, and the model's query latency.

    .venv/bin/python bench/bench_sync_local.py sync [--rounds 2] [--chunks-per-file 3] [--workdir DIR]
    .venv/bin/python bench/bench_sync_local.py query [--calls 200]

``sync`` checks the target "full local-model sync of a 1,000-file workspace <= 1.15 x the time the
embedder alone takes on the same texts" (issue 14). It writes a 1,000-file workspace with
``common.generate_workspace`` and a ``config.yaml`` holding only ``workspace:`` (everything else
default: ``embedding.provider: local``, USE v3, batches of 256, chunks of 800 characters with 2
overlap lines), then times, alternately, ``--rounds`` times each, two fresh processes:

* **embedder alone** (this script's internal ``_embed`` command): read every file the sync
  indexes, in the sync's walk order, chunk it with ``memory.chunker.chunk_text`` (800 / 2), keep one
  entry text per sha256 as the sync does (:mod:`memory.index.entries`), sort them by length as the sync's
  ``_embed`` does (so the batches are the sync's own) and embed them with ``LocalEmbedding`` in batches
  of its ``max_batch``; model load included (timed apart, with a one-word call);
* **sync**: ``membridge --config <cfg> memory sync --json`` on a fresh index (``index.db*`` and
  ``vectors/`` deleted first), from process start until it exits (trigram index filled: the CLI
  waits for it).

Both are wall clock measured by this (parent) process around the child, so both include Python's
start, imports and the model load. The ratio is sync / embedder of the same round. The child's own
phase times and the sync's ``--json`` report are printed too. ``--order file`` embeds in walk order
instead (what a sync that did not sort by length would pay); ``--embed-only`` skips the syncs.

``query`` times ``LocalEmbedding.embed_query`` on the 100 questions of ``data/bilingual.json``
(English and Chinese, placeholders filled for today) asked twice: 200 single-question calls after
5 warm-up calls and the model load; p50 / p95 overall and per language.

Results: ``bench/results/sync-local-<date>[-tag].json`` / ``query-local-<date>[-tag].json``, with the
machine, ``/proc/loadavg`` before and after every timed process (other work may share the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for _path in (str(REPO), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

TARGET_RATIO = 1.15
RESULTS = BENCH / "results"
DEFAULT_WORKDIR = Path("/tmp/membridge-bench/sync-local")


# ------------------------------------------------------------------ the embed-only child
def walk_files(root: Path) -> Iterator[Path]:
    """The files a full sync indexes, in its order: knowledge, then each scope's MEMORY.md and memory/."""
    yield from _walk(root / "knowledge", skip_files=frozenset({"log.md", "index.md"}))
    scopes = root / "scopes"
    for scope in sorted(p for p in scopes.iterdir() if p.is_dir()) if scopes.is_dir() else []:
        if (scope / "MEMORY.md").is_file():
            yield scope / "MEMORY.md"
        yield from _walk(scope / "memory", skip_dirs=frozenset({"dreams"}))


def _walk(top: Path, *, skip_dirs: frozenset[str] = frozenset(), skip_files: frozenset[str] = frozenset()) -> Iterator[Path]:
    """``memory.index.scan._walk``'s order: sorted folders and names, no dot-entries, skips at the top only."""
    if not top.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(top):
        at_top = Path(dirpath) == top
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (at_top and d in skip_dirs))
        for name in sorted(filenames):
            if name.endswith(".md") and not name.startswith(".") and not (at_top and name in skip_files):
                yield Path(dirpath) / name


def unique_texts(root: Path, max_chars: int, overlap: int) -> tuple[int, int, dict[str, str]]:
    """(files, chunks, embedded text by sha256 in first-seen order): every entry of every chunk,
    chunked and split as the sync does (an entry two chunks share is one text)."""
    from memory.files.files import read_text
    from memory.index.chunker import chunk_text
    from memory.index.entries import chunk_entries

    files = chunks = 0
    texts: dict[str, str] = {}
    for path in walk_files(root):
        files += 1
        for chunk in chunk_text(read_text(path), scope="s", path=path.name, max_chars=max_chars, overlap_lines=overlap):
            chunks += 1
            for entry in chunk_entries(chunk):
                texts.setdefault(entry.text_hash, entry.embedded_text)
    return files, chunks, texts


def embed_child(args: argparse.Namespace) -> int:
    """``_embed``: chunk, dedupe, (sort,) embed; print the phase times as JSON."""
    started = time.perf_counter()
    from memory.vectors.embedding import LocalEmbedding

    imported = time.perf_counter()
    files, chunks, texts = unique_texts(Path(args.workspace), args.max_chars, args.overlap)
    ordered = sorted(texts.values(), key=len) if args.order == "length" else list(texts.values())
    chunked = time.perf_counter()
    embedder = LocalEmbedding(batch_size=args.batch)
    embedder.embed(["load"])  # the model loads on first use: timed apart from the texts
    loaded = time.perf_counter()
    vectors, calls = embedder.embed_all(ordered)
    done = time.perf_counter()
    json.dump({"files": files, "chunks": chunks, "texts": len(ordered), "calls": calls, "dim": int(vectors.shape[1]),
               "chars": sum(map(len, ordered)), "import_s": imported - started, "chunk_s": chunked - imported,
               "load_s": loaded - chunked, "embed_s": done - loaded, "inside_s": done - started}, sys.stdout)
    return 0


# ------------------------------------------------------------------------ the parent
def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def prepare_workspace(workdir: Path, chunks_per_file: int) -> Path:
    """The generated workspace (re-used when the same spec wrote it) and its default-config file."""
    from common import WorkspaceSpec, generate_workspace

    root = workdir / f"ws-1000x{chunks_per_file}"
    spec = WorkspaceSpec(files=1000, chunks_per_file=chunks_per_file)
    marker = root / ".bench-spec.json"  # outside knowledge/ and scopes/: never indexed
    wanted = json.dumps(repr(spec))
    if not (marker.is_file() and marker.read_text() == wanted):
        shutil.rmtree(root, ignore_errors=True)
        generated = generate_workspace(root, spec)
        marker.write_text(wanted)
        print(f"generated {generated.files} files, {generated.chars:,} characters in {generated.seconds:.1f}s")
    config = workdir / f"config-1000x{chunks_per_file}.yaml"
    config.write_text(f"workspace: {json.dumps(str(root))}\n", encoding="utf-8")
    return config


def default_settings(config: Path) -> tuple[Path, int, int, int]:
    """(workspace, batch, chunk_max_chars, overlap) as the CLI resolves them from ``config``."""
    from bridge.config import load_config
    from memory.vectors.embedding import LocalEmbedding, make_embedder

    loaded = load_config(str(config))
    embedder = make_embedder(loaded.embedding)
    assert isinstance(embedder, LocalEmbedding), f"default config must use the local model, got {embedder!r}"
    memory = loaded.memory
    return Path(loaded.workspace), embedder.max_batch, memory.chunk_max_chars, memory.chunk_overlap_lines


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_timed(cmd: list[str]) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """Run ``cmd`` to its exit: (wall seconds, its stdout as JSON, {CPU seconds, load before/after}).

    CPU = the child's user + system time (``RUSAGE_CHILDREN`` around it): less sensitive than the
    wall clock to other processes sharing the cores.
    """
    before, cpu = loadavg(), children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}… failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return seconds, json.loads(done.stdout), {"cpu_s": children_cpu_s() - cpu, "before": before, "after": loadavg()}


def reset_index(root: Path) -> None:
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (root / name).unlink(missing_ok=True)
    shutil.rmtree(root / "vectors", ignore_errors=True)


def membridge() -> list[str]:
    script = REPO / ".venv" / "bin" / "membridge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bridge"]


def time_sync(config: Path, root: Path) -> dict[str, Any]:
    reset_index(root)
    seconds, report, load = run_timed([*membridge(), "--config", str(config), "memory", "sync", "--json"])
    if not report.get("ok"):
        raise RuntimeError(f"sync failed: {report}")
    return {"seconds": seconds, "cpu_s": load.pop("cpu_s"), "report": report, "load": load,
            "outside_sync_s": seconds - report["seconds"]}  # start, imports, config, trigram fill, close


def time_embed(root: Path, batch: int, max_chars: int, overlap: int, order: str) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "_embed", "--workspace", str(root), "--batch", str(batch),
           "--max-chars", str(max_chars), "--overlap", str(overlap), "--order", order]
    seconds, inside, load = run_timed(cmd)
    return {"seconds": seconds, "cpu_s": load.pop("cpu_s"), "inside": inside, "load": load}


def print_sync(run: dict[str, Any]) -> None:
    r = run["report"]
    print(f"  sync      {run['seconds']:8.1f} s  CPU {run['cpu_s']:.1f} s  ({r['vectors_written'] / run['seconds']:.1f} chunks/s)"
          f"  report: sync() "
          f"{r['seconds']:.1f} s, {r['vectors_written']} vectors, {r['embed_calls']} embed calls, "
          f"outside sync() {run['outside_sync_s']:.1f} s  load {run['load']['before'].split(' ')[0]}"
          f"→{run['load']['after'].split(' ')[0]}")


def print_embed(run: dict[str, Any]) -> None:
    i = run["inside"]
    print(f"  embedder  {run['seconds']:8.1f} s  CPU {run['cpu_s']:.1f} s  ({i['texts'] / run['seconds']:.1f} chunks/s)"
          f"  inside: import "
          f"{i['import_s']:.2f}, chunk {i['chunk_s']:.2f}, load {i['load_s']:.2f}, embed {i['embed_s']:.1f} s "
          f"({i['calls']} calls)  load {run['load']['before'].split(' ')[0]}→{run['load']['after'].split(' ')[0]}")


def sync_command(args: argparse.Namespace) -> int:
    from common import machine_info, source_fingerprint

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    config = prepare_workspace(workdir, args.chunks_per_file)
    root, batch, max_chars, overlap = default_settings(config)
    print(f"{uptime()}\nworkspace {root}, batch {batch}, chunks {max_chars}/{overlap}, order {args.order}")
    rounds: list[dict[str, Any]] = []
    for number in range(1, args.rounds + 1):
        print(f"round {number}")
        entry: dict[str, Any] = {}
        if not args.embed_only:
            entry["sync"] = time_sync(config, root)
            print_sync(entry["sync"])
        entry["embed"] = time_embed(root, batch, max_chars, overlap, args.order)
        print_embed(entry["embed"])
        if "sync" in entry:
            entry["ratio"] = entry["sync"]["seconds"] / entry["embed"]["seconds"]
            entry["cpu_ratio"] = entry["sync"]["cpu_s"] / entry["embed"]["cpu_s"]
            verdict = "PASS" if entry["ratio"] <= TARGET_RATIO else "FAIL"
            print(f"  ratio sync / embedder = {entry['ratio']:.3f}  (target <= {TARGET_RATIO}: {verdict}); "
                  f"CPU time ratio {entry['cpu_ratio']:.3f}")
        rounds.append(entry)
    summarise(rounds)
    write_results(f"sync-local-{date.today().isoformat()}", args.tag, {
        "machine": machine_info(), "uptime_end": uptime(), "config": str(config), "workspace": str(root),
        "chunks_per_file": args.chunks_per_file, "batch": batch, "order": args.order, "rounds": rounds,
        "code": source_fingerprint()})
    return 0


def summarise(rounds: list[dict[str, Any]]) -> None:
    for key in ("ratio", "cpu_ratio"):
        ratios = [r[key] for r in rounds if key in r]
        if ratios:
            print(f"{key} {', '.join(f'{x:.3f}' for x in ratios)}; median {statistics.median(ratios):.3f}")


def write_results(stem: str, tag: str | None, payload: dict[str, Any]) -> None:
    path = RESULTS / f"{stem}{'-' + tag if tag else ''}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    print(f"results: {path.relative_to(REPO)}")


# ------------------------------------------------------------------------- query latency
def questions() -> list[str]:
    """The bilingual set's 100 questions, placeholders filled for today."""
    from eval_bilingual import fill

    data = json.loads((BENCH / "data" / "bilingual.json").read_text(encoding="utf-8"))
    return [fill(q["q"], date.today()) for q in data["questions"]]


def is_chinese(text: str) -> bool:
    return re.search(r"[\u4e00-\u9fff]", text) is not None


def query_command(args: argparse.Namespace) -> int:
    from common import machine_info, percentile

    from memory.vectors.embedding import LocalEmbedding

    asked = questions()
    calls = [asked[i % len(asked)] for i in range(args.calls)]
    embedder = LocalEmbedding()
    started = time.perf_counter()
    for text in calls[:5]:
        embedder.embed_query(text)
    print(f"{uptime()}\nload + 5 warm-up calls {time.perf_counter() - started:.2f} s")
    samples: list[tuple[bool, float]] = []
    for text in calls:
        begun = time.perf_counter()
        embedder.embed_query(text)
        samples.append((is_chinese(text), (time.perf_counter() - begun) * 1000.0))
    figures: dict[str, Any] = {}
    for name, keep in (("all", lambda zh: True), ("english", lambda zh: not zh), ("chinese", lambda zh: zh)):
        values = [ms for zh, ms in samples if keep(zh)]
        figures[name] = {"n": len(values), "p50_ms": percentile(values, 50), "p95_ms": percentile(values, 95),
                         "mean_ms": statistics.fmean(values)}
        print(f"  {name:8s} n={len(values):3d}  p50 {figures[name]['p50_ms']:.2f} ms  p95 {figures[name]['p95_ms']:.2f} ms")
    write_results(f"query-local-{date.today().isoformat()}", args.tag,
                  {"machine": machine_info(), "uptime_end": uptime(), "model": embedder.model_id, "figures": figures})
    return 0


# ---------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    sync = commands.add_parser("sync", help="whole-process sync vs the embedder alone")
    sync.add_argument("--rounds", type=int, default=2, help="sync/embedder pairs, alternating (default 2)")
    sync.add_argument("--chunks-per-file", type=int, default=3, help="3: ~3k chunks; 10: workspace A (~10k)")
    sync.add_argument("--workdir", default=str(DEFAULT_WORKDIR), help="where the workspace is generated and kept")
    sync.add_argument("--order", choices=("length", "file"), default="length", help="embedder-alone batch order")
    sync.add_argument("--embed-only", action="store_true", help="time the embedder alone, no sync")
    sync.add_argument("--tag", help="suffix of the results file name")
    query = commands.add_parser("query", help="embed_query latency of the local model")
    query.add_argument("--calls", type=int, default=200)
    query.add_argument("--tag", help="suffix of the results file name")
    child = commands.add_parser("_embed", help=argparse.SUPPRESS)
    child.add_argument("--workspace", required=True)
    child.add_argument("--batch", type=int, required=True)
    child.add_argument("--max-chars", type=int, required=True)
    child.add_argument("--overlap", type=int, required=True)
    child.add_argument("--order", choices=("length", "file"), required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    handlers = {"sync": sync_command, "query": query_command, "_embed": embed_child}
    return handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
