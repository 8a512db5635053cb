"""Agent turn benchmark: our own overhead per turn through ``Agent.handle``.

    .venv/bin/python bench/bench_agent.py            # 500 measured turns per case
    .venv/bin/python bench/bench_agent.py --quick    # 100 measured turns per case

The LLM is :class:`InstantLLM`, an in-process :class:`LLMClient` that answers at once, so a turn's
time is membridge's own work: session upsert, storing messages, rebuilding the system prompt from
disk (persona, a 200-line MEMORY.md), loading the history, the context trim check and, in the
tool cases, one ``memory_search`` call. The session is pre-filled with 1,000 stored messages.

Cases: keyword-only (``embedding.provider: none``, what ``Services`` builds from config) and hybrid
(``HashEmbedding(dim=512)`` plugged in by setting ``Services.memory`` before the agent is built; with
``--embedder local`` the bundled model, built from config as a user's bot builds it),
each with no tool call and with one ``memory_search`` call per turn; every case has auto-recall on (a
search of the message before each model call, the default), and one hybrid case has it off: the
difference of the two hybrid no-tool cases is what auto-recall adds (issue 38: at most 10 ms p50). The keyword-only cases also run
with metering off (no usage row, no Prometheus counting: ``agent.meter`` unset and the search
observer a no-op) and with ``limits:`` on (a daily check before each turn), in the same run, so the
cost of metrics and limits is read against the same machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Report,
    TextGenerator,
    WorkspaceSpec,
    generate_workspace,
    machine_info,
    make_queries,
    peak_rss_mb,
    percentile,
    source_fingerprint,
)

from bridge.config import parse_config
from bridge.llm import LLMClient, LLMResponse, Message, ToolCall
from bridge.ops import metrics
from bridge.wiring.app import Services
from channels import IncomingMessage
from memory import HashEmbedding, MemoryManager, Turn

TARGET_OVERHEAD_P50_MS = 5.0
#: Issue 38: what auto-recall (a search of the message before each model call) may add to a turn.
TARGET_RECALL_ADDED_P50_MS = 10.0
USER_ID = "42"
MEMORY_LINES = 200
PREFILL_MESSAGES = 1000


class InstantLLM(LLMClient):
    """Answers immediately. With ``search_queries`` it first asks for one ``memory_search``.

    A request whose last message is the user's gets the tool call; one that ends with the tool's
    result gets the answer. The flush worker's summary requests get the "nothing" sentinel.
    """

    def __init__(self, search_queries: Sequence[str] | None = None) -> None:
        self.search_queries = list(search_queries or [])
        self.calls = 0
        self.seconds = 0.0
        self._next_query = 0
        self._call_ids = 0

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] = ()) -> LLMResponse:
        started = time.perf_counter()
        self.calls += 1
        last = messages[-1] if messages else {}
        if not tools:
            response = LLMResponse("NONE", finish_reason="stop")
        elif self.search_queries and last.get("role") == "user":
            query = self.search_queries[self._next_query % len(self.search_queries)]
            self._next_query += 1
            self._call_ids += 1
            call = ToolCall(f"call_{self._call_ids}", "memory_search", json.dumps({"query": query}))
            response = LLMResponse("", [call], "tool_calls")
        else:
            response = LLMResponse("Noted. Anything else?", finish_reason="stop")
        self.seconds += time.perf_counter() - started
        return response


def direct_message(text: str, number: int) -> IncomingMessage:
    return IncomingMessage(channel="telegram", chat_id=USER_ID, chat_type="direct", user_id=USER_ID,
                           user_name="Ann", text=text, message_id=str(number))


def prepare_workspace(root: Path, scope: str, gen: TextGenerator, *, files: int) -> None:
    """A modest index (``files`` files x ~10 chunks over several scopes) plus the user's own memory."""
    generate_workspace(root, WorkspaceSpec(files=files, chunks_per_file=10))
    rng = random.Random(3)
    scope_dir = root / "scopes" / scope
    (scope_dir / "memory").mkdir(parents=True, exist_ok=True)
    lines = ["# MEMORY"] + [gen.line(rng) for _ in range(MEMORY_LINES - 1)]
    (scope_dir / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for day in range(1, 29):
        body = [f"# 2026-11-{day:02d}", "", *gen.lines_for_chars(rng, 4000)]
        (scope_dir / "memory" / f"2026-11-{day:02d}.md").write_text("\n".join(body) + "\n", encoding="utf-8")


def build_services(root: Path, llm: InstantLLM, hybrid: bool, limits: bool = False, embedder: str = "hash") -> Services:
    """``embedder``: the hybrid cases' model, ``hash`` (a cost benchmark) or ``local`` (the bundled
    model, built from config as a user's bot builds it)."""
    local = hybrid and embedder == "local"
    config = parse_config({
        "workspace": str(root),
        "llm": {"api_key": "bench", "model": "instant"},
        "embedding": {"provider": "local" if local else "none"},
        "limits": {"daily_tokens": 10**12, "daily_turns": 10**9} if limits else {},
    })
    services = Services(config, llm=llm)
    if hybrid and not local:
        # Services builds its embedder from config; a plain attribute shadows the cached_property.
        services.memory = MemoryManager(  # type: ignore[misc]
            services.workspace, config.memory,
            embedder=HashEmbedding(dim=512, batch_size=256, model_id="hash:512"),
        )
    return services


def prefill(services: Services, session_id: str, scope: str, gen: TextGenerator) -> None:
    rng = random.Random(5)
    store = services.conversations
    store.ensure_session(session_id, scope, "telegram")
    batch: list[Turn] = []
    for index in range(PREFILL_MESSAGES):
        role = "user" if index % 2 == 0 else "assistant"
        batch.append(Turn(role, " ".join(gen.line(rng) for _ in range(rng.randint(1, 3)))))
        if len(batch) == 100:
            store.append_messages(session_id, batch)
            batch = []
    if batch:
        store.append_messages(session_id, batch)


async def run_case(root: Path, name: str, *, hybrid: bool, with_search: bool, turns: int, warmup: int,
                   gen: TextGenerator, queries: list[str], report: Report, metering: str = "on",
                   recall: bool = True, embedder: str = "hash") -> dict[str, Any]:
    shutil.rmtree(root / "index.db", ignore_errors=True)
    for leftover in ("index.db", "index.db-wal", "index.db-shm"):
        (root / leftover).unlink(missing_ok=True)
    shutil.rmtree(root / "vectors", ignore_errors=True)
    llm = InstantLLM(queries if with_search else None)
    services = build_services(root, llm, hybrid, limits=metering == "limits", embedder=embedder)
    services.memory.settings.auto_recall.enabled = recall  # memory.auto_recall: a search before each model call
    sync = services.memory.indexer.sync()
    agent = services.agent
    observe_search = metrics.observe_search
    if metering == "off":
        agent.meter = None
        metrics.observe_search = lambda seconds, results: None
    first = direct_message("hello again", 0)
    who = agent.identify(first)
    prefill(services, who.session_id, who.scope, gen)
    rng = random.Random(11)
    texts = [gen.line(rng)[8:] for _ in range(turns + warmup + 1)]

    started = time.perf_counter()
    await agent.handle(first)  # loads 1,000 stored messages and trims them into a flush job
    first_ms = (time.perf_counter() - started) * 1000
    for index in range(warmup):
        await agent.handle(direct_message(texts[index], index + 1))

    samples: list[float] = []
    llm_before = llm.seconds
    llm_calls_before = llm.calls
    loop_started = time.perf_counter()
    for index in range(turns):
        message = direct_message(texts[warmup + index], warmup + index + 1)
        t0 = time.perf_counter()
        await agent.handle(message)
        samples.append((time.perf_counter() - t0) * 1000)
    loop_seconds = time.perf_counter() - loop_started
    llm_ms_per_turn = (llm.seconds - llm_before) * 1000 / turns
    jobs = len(services.conversations.pending_jobs())
    stored = services.memory.db.query("SELECT count(*) FROM messages")[0][0]
    tool_bodies = [row[0] for row in services.memory.db.query(
        "SELECT body FROM messages WHERE role = 'tool'")]
    tool_errors = sum(1 for body in tool_bodies if body.startswith("error"))
    tool_empty = sum(1 for body in tool_bodies if '"results": []' in body)
    await services.aclose()
    metrics.observe_search = observe_search

    p50 = percentile(samples, 50)
    section = f"agent {name}"
    report.add(section, "turns per second", turns / loop_seconds, "turns/s")
    report.add(section, "per-turn overhead p50 (excl. LLM)", p50 - llm_ms_per_turn, "ms", target=TARGET_OVERHEAD_P50_MS)
    report.add(section, "per-turn overhead p95 (excl. LLM)", percentile(samples, 95) - llm_ms_per_turn, "ms")
    report.add(section, "first turn (loads 1,000 messages, trims them)", first_ms, "ms")
    detail = {
        "turns": turns, "warmup": warmup, "hybrid": hybrid, "memory_search_per_turn": with_search,
        "metering": metering, "p50_ms": p50, "p95_ms": percentile(samples, 95), "mean_ms": statistics.fmean(samples),
        "max_ms": max(samples), "llm_ms_per_turn": llm_ms_per_turn,
        "llm_calls_per_turn": (llm.calls - llm_calls_before) / turns, "first_turn_ms": first_ms,
        "index_chunks": sync.chunks_written, "flush_jobs_pending": jobs, "messages_stored": stored,
        "tool_results": len(tool_bodies), "tool_errors": tool_errors, "tool_empty_results": tool_empty,
    }
    report.details[section] = detail
    if with_search:
        print(f"  memory_search results: {len(tool_bodies)} calls, {tool_errors} errors, {tool_empty} empty; "
              f"index {sync.chunks_written:,} chunks", flush=True)
    return detail


async def main_async(args: argparse.Namespace) -> int:
    turns = 100 if args.quick else args.turns
    warmup = 20
    report = Report("membridge agent benchmark" + (" (quick)" if args.quick else ""))
    info = machine_info()
    sources = source_fingerprint()
    print(f"machine: {info}", flush=True)
    gen = TextGenerator(21)
    queries = make_queries(200).english
    workdir = Path(tempfile.mkdtemp(prefix="membridge-agent-"))
    root = workdir / "ws"
    try:
        prepare_workspace(root, f"telegram-{USER_ID}", gen, files=100 if args.quick else 300)
        hybrid_name = "hybrid HashEmbedding(512)" if args.embedder == "hash" else "hybrid local model (USE v3)"
        cases = [
            # metering off first and on between two more cases: the first case of a process is the slowest
            ("keyword-only, no tool call, metrics off", False, False, "off", True),
            ("keyword-only, no tool call, limits on", False, False, "limits", True),
            ("keyword-only, no tool call", False, False, "on", True),
            ("keyword-only, 1 memory_search per turn, metrics off", False, True, "off", True),
            ("keyword-only, 1 memory_search per turn", False, True, "on", True),
            (f"{hybrid_name}, no tool call, auto-recall off", True, False, "on", False),
            (f"{hybrid_name}, no tool call", True, False, "on", True),
            (f"{hybrid_name}, 1 memory_search per turn", True, True, "on", True),
        ]
        overhead: dict[str, float] = {}
        for name, hybrid, with_search, metering, recall in cases:
            print(f"\n== {name}", flush=True)
            detail = await run_case(root, name, hybrid=hybrid, with_search=with_search, turns=turns, warmup=warmup,
                                    gen=gen, queries=queries, report=report, metering=metering, recall=recall,
                                    embedder=args.embedder)
            overhead[name] = detail["p50_ms"] - detail["llm_ms_per_turn"]
        report.add("agent auto-recall", "added to a turn p50 (hybrid, no tool call: on - off)",
                   overhead[f"{hybrid_name}, no tool call"] - overhead[f"{hybrid_name}, no tool call, auto-recall off"],
                   "ms", target=TARGET_RECALL_ADDED_P50_MS)
        report.add("process", "peak RSS", peak_rss_mb(), "MiB")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n" + report.table())
    out = Path(__file__).resolve().parent / "results" / f"agent-{date.today().isoformat()}{'-quick' if args.quick else ''}{'-' + args.tag if args.tag else ''}.json"
    report.write_json(out, {"machine": info, "quick": args.quick, "turns_per_case": turns,
                                "sources": sources})
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 measured turns per case")
    parser.add_argument("--turns", type=int, default=500, help="measured turns per case")
    parser.add_argument("--tag", help="suffix of the results file name")
    parser.add_argument("--embedder", choices=("hash", "local"), default="hash",
                        help="the hybrid cases' model: hash (cost only) or local (the bundled model, as the default config runs)")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
