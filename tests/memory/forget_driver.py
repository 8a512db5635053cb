"""Run in a subprocess by test_forget_crash.py: plant, then forget or erase, stopping at a chosen
step: the step says READY on stdout and waits there to be killed (SIGKILL, by the test).

usage: forget_driver.py WORKSPACE plant | forget STEP | erase STEP | resume
  STEP is where the job stops: one of STEPS (``none`` runs it to the end).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.forgetting import plant  # noqa: E402

import memory.privacy.forgetting as forgetting  # noqa: E402
from memory import HashEmbedding, MemoryManager, MemorySettings, Workspace  # noqa: E402
from memory.conversations.conversations import ConversationStore  # noqa: E402
from memory.files.memory_file import MemoryFile  # noqa: E402
from memory.index.database import Database  # noqa: E402
from memory.index.indexer import Indexer  # noqa: E402
from memory.vectors.backend import LanceDBBackend  # noqa: E402

TOKEN = "Zorblaxquint"
#: Steps of a forget or an erase, roughly in order (``wipe`` and after: the job row holds no text).
STEPS = {
    "unindex": (Indexer, "unindex"),
    "rewrite": (forgetting, "rewrite_without"),
    "versions": (MemoryFile, "scrub_versions"),
    "conversations": (ConversationStore, "forget_text"),
    "sync": (Indexer, "sync"),
    "history": (MemoryFile, "erase_history"),
    "sessions": (ConversationStore, "erase_scope"),
    "wipe": (forgetting.Forgetter, "_wipe"),
    "purge": (LanceDBBackend, "purge"),
    "vacuum": (Database, "scrub"),
}


def stop_at(step: str) -> None:
    owner, name = STEPS[step]
    original = getattr(owner, name)

    def stopped(*args: Any, **kwargs: Any) -> Any:
        print("READY", flush=True)
        threading.Event().wait()  # until the test's SIGKILL
        return original(*args, **kwargs)

    setattr(owner, name, stopped)


def main(workspace: str, mode: str, step: str = "none") -> None:
    manager = MemoryManager(Workspace(Path(workspace)), MemorySettings(), embedder=HashEmbedding())
    forgetter = forgetting.Forgetter(manager, ConversationStore(manager.db), MemoryFile(manager))
    if mode == "plant":
        plant(manager, forgetter, "alice", TOKEN)
        plant(manager, forgetter, "bob", "Bobsmarker")
    if step != "none":
        stop_at(step)
    if mode == "forget":
        forgetter.forget("alice", TOKEN)
    elif mode == "erase":
        forgetter.erase("alice")
    elif mode == "resume":
        print(f"resumed {forgetter.resume()}", flush=True)
    manager.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
