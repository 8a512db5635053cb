"""What a running membridge counts, for Prometheus (``GET /metrics``, served by :mod:`bridge.ops.health`).

The counters and histograms live on prometheus-client's process-wide registry and are bumped where
things happen (a turn, a model request, a search, a Deep Dream, a media file, a lease). What is a
state rather than an event (flush jobs by state, what the index holds, the last nightly success) is
read from each workspace's SQLite when Prometheus scrapes, by :class:`WorkspaceCollector`, in the
scrape's own thread: nothing is polled in between and the event loop never waits on it.

Label values are bounded by construction: a channel, an outcome, a model name from config, a scope
*kind* (``telegram``, ``slack``, ``telegram-chat``…), a shard number. Never a chat, a user or a text.
README "Operating membridge" lists every metric.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from datetime import datetime

    from memory import ConversationStore, MemoryManager

    from ..config import AppConfig

log = logging.getLogger(__name__)

_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)

TURNS = Counter("membridge_turns", "Messages the agent turned into answers, by outcome: answered, refused "
                "(over a limit), failed (the model failed), deduplicated (a redelivery dropped)",
                ["channel", "outcome"])
TURN_SECONDS = Histogram("membridge_turn_seconds", "From a message's receipt to its answer sent",
                         ["channel"], buckets=_SECONDS)
MODEL_REQUESTS = Counter("membridge_model_requests", "Chat-completion requests by model and outcome (ok, or "
                         "the failure kind: unreachable, auth, model, rate_limit, server, bad_response…)",
                         ["model", "outcome"])
MODEL_SECONDS = Histogram("membridge_model_request_seconds", "Latency of one chat-completion request",
                          ["model"], buckets=_SECONDS)
MODEL_TOKENS = Counter("membridge_model_tokens", "Tokens the model reported (estimated=true: the server gave "
                       "no usage and they were estimated from the characters)", ["model", "kind", "estimated"])
SEARCH_SECONDS = Histogram("membridge_memory_search_seconds", "Latency of a memory search the model asked for",
                           buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))
SEARCH_RESULTS = Histogram("membridge_memory_search_results", "Results of a memory search the model asked for",
                           buckets=(0, 1, 2, 3, 5, 10, 20, 50))
SEARCHES_EMPTY = Counter("membridge_memory_searches_empty", "Memory searches that found nothing")
EMBEDDED_TEXTS = Counter("membridge_embedded_texts", "Texts embedded (throughput: its rate over the rate of "
                         "membridge_embedding_seconds_total)")
EMBEDDING_SECONDS = Counter("membridge_embedding_seconds", "Time spent embedding")
DREAMS = Counter("membridge_dream_runs", "Deep Dream runs by outcome: changed, skipped, refused, failed",
                 ["outcome"])
MEDIA = Counter("membridge_media", "Attachments by kind (voice, photo, document…) and outcome (ok, refused); "
                "reason says why one was refused", ["kind", "outcome", "reason"])
LEASE_MOVES = Counter("membridge_cluster_lease_moves", "Shard leases this worker claimed, released or lost",
                      ["change"])
FENCING_REJECTIONS = Counter("membridge_cluster_fencing_rejections",
                             "Writes or sends refused because this worker's fencing token was stale")
RECEIVER_HELD = Gauge("membridge_receiver_held_messages", "Messages a receiver holds while Redis is away")
STREAM_LENGTH = Gauge("membridge_cluster_stream_length", "Entries in a held shard's stream", ["shard"])
STREAM_PENDING = Gauge("membridge_cluster_pending", "Entries of a held shard read but not yet acknowledged",
                       ["shard"])
STREAM_LAG = Gauge("membridge_cluster_lag", "Entries of a held shard appended but not yet read", ["shard"])

_FLUSH_STATES = ("pending", "done", "failed")
COUNTS_TTL_S = 60.0  # the index's chunk and vector counts are a GROUP BY over every chunk: once a minute


def scope_kind(scope: str) -> str:
    """A scope's bounded label: its channel and chat kind, without the ids (``telegram-chat-5`` →
    ``telegram-chat``, ``slack-T1-U2`` → ``slack``, ``global``, ``knowledge``)."""
    parts = scope.split("-")
    if len(parts) > 2 and parts[1] in ("chat", "channel", "thread"):
        return f"{parts[0]}-{parts[1]}"
    return parts[0]


def observe_model(model: str, outcome: str, seconds: float) -> None:
    MODEL_REQUESTS.labels(model, outcome).inc()
    MODEL_SECONDS.labels(model).observe(seconds)


def observe_tokens(model: str, prompt: int, completion: int, *, estimated: bool) -> None:
    flag = "true" if estimated else "false"
    MODEL_TOKENS.labels(model, "prompt", flag).inc(prompt)
    MODEL_TOKENS.labels(model, "completion", flag).inc(completion)


def observe_search(seconds: float, results: int) -> None:
    SEARCH_SECONDS.observe(seconds)
    SEARCH_RESULTS.observe(results)
    if not results:
        SEARCHES_EMPTY.inc()


class WorkspaceState(Protocol):
    """What a scrape reads of one served workspace (the app's ``Services`` is one): a protocol, so
    that metrics, which nearly every module imports, imports none of them back."""

    @property
    def config(self) -> AppConfig: ...

    @property
    def is_open(self) -> bool: ...

    @property
    def conversations(self) -> ConversationStore: ...

    @property
    def memory(self) -> MemoryManager: ...

    def nightly_last_success(self) -> datetime | None: ...


class WorkspaceCollector(Collector):
    """The state of the workspaces this process serves (one, or each held shard's), read at scrape
    time: flush jobs by state and the oldest pending one's age, chunks and vectors per scope kind,
    the last nightly success. A workspace that cannot be read is logged and left out of the scrape."""

    def __init__(self, sources: Callable[[], Iterable[WorkspaceState]]) -> None:
        self._sources = sources
        self._counts: dict[str, tuple[float, dict[str, tuple[int, int]]]] = {}
        self._lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily("membridge_flush_jobs", "Flush jobs by state", labels=["state"])
        oldest = GaugeMetricFamily("membridge_flush_oldest_pending_age_seconds",
                                   "Age of the oldest pending flush job (0: none pending)")
        chunks = GaugeMetricFamily("membridge_indexed_chunks", "Chunks in the index by scope kind", labels=["kind"])
        vectors = GaugeMetricFamily("membridge_indexed_vectors", "Chunks with a vector, by scope kind",
                                    labels=["kind"])
        nightly = GaugeMetricFamily("membridge_nightly_last_success_timestamp_seconds",
                                    "When the nightly pass last finished with every step ok (0: never)")
        states = dict.fromkeys(_FLUSH_STATES, 0)
        by_kind: dict[str, list[int]] = {}
        oldest_at: float | None = None
        last_success = 0.0
        now = time.time()
        for services in self._sources():
            if not services.is_open:
                continue
            try:
                counts, first_pending = services.conversations.job_backlog()
                for state, count in counts.items():
                    states[state] = states.get(state, 0) + count
                if first_pending is not None:
                    oldest_at = first_pending if oldest_at is None else min(oldest_at, first_pending)
                for scope, (n_chunks, n_vectors) in self._index_counts(services).items():
                    totals = by_kind.setdefault(scope_kind(scope), [0, 0])
                    totals[0] += n_chunks
                    totals[1] += n_vectors
                success = services.nightly_last_success()
                last_success = max(last_success, success.timestamp() if success else 0.0)
            except Exception as exc:  # a scrape never fails for one workspace
                log.warning("metrics: could not read the workspace %s: %s", services.config.workspace, exc)
        for state, count in sorted(states.items()):
            jobs.add_metric([state], count)
        oldest.add_metric([], max(0.0, now - oldest_at) if oldest_at is not None else 0.0)
        for kind, (n_chunks, n_vectors) in sorted(by_kind.items()):
            chunks.add_metric([kind], n_chunks)
            vectors.add_metric([kind], n_vectors)
        nightly.add_metric([], last_success)
        yield from (jobs, oldest, chunks, vectors, nightly)

    def _index_counts(self, services: WorkspaceState) -> dict[str, tuple[int, int]]:
        key = services.config.workspace
        with self._lock:
            stamp, counts = self._counts.get(key, (0.0, {}))
        if time.monotonic() - stamp > COUNTS_TTL_S:
            counts = services.memory.index_counts()
            with self._lock:
                self._counts[key] = (time.monotonic(), counts)
        return counts


def watch_workspaces(sources: Callable[[], Iterable[WorkspaceState]]) -> Callable[[], None]:
    """Register a :class:`WorkspaceCollector` for this process; returns what unregisters it."""
    collector = WorkspaceCollector(sources)
    REGISTRY.register(collector)
    return lambda: REGISTRY.unregister(collector)
