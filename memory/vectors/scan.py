"""The scan of the blocks in RAM: every row of the scopes searched, cut into stripes across threads.

A search reads every row (:mod:`.compact` says why nothing coarser will do), so at 100k chunks a
big scope and the knowledge base are ~624k rows: ~22 ms on one core, most of a search. SimSIMD's
kernel lets go of the GIL, so the rows are cut into stripes that a few threads take from one
queue, the searching thread among them (bench/README.md: ~12 ms on two cores). A scope of a few
thousand rows is one stripe, scanned by the searching thread alone: handing it to another would
cost more than the scan. The same threads read the keyword index while the searching one embeds
a question that such a scan follows (:class:`Beside`).
"""

from __future__ import annotations

import functools
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from . import compact, heads

B = TypeVar("B")

#: The fewest rows worth a stripe of their own.
STRIPE_ROWS = 32_768
#: Threads that scan at once, the searching one included: the stripes share one memory bus, so more
#: than a few gain nothing.
SCAN_THREADS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@dataclass(frozen=True)
class Snapshot:
    """What a search reads of one block, taken under the block's lock; scanned without it."""

    codes: np.ndarray
    scales: np.ndarray
    ids: list[str]  # row -> its entry, or the first of its entries
    alive: np.ndarray | None  # None: every row is live
    shared: Mapping[int, tuple[str, ...]]  # row -> its entries, for a row that more than one has
    heads: heads.Heads | None  # a big block's first pass (:mod:`.heads`)

    def owners(self, row: int) -> tuple[str, ...]:
        """The entries that have the vector of ``row``."""
        return self.shared.get(row) or (self.ids[row],)


@dataclass(frozen=True)
class _Stripe:
    snapshot: Snapshot
    first: int
    last: int


def top(snapshots: Sequence[Snapshot], query: np.ndarray, limit: int) -> list[tuple[str, float]]:
    """The ``limit`` entries of ``snapshots`` nearest ``query`` by their rows' compact (approximate)
    similarity, best first: the best ``limit`` rows of each stripe hold them, whichever rows are
    shared."""
    encoded = compact.encode_query(np.asarray(query, dtype=np.float32))
    head_queries = {id(s.heads.axes): s.heads.axes.query(query) for s in snapshots if s.heads is not None}
    stripes = _stripes(snapshots)

    def scan(stripe: _Stripe) -> list[tuple[str, float]]:
        snapshot, first, last = stripe.snapshot, stripe.first, stripe.last
        alive = None if snapshot.alive is None else snapshot.alive[first:last]
        codes, scales = snapshot.codes[first:last], snapshot.scales[first:last]
        if snapshot.heads is None:
            rows, scores = compact.best(codes, scales, alive, *encoded, limit)
        else:
            rows, scores = heads.best(snapshot.heads, first, last, codes, scales, alive, encoded,
                                      head_queries[id(snapshot.heads.axes)], limit)
        return [(owner, float(score)) for row, score in zip(rows.tolist(), scores.tolist(), strict=True)
                for owner in snapshot.owners(first + row)]

    found = _run(scan, stripes)
    hits = [hit for stripe_hits in found for hit in stripe_hits]
    hits.sort(key=lambda hit: -hit[1])
    return hits[:limit]


def _stripes(snapshots: Sequence[Snapshot]) -> list[_Stripe]:
    """The snapshots cut into stripes, about two a thread in all (so that the threads end together
    even when the scopes differ in size) and none cut below :data:`STRIPE_ROWS` rows: a smaller
    snapshot is one stripe."""
    total = sum(len(snapshot.codes) for snapshot in snapshots)
    size = max(STRIPE_ROWS, -(-total // (2 * SCAN_THREADS)))
    stripes = []
    for snapshot in snapshots:
        rows = len(snapshot.codes)
        count = max(1, round(rows / size))
        stripes += [_Stripe(snapshot, rows * part // count, rows * (part + 1) // count) for part in range(count)]
    return stripes


def _run(scan: Callable[[_Stripe], list[tuple[str, float]]], stripes: list[_Stripe]) -> list[list[tuple[str, float]]]:
    """Each stripe's hits, in the stripes' order; the stripes taken from one queue by the calling
    thread and up to ``SCAN_THREADS - 1`` pool threads, one for each further :data:`STRIPE_ROWS` rows.

    The calling thread waits only for the stripes a helper took, never for a helper to start: one
    still queued behind another search's finds nothing left and returns, so a busy pool costs a
    search nothing but its own scan."""
    queue = deque(enumerate(stripes))
    found: list[list[tuple[str, float]] | BaseException] = [[] for _ in stripes]
    finished = [threading.Event() for _ in stripes]

    def work() -> None:
        while True:
            try:
                index, stripe = queue.popleft()
            except IndexError:
                return
            try:
                found[index] = scan(stripe)
            except BaseException as exc:  # raised again in the searching thread
                found[index] = exc
            finally:
                finished[index].set()

    rows = sum(stripe.last - stripe.first for stripe in stripes)
    for _ in range(min(threads_for(rows), len(stripes)) - 1):
        _pool().submit(work)
    work()
    for event in finished:
        event.wait()
    failed = [hits for hits in found if isinstance(hits, BaseException)]
    if failed:
        raise failed[0]
    return [hits for hits in found if not isinstance(hits, BaseException)]


class Beside(Generic[B]):
    """``helper()`` on a pool thread while the caller goes on. A search reads the keyword index
    this way while its question is embedded and the scan begins, before a scan that takes both cores
    (bench/README.md, "The keyword side beside the question"): a scan's stripes queue behind it on
    the pool, so that thread joins the scan once the keyword side is read, and no core waits. A
    helper no pool thread has started by the time :meth:`result` wants it is run by the caller: a
    busy pool costs the search only the overlap."""

    def __init__(self, helper: Callable[[], B]) -> None:
        self._helper = helper
        self._claimed = threading.Lock()  # whoever takes it runs the helper
        self._done = threading.Event()
        self._outcome: list[B | BaseException] = []
        _pool().submit(self._claim)

    def _claim(self) -> None:
        """Run the helper, unless another thread has taken it."""
        if not self._claimed.acquire(blocking=False):
            return
        try:
            self._outcome.append(self._helper())
        except BaseException as exc:  # raised again in the calling thread
            self._outcome.append(exc)
        finally:
            self._done.set()

    def result(self) -> B:
        """The helper's result (or its error, raised here): run by the calling thread if no pool
        thread has started it, else waited for."""
        self._claim()
        self._done.wait()
        outcome = self._outcome[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def threads_for(rows: int) -> int:
    """The threads a scan of ``rows`` rows runs on, the searching one included: one for each
    :data:`STRIPE_ROWS` rows (rounded, as stripes are cut), at most :data:`SCAN_THREADS`."""
    return max(1, min(SCAN_THREADS, round(rows / STRIPE_ROWS)))


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """The threads that help the searching one, made on first need; bounded. A forked child makes
    its own (the parent's threads do not exist there)."""
    return ThreadPoolExecutor(max_workers=max(1, SCAN_THREADS - 1), thread_name_prefix="membridge-scan")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.cache_clear)
