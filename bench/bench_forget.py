"""Forget benchmark: a text in a 10,000-chunk scope inside a 100,000-chunk workspace.

    .venv/bin/python bench/bench_forget.py            # full size (several minutes: the sync)
    .venv/bin/python bench/bench_forget.py --quick    # 10x smaller

The synthetic workspace of ``common.py`` with the scopes reshaped: one group scope of ~10% of the
chunks, small user scopes and knowledge for the rest. A token is planted on 20 lines of 10 of the
group's daily files, then the index is built hybrid with :class:`HashEmbedding` (dim 512), so the
figures are the forget's own cost, not a model's. The forget is timed step by step: the dry run;
the removal (files, versions, conversation, and the index following them by a sync of the changed
chunks), the figure held to the 2 s target; the wipe (FTS5 merge, LanceDB compaction and version cleanup,
VACUUM and WAL truncation) is measured apart. Every file is then read back for the token.

Prints a table and writes the figures as JSON to ``bench/results/forget-<date>[-quick].json``.
"""

from __future__ import annotations

import argparse
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
from memory.conversations import ConversationStore
from memory.dream import MemoryFile
from memory.forgetting import Forgetter
from memory.storage import Database, IndexStorage
from memory.vectors import LanceDBBackend

TOKEN = "Vantrelloquist"
TARGET_FORGET_S = 2.0


def timing(owner: Any, name: str, spent: dict[str, float]) -> None:
    """Wrap ``owner.name`` so that its time adds up in ``spent[name]``."""
    original: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - started

    setattr(owner, name, timed)


def plant(files: list[Path]) -> None:
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[3] += f" {TOKEN} was here"
        lines[len(lines) // 2] = f"- the {TOKEN} code is 4411"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10x smaller")
    args = parser.parse_args()
    files, per_file = (100, 100) if args.quick else (1000, 100)
    spec = WorkspaceSpec(files=files, chunks_per_file=per_file, big_scope_share=0.1)
    report = Report(f"forget benchmark{' (quick)' if args.quick else ''}")
    with tempfile.TemporaryDirectory(prefix="membridge-forget-") as tmp:
        ws = generate_workspace(Path(tmp) / "ws", spec)
        plant(ws.daily_files[ws.big_scope][:10])
        manager = MemoryManager(Workspace(ws.root), MemorySettings(),
                                embedder=HashEmbedding(dim=512, batch_size=256, model_id="hash:512"),
                                today=lambda: ws.today)
        started = time.perf_counter()
        assert manager.sync().ok
        manager.finish_indexing()
        section = "setup"
        report.add(section, "full sync hybrid HashEmbedding(512)", time.perf_counter() - started, "s")
        total, scope_chunks = manager.storage.count_chunks(), manager.storage.count_chunks(ws.big_scope)
        report.add(section, "chunks in the workspace", total, "chunks")
        report.add(section, f"chunks in the scope {ws.big_scope}", scope_chunks, "chunks")
        report.add(section, "index.db", directory_size_mb(ws.root / "index.db"), "MiB")
        report.add(section, "vectors/", directory_size_mb(ws.root / "vectors"), "MiB")

        forgetter = Forgetter(manager, ConversationStore(manager.db), MemoryFile(manager))
        spent: dict[str, float] = {}
        for owner, name in ((Forgetter, "_remove"), (MemoryManager, "sync"), (MemoryManager, "finish_indexing"),
                            (IndexStorage, "merge_keyword_indexes"), (LanceDBBackend, "purge"),
                            (Database, "scrub")):
            timing(owner, name, spent)
        section = "forget"
        started = time.perf_counter()
        found = forgetter.find(ws.big_scope, TOKEN)
        report.add(section, "dry run (find every place)", time.perf_counter() - started, "s")
        report.details["matches"] = found.counts()
        started = time.perf_counter()
        forgetter.forget(ws.big_scope, TOKEN)
        whole = time.perf_counter() - started
        report.add(section, "remove: files, versions, messages, index (vacuum excluded)", spent["_remove"], "s",
                   target=TARGET_FORGET_S)
        report.add(section, "  of which the re-index of the changed chunks", spent["sync"], "s")
        report.add(section, "trigram index of the changed chunks (background in the bot)",
                   spent.get("finish_indexing", 0.0), "s")
        report.add(section, "FTS5 merge of both keyword indexes", spent["merge_keyword_indexes"], "s")
        report.add(section, "LanceDB compaction + old versions removed", spent["purge"], "s")
        report.add(section, "VACUUM + WAL truncate (twice: after the wipe and after the job row)", spent["scrub"], "s")
        report.add(section, "whole forget, wipe included", whole, "s")
        left = sum(path.read_bytes().count(TOKEN.encode()) for path in ws.root.rglob("*") if path.is_file())
        report.add(section, "token bytes left under the workspace", left, "")
        manager.close()
    print()
    print(report.table())
    suffix = "-quick" if args.quick else ""
    report.write_json(Path(__file__).parent / "results" / f"forget-{date.today()}{suffix}.json",
                      {"machine": machine_info(), "spec": {"files": files, "chunks_per_file": per_file}})


if __name__ == "__main__":
    main()
