"""Forget benchmark: a text in a 10,000-chunk scope inside a 100,000-chunk workspace.

    .venv/bin/python bench/bench_forget.py            # full size (several minutes: the sync)
    .venv/bin/python bench/bench_forget.py --quick    # 10x smaller
    .venv/bin/python bench/bench_forget.py --workdir /tmp/forget-ws   # keep the built workspace there;
        # the next run with the same --workdir times the forget on a copy of it (a minute, not ten)

The synthetic workspace of ``common.py`` with the scopes reshaped: one group scope of ~10% of the
chunks, small user scopes and knowledge for the rest. A token is planted on 20 lines of 10 of the
group's daily files, then the index is built hybrid with :class:`HashEmbedding` (dim 512), so the
figures are the forget's own cost, not a model's. A reused workspace is copied, flushed to disk and warmed up (a search, and a
note written and indexed in another scope, as a bot after its first turn) before the forget. The load average
of the machine is printed with the figures: on a shared machine they are only comparable at the same load.
The forget is timed step by step: the dry run;
the removal (files, versions, conversation, and the index following them by a sync of the changed
chunks), the figure held to the 2 s target; the wipe (FTS5 merge, LanceDB compaction and version cleanup,
VACUUM and WAL truncation) is measured apart. Every file is then read back for the token.

Prints a table and writes the figures as JSON to ``bench/results/forget-<date>[-quick].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Report, WorkspaceSpec, directory_size_mb, generate_workspace, machine_info

from memory import HashEmbedding, MemoryManager, MemorySettings, Workspace
from memory.conversations.conversations import ConversationStore
from memory.files.memory_file import MemoryFile
from memory.index.database import Database
from memory.index.indexer import Indexer
from memory.index.keyword_index import KeywordIndex
from memory.privacy.forgetting import Forgetter
from memory.vectors.backend import LanceDBBackend

TOKEN = "Vantrelloquist"
TARGET_FORGET_S = 2.0
BUILT = "bench-forget.json"  # in a kept workspace: which scope holds the token, and its "today"


def timing(owner: Any, name: str, spent: dict[str, float]) -> None:
    """Wrap ``owner.name`` so that its time adds up in ``spent[name]`` (and the process's CPU time
    meanwhile, all threads, in ``spent[name + " cpu"]``)."""
    original: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - started
            spent[f"{name} cpu"] = spent.get(f"{name} cpu", 0.0) + time.process_time() - cpu

    setattr(owner, name, timed)


def plant(files: list[Path]) -> None:
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[3] += f" {TOKEN} was here"
        lines[len(lines) // 2] = f"- the {TOKEN} code is 4411"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def build(root: Path, spec: WorkspaceSpec, report: Report) -> tuple[MemoryManager, str]:
    """Generate the workspace, plant the token, index it all (the trigram index included)."""
    ws = generate_workspace(root, spec)
    plant(ws.daily_files[ws.big_scope][:10])
    manager = open_memory(root, ws.today)
    started = time.perf_counter()
    assert manager.indexer.sync().ok
    manager.indexer.finish_indexing()
    report.add("setup", "full sync hybrid HashEmbedding(512)", time.perf_counter() - started, "s")
    (root / BUILT).write_text(json.dumps({"scope": ws.big_scope, "today": ws.today.isoformat()}), encoding="utf-8")
    return manager, ws.big_scope


def reuse(kept: Path, root: Path) -> tuple[MemoryManager, str]:
    """A copy of a workspace an earlier run built, on disk and warmed up like a bot after one turn."""
    built = json.loads((kept / BUILT).read_text(encoding="utf-8"))
    shutil.copytree(kept, root)
    os.sync()  # the copy's dirty pages would be written by the forget's first fsync
    today = date.fromisoformat(built["today"])
    manager = open_memory(root, today)
    other = sorted(path.name for path in (root / "scopes").iterdir() if path.name != built["scope"])[0]
    manager.search("warm up", built["scope"])
    manager.append_daily(other, "- a note written and indexed before the forget")
    assert manager.indexer.sync(other).ok
    manager.indexer.finish_indexing()
    return manager, str(built["scope"])


def open_memory(root: Path, today: date) -> MemoryManager:
    return MemoryManager(Workspace(root), MemorySettings(),
                         embedder=HashEmbedding(dim=512, batch_size=256, model_id="hash:512"), today=lambda: today)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10x smaller")
    parser.add_argument("--workdir", type=Path, help="build the workspace here and keep it; reuse it when built")
    args = parser.parse_args()
    files, per_file = (100, 100) if args.quick else (1000, 100)
    spec = WorkspaceSpec(files=files, chunks_per_file=per_file, big_scope_share=0.1)
    report = Report(f"forget benchmark{' (quick)' if args.quick else ''}")
    with tempfile.TemporaryDirectory(prefix="membridge-forget-", dir=args.workdir and args.workdir.parent) as tmp:
        root = Path(tmp) / "ws"
        if args.workdir and (args.workdir / BUILT).is_file():
            manager, scope = reuse(args.workdir, root)
        else:
            manager, scope = build(args.workdir or root, spec, report)
            if args.workdir:
                manager.close()
                manager, scope = reuse(args.workdir, root)
        section = "setup"
        total, scope_chunks = manager.storage.count_chunks(), manager.storage.count_chunks(scope)
        report.add(section, "chunks in the workspace", total, "chunks")
        report.add(section, f"chunks in the scope {scope}", scope_chunks, "chunks")
        report.add(section, "index.db", directory_size_mb(root / "index.db"), "MiB")
        report.add(section, "vectors/", directory_size_mb(root / "vectors"), "MiB")
        report.add(section, "load average (1 min) before the forget", os.getloadavg()[0], "")

        forgetter = Forgetter(manager, ConversationStore(manager.db), MemoryFile(manager))
        spent: dict[str, float] = {}
        for owner, name in ((Forgetter, "_remove"), (Indexer, "sync"), (Indexer, "finish_indexing"),
                            (KeywordIndex, "merge"), (LanceDBBackend, "purge"),
                            (Database, "scrub")):
            timing(owner, name, spent)
        section = "forget"
        started = time.perf_counter()
        found = forgetter.find(scope, TOKEN)
        report.add(section, "dry run (find every place)", time.perf_counter() - started, "s")
        report.details["matches"] = found.counts()
        started = time.perf_counter()
        cpu = time.process_time()
        forgetter.forget(scope, TOKEN)
        cpu = time.process_time() - cpu  # the filler thread's included
        whole = time.perf_counter() - started
        report.add(section, "remove: files, versions, messages, index (vacuum excluded)", spent["_remove"], "s",
                   target=TARGET_FORGET_S)
        report.add(section, "  its CPU time (all threads of this process)", spent["_remove cpu"], "s")
        report.add(section, "  of which the re-index of the changed chunks", spent["sync"], "s")
        report.add(section, "trigram index of the changed chunks (background in the bot)",
                   spent.get("finish_indexing", 0.0), "s")
        report.add(section, "FTS5 merge of both keyword indexes", spent["merge"], "s")
        report.add(section, "LanceDB compaction + old versions removed", spent["purge"], "s")
        report.add(section, "VACUUM + WAL truncate (twice: after the wipe and after the job row)", spent["scrub"], "s")
        report.add(section, "whole forget, wipe included", whole, "s")
        report.add(section, "  its CPU time (all threads of this process)", cpu, "s")
        report.add(section, "load average (1 min) after the forget", os.getloadavg()[0], "")
        left = sum(path.read_bytes().count(TOKEN.encode()) for path in root.rglob("*") if path.is_file())
        report.add(section, "token bytes left under the workspace", left, "")
        manager.close()
    print()
    print(report.table())
    suffix = "-quick" if args.quick else ""
    report.write_json(Path(__file__).parent / "results" / f"forget-{date.today()}{suffix}.json",
                      {"machine": machine_info(), "spec": {"files": files, "chunks_per_file": per_file}})


if __name__ == "__main__":
    main()
