"""One write lock per workspace, shared by threads and processes.

The running bot and a ``membridge memory sync`` in another shell write the same SQLite file and
LanceDB table. LanceDB's ``merge_insert`` from two processes inserts duplicates, so every write to a
workspace holds this lock. It is re-entrant within a thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from filelock import BaseFileLock


class WorkspaceLockTimeout(RuntimeError):
    """Another process held the workspace lock for longer than we were willing to wait."""


#: A condition a write needs, checked once the workspace lock is held (e.g. "the message this turn
#: answers is still stored": a forget deletes it under the same lock, so it cannot slip in between).
WriteGuard = Callable[[], bool]


class WriteWithdrawn(RuntimeError):
    """A guarded write whose condition no longer held under the lock: nothing was written."""


def check_guard(guard: WriteGuard | None, what: str) -> None:
    """Raise :class:`WriteWithdrawn` (naming ``what``) when ``guard`` no longer holds; call it
    with the workspace lock held, right before the write."""
    if guard is not None and not guard():
        raise WriteWithdrawn(f"{what} was not written: the message it came from was forgotten meanwhile")


class WorkspaceLock:
    """A re-entrant lock: a thread lock in front of a cross-process file lock."""

    def __init__(self, root: Path, timeout_s: float = 120.0) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._path = root / ".lock"
        self._thread_lock = threading.RLock()
        self._file_lock: BaseFileLock | None = None  # made on first use (see _file)
        self._timeout_s = timeout_s
        #: Called once the lock is held; what it raises releases the lock again and reaches the
        #: caller before it writes anything (a cluster worker's fence on its shard).
        self.guard: Callable[[], None] | None = None

    def _file(self) -> BaseFileLock:
        """The cross-process lock, made (and filelock imported, ~15 ms) when first taken: a command
        that only reads never takes it."""
        if self._file_lock is None:
            from filelock import FileLock

            self._file_lock = FileLock(str(self._path), thread_local=False)
        return self._file_lock

    def acquire(self) -> None:
        from filelock import Timeout

        self._thread_lock.acquire()
        try:
            self._file().acquire(timeout=self._timeout_s)
        except Timeout as exc:
            self._thread_lock.release()
            raise WorkspaceLockTimeout(
                f"another membridge process has held {self._path} for over {self._timeout_s:.0f}s; "
                "wait for it to finish or stop it"
            ) from exc
        except BaseException:
            self._thread_lock.release()
            raise
        self._check_guard()

    def try_acquire(self, timeout_s: float) -> bool:
        """Acquire within ``timeout_s`` or give up: False (nothing held) when another thread or
        process keeps it longer, for callers that can do without (a search's auto-sync)."""
        from filelock import Timeout

        deadline = time.monotonic() + timeout_s
        if not self._thread_lock.acquire(timeout=timeout_s):
            return False
        try:
            self._file().acquire(timeout=max(0.0, deadline - time.monotonic()))
        except Timeout:
            self._thread_lock.release()
            return False
        except BaseException:
            self._thread_lock.release()
            raise
        self._check_guard()
        return True

    def _check_guard(self) -> None:
        if self.guard is None:
            return
        try:
            self.guard()
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        self._file().release()
        self._thread_lock.release()

    def __enter__(self) -> WorkspaceLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
