"""Profile one memory operation on a workspace that bench_memory.py left behind (``--workdir``).

    .venv/bin/python bench/profile_memory.py keyword-sync  /tmp/mbfull/A
    .venv/bin/python bench/profile_memory.py hybrid-resync /tmp/mbfull/B
    .venv/bin/python bench/profile_memory.py hybrid-search /tmp/mbfull/B --scope telegram-chat-1001
    .venv/bin/python bench/profile_memory.py keyword-search /tmp/mbfull/B --scope telegram-chat-1001 --kind mixed
    .venv/bin/python bench/profile_memory.py hybrid-change /tmp/mbfull/B
    .venv/bin/python bench/profile_memory.py disk-check    /tmp/mbfull/B --scope telegram-chat-1001

Prints a pyinstrument tree (wall clock, native calls shown as their Python caller) and the top of a
cProfile table. ``keyword-sync`` copies the markdown to a scratch workspace first, so the
workspace's own index is left alone; the other operations use the index as it is.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import make_queries

from memory import HashEmbedding, MemoryManager, MemorySettings, Workspace
from memory.manager import append_text


def manager_for(root: Path, hybrid: bool) -> MemoryManager:
    embedder = HashEmbedding(dim=512, batch_size=256, model_id="hash:512") if hybrid else None
    return MemoryManager(Workspace(root), MemorySettings(), embedder=embedder, today=lambda: date(2026, 12, 1))


def copy_markdown(source: Path, target: Path) -> None:
    for sub in ("scopes", "knowledge"):
        if (source / sub).is_dir():
            shutil.copytree(source / sub, target / sub, copy_function=shutil.copy2)


def profile(label: str, call: Callable[[], Any], *, repeat: int = 1, top: int = 25) -> None:
    try:
        from pyinstrument import Profiler
    except ImportError:  # not a test dependency: the cProfile table below still prints
        print("(pyinstrument is not installed: `.venv/bin/pip install pyinstrument` adds its call tree)")
    else:
        profiler = Profiler(interval=0.0005)
        started = time.perf_counter()
        profiler.start()
        for _ in range(repeat):
            call()
        profiler.stop()
        wall = time.perf_counter() - started
        print(f"== {label}: {repeat} run(s), {wall * 1000 / repeat:.1f} ms each (pyinstrument)")
        print(profiler.output_text(unicode=False, color=False, show_all=False))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeat):
        call()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("operation", choices=("keyword-sync", "hybrid-resync", "keyword-resync", "hybrid-search",
                                              "keyword-search", "hybrid-change", "disk-check"))
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--scope", default="telegram-chat-1001")
    parser.add_argument("--kind", choices=("english", "cjk2", "cjk1", "mixed"), default="english")
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args(argv)
    queries: list[str] = getattr(make_queries(args.queries), args.kind)

    if args.operation == "keyword-sync":
        scratch = Path(tempfile.mkdtemp(prefix="membridge-prof-"))
        try:
            copy_markdown(args.workspace, scratch)
            manager = manager_for(scratch, hybrid=False)
            profile("full keyword-only sync", manager.indexer.sync, top=30)
            manager.close()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return 0
    hybrid = args.operation.startswith("hybrid")
    manager = manager_for(args.workspace, hybrid)
    if args.operation in ("hybrid-resync", "keyword-resync"):
        manager.indexer.sync()
        profile("no-change re-sync", manager.indexer.sync, repeat=5)
    elif args.operation in ("hybrid-search", "keyword-search"):
        def loop() -> None:
            for query in queries:
                manager.search(query, args.scope, auto_sync=False)

        loop()
        profile(f"{len(queries)} searches ({args.kind}) in {args.scope}", loop)
    elif args.operation == "hybrid-change":
        manager.indexer.sync()
        target = sorted((args.workspace / "scopes" / args.scope / "memory").glob("*.md"))[-1]

        def change() -> None:
            append_text(target, f"- profiled change {time.time()}")
            manager.indexer.sync(args.scope)

        profile("1 file changed, sync(scope)", change, repeat=1)
    elif args.operation == "disk-check":
        profile("disk check", lambda: manager.indexer._disk_changed(args.scope), repeat=20)
    manager.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
