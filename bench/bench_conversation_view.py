"""How long the console's conversation view takes to read a page, and what its recall log costs a turn.

    .venv/bin/python bench/bench_conversation_view.py                 # 200 scopes × 5 chats × 100 turns
    .venv/bin/python bench/bench_conversation_view.py --big 20000     # and one scope of 2 × 20,000 turns

An index.db holds every scope's turns (a message, a tool step, an answer: three rows each) at
random times. Timed in-process, p50 of 50: ``GET /api/scopes/{s}/conversation`` as the console
serves it (bridge/console/conversation.py: the page from the conversation store, the recall log's
rows of its turns), the first page and the tenth, in an ordinary scope and in the big one; and
``RecallLog.record`` of a turn that recalled nothing, the write every turn now makes.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import machine_info

from bridge.config import parse_config
from bridge.console.conversation import conversation
from bridge.wiring.app import Services


def fill(services: Services, scope: str, chats: int, turns: int) -> None:
    start = time.time() - 10**6
    with services.conversations.db.transaction() as conn:
        for chat in range(chats):
            session = f"{scope}|telegram::{chat}:"
            conn.execute("INSERT INTO sessions (id, scope, channel, created_at, updated_at) VALUES (?, ?, 't', ?, ?)",
                         (session, scope, start, start))
            rows = []
            for turn in range(turns):
                at = start + random.random() * 10**6
                rows += [(session, 3 * turn + 1, "user", f"question {turn}", 1, at),
                         (session, 3 * turn + 2, "assistant", "", 0, at),
                         (session, 3 * turn + 3, "assistant", f"answer {turn}", 0, at)]
            conn.executemany("INSERT INTO messages (session_id, seq, role, body, visible, created_at)"
                             " VALUES (?, ?, ?, ?, ?, ?)", rows)
        services.workspace.daily_dir(scope).mkdir(parents=True, exist_ok=True)  # a scope the console knows


def p50_ms(task: Callable[[], object], runs: int = 50) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        task()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def page_ms(services: Services, scope: str, page: int) -> float:
    mark = ""
    for _ in range(page - 1):
        mark = conversation(services, scope, {"before": mark} if mark else {})["next"]
    query = {"before": mark} if mark else {}
    return p50_ms(lambda: conversation(services, scope, query))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scopes", type=int, default=200)
    parser.add_argument("--big", type=int, default=0, help="turns in each of the big scope's two chats")
    args = parser.parse_args()
    print(f"machine: {machine_info()}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="membridge-conversation-"))
    services = Services(parse_config({"workspace": str(root), "embedding": {"provider": "none"}}))
    try:
        for number in range(args.scopes):
            fill(services, f"telegram-{number}", 5, 100)
        if args.big:
            fill(services, "telegram-big", 2, args.big)
        messages = services.conversations.db.query("SELECT count(*) FROM messages")[0][0]
        print(f"{messages:,} messages in {args.scopes} scopes (+ the big one: {2 * args.big:,} turns)")
        for scope in ["telegram-7"] + (["telegram-big"] if args.big else []):
            print(f"{scope}: page 1 {page_ms(services, scope, 1):.2f} ms, page 10 {page_ms(services, scope, 10):.2f} ms")
        seqs = iter(range(10**6, 10**7))
        record = p50_ms(lambda: services.memory.recalls.record("telegram-7|c", next(seqs), "telegram-7", []), 500)
        print(f"recall log row of a turn that recalled nothing: {record:.3f} ms p50")
    finally:
        services.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
