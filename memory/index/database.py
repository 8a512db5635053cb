"""One SQLite file shared by threads and processes: a writer connection behind a lock, and readers.

The memory core's index (``index.db``) and the bridge's turn ledger both open their file
through :class:`Database`, so every writer in a process queues on one lock and no reader waits on
it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_IN_BATCH = 500  # values per IN (...) list: far below SQLite's parameter limit, and short lists plan well
BUSY_TIMEOUT_S = 30.0  # one wait of SQLite's busy handler for another connection's lock
#: How long a write waits in all for another process's write lock before it fails. A forget's
#: VACUUM holds it while it rewrites the whole file: 8.6 s at 100k chunks, so well past one busy
#: timeout on a bigger or busier machine; a turn's write waits it out rather than being lost.
WRITE_WAIT_S = 600.0

log = logging.getLogger(__name__)


class Database:
    """One SQLite file in WAL mode: a writer connection behind a lock, and reader connections.

    The bot calls memory from worker threads. Writes go one at a time through the writer
    (``transaction``, under ``lock``). Reads never wait for that lock: in WAL mode a reader sees
    the last commit while a write is open, so a search or a turn's context is not held up while a
    write waits (up to ``busy_timeout``) for another process's lock. A thread inside a transaction
    or a :meth:`read` snapshot reads through that connection, and so sees its own writes. Reader
    connections are made on demand and reused: there are never more than threads reading at once.
    Other processes coordinate through SQLite's own locking and the workspace lock.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.lock = threading.RLock()
        self.conn = self._connect()
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        # deleted rows are overwritten with zeros, not left in free space: forgetting is for real
        self.conn.execute("PRAGMA secure_delete=ON")
        self._idle_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self._local = threading.local()  # .conn: the connection this thread is inside, if any
        #: Called with the writer connection at the start of every write transaction; what it raises
        #: aborts the transaction before anything is written (a cluster worker's fence on its shard).
        self.guard: Callable[[sqlite3.Connection], None] | None = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        return conn

    @contextmanager
    def _inside(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        outer = getattr(self._local, "conn", None)
        self._local.conn = conn
        try:
            yield conn
        finally:
            self._local.conn = outer

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An immediate (write-locking) transaction: committed on success, rolled back on error."""
        with self.lock, self._inside(self.conn):
            self._begin()
            try:
                if self.guard is not None:
                    self.guard(self.conn)
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, waiting out another process's write lock for up to
        :data:`WRITE_WAIT_S`, one busy timeout after another, each logged."""
        started = time.monotonic()
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                waited = time.monotonic() - started
                if not _is_busy(exc) or waited >= WRITE_WAIT_S:
                    raise
                log.warning("%s: another process has held the database for %.0f s (a forget's vacuum rewrites it "
                            "whole); still waiting for the write lock, up to %.0f s", self.path, waited, WRITE_WAIT_S)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One snapshot for every read inside (``query`` included); inside a transaction or an
        outer snapshot of this thread, that one."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self._reader() as conn, self._inside(conn):
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        current = getattr(self._local, "conn", None)
        if current is not None:
            return self._fetch(current, sql, params)
        with self._reader() as conn:
            return self._fetch(conn, sql, params)

    @staticmethod
    def _fetch(conn: sqlite3.Connection, sql: str, params: Sequence[object]) -> list[sqlite3.Row]:
        cursor = conn.execute(sql, params)
        cursor.row_factory = sqlite3.Row
        return cursor.fetchall()

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A reader connection of this thread's own until the block ends."""
        with self._readers_lock:
            if self._closed:
                raise sqlite3.ProgrammingError(f"{self.path}: the database is closed")
            if self._idle_readers:
                conn = self._idle_readers.pop()
            else:
                conn = self._connect()
        try:
            yield conn
        finally:
            if conn.in_transaction:  # a read that failed inside its snapshot
                conn.execute("ROLLBACK")
            with self._readers_lock:
                if self._closed:  # closed while this thread read: its connection is closed here, by its user
                    conn.close()
                else:
                    self._idle_readers.append(conn)

    def execute_script(self, script: str) -> None:
        with self.lock:
            self.conn.executescript(script)

    def scrub(self, *, vacuum: bool = True) -> None:
        """Leave no deleted byte in the database files: VACUUM rewrites every page (free pages and
        what an older delete left in a page's slack go), then a TRUNCATE checkpoint copies the WAL
        back and empties it (old frames hold old page images). Raises
        :class:`sqlite3.OperationalError` when another connection keeps the WAL busy."""
        with self.lock:
            if vacuum:
                self.conn.execute("VACUUM")
            busy, _frames, _done = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise sqlite3.OperationalError(f"{self.path}: another connection kept the WAL busy; the checkpoint is retried")

    def close(self) -> None:
        """Close every connection; a reader in use is closed by its thread when its read ends
        (closing a connection under a running statement would crash the process)."""
        with self._readers_lock:
            self._closed = True
            for conn in self._idle_readers:
                conn.close()
            self._idle_readers.clear()
        with self.lock:
            self.conn.close()


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED), as opposed to a real error."""
    return exc.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def rows_in(run: Callable[[str, Sequence[object]], Iterable[Sequence[Any]]], sql: str, values: Sequence[object], *,
            before: Sequence[object] = (), after: Sequence[object] = ()) -> Iterator[Sequence[Any]]:
    """The rows of ``sql`` for any number of ``values``, queried in batches through ``run``
    (:meth:`Database.query` or a connection's ``execute``): ``{marks}`` in ``sql`` becomes one
    batch's placeholders, bound between ``before`` and ``after``."""
    for start in range(0, len(values), _IN_BATCH):
        batch = values[start : start + _IN_BATCH]
        yield from run(sql.format(marks=",".join("?" * len(batch))), (*before, *batch, *after))
