"""What the event loop does: which callbacks held it, and whether our code did I/O on it.

asyncio's debug mode reports every callback that took longer than ``slow_callback_duration`` by the
wall clock. On a shared 2-core machine with a load of 15, a callback that needs 10 ms of CPU can take
150 ms of wall time without blocking anything: the loop thread sat in the kernel's run queue, or
waited for the GIL while other threads ran. So the two ways a callback really holds the loop are
measured apart, each without the clock of a busy machine:

- :class:`LoopClock` times every callback as debug mode does and takes the loop thread's own CPU
  time from the scheduler (``/proc/<pid>/task/<tid>/schedstat``: time on a CPU, time waiting for
  one): a callback that computed for longer than the threshold held the loop. Time the garbage
  collector spent in it is not counted: a collection runs wherever an allocation triggers it and
  stops every thread alike, so no code can move it off the loop. Linux only.
- :class:`LoopIO` records every call of our code into SQLite, the workspace lock or ``open`` on the
  loop's thread: waits on disks and other processes, which must not happen there at all.
"""

from __future__ import annotations

import asyncio
import builtins
import gc
import inspect
import io
import os
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from memory.files.locks import WorkspaceLock
from memory.index.database import Database


def _schedstat(fd: int) -> tuple[float, float]:
    """(seconds on a CPU, seconds waiting for one) of the thread whose ``schedstat`` is open as ``fd``."""
    on_cpu, waiting, _slices = os.pread(fd, 128, 0).split()
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def describe(handle: asyncio.Handle) -> str:
    """A callback; for a task's step, where that task stopped after it (the step ran up to there)."""
    task = getattr(handle._callback, "__self__", None)  # type: ignore[attr-defined]
    if not isinstance(task, asyncio.Task):
        return repr(handle)
    frames, awaiting = [], task.get_coro()
    while awaiting is not None and (frame := getattr(awaiting, "cr_frame", getattr(awaiting, "gi_frame", None))):
        frames.append((frame, frame.f_lineno))
        awaiting = getattr(awaiting, "cr_await", getattr(awaiting, "gi_yieldfrom", None))
    return f"{task.get_name()} stopped at:\n" + "".join(traceback.StackSummary.extract(frames).format()[-6:])


class LoopClock:
    """Times every callback of the running loop while entered (a context manager used on the loop)."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self.blocked: list[str] = []
        self.starved: list[str] = []
        self.most_cpu = 0.0  # the most CPU one slow callback used (garbage collection aside)
        self._original = asyncio.events.Handle._run
        self._fd = -1
        self._gc_s = 0.0  # CPU time the collector spent on the loop's thread so far
        self._gc_started: float | None = None
        self._loop_thread = threading.get_ident()

    def __enter__(self) -> LoopClock:
        self._fd = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
        clock, original = self, self._original

        def timed(handle: asyncio.Handle) -> None:
            started, (cpu, waiting), collected = time.perf_counter(), _schedstat(clock._fd), clock._gc_s
            try:
                original(handle)
            finally:
                took = time.perf_counter() - started
                if took > clock.threshold_s:
                    clock._judge(handle, took, cpu, waiting, clock._gc_s - collected)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        gc.callbacks.append(self._collecting)
        return self

    def __exit__(self, *exc_info: object) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]
        gc.callbacks.remove(self._collecting)
        os.close(self._fd)

    def _collecting(self, phase: str, _info: dict[str, int]) -> None:
        if threading.get_ident() != self._loop_thread:
            return
        if phase == "start":
            self._gc_started = time.thread_time()
        elif self._gc_started is not None:
            self._gc_s += time.thread_time() - self._gc_started
            self._gc_started = None

    def _judge(self, handle: asyncio.Handle, took: float, cpu: float, waiting: float, collected: float) -> None:
        cpu_now, waiting_now = _schedstat(self._fd)
        on_cpu, queued = cpu_now - cpu, waiting_now - waiting
        record = (f"{describe(handle)} took {took:.3f} s: {on_cpu:.3f} s on a CPU ({collected:.3f} s of it collecting"
                  f" garbage), {queued:.3f} s waiting for one, {max(0.0, took - on_cpu - queued):.3f} s asleep"
                  " (I/O, a lock or the GIL)")
        (self.blocked if on_cpu - collected > self.threshold_s else self.starved).append(record)
        self.most_cpu = max(self.most_cpu, on_cpu - collected)


_ROOT = Path(__file__).resolve().parents[2]
_OURS = tuple(str(_ROOT / package) + "/" for package in ("memory", "bridge", "channels", "plugins"))


class LoopIO:
    """Records every time our code touches SQLite, the workspace lock or a file on the loop's thread:
    none of these may run there (they wait on disks and on other processes), however fast they are
    today. Patches :class:`memory.index.database.Database`, :class:`memory.files.locks.WorkspaceLock` and ``open``
    through ``monkeypatch`` while the test runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.touches: Counter[str] = Counter()
        self._loop_thread = threading.get_ident()
        for owner, names in ((Database, ("transaction", "read", "query", "execute_script")),
                             (WorkspaceLock, ("acquire", "try_acquire"))):
            for name in names:
                monkeypatch.setattr(owner, name, self._watched(f"{owner.__name__}.{name}", getattr(owner, name)))
        watched_open = self._watched("open", io.open)
        monkeypatch.setattr(io, "open", watched_open)
        monkeypatch.setattr(builtins, "open", watched_open)

    def _watched(self, what: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == self._loop_thread:
                where = _our_caller(sys._getframe(1))
                if where is not None:
                    self.touches[f"{what} from {where}"] += 1
            return original(*args, **kwargs)

        return call


def _our_caller(frame: FrameType | None) -> str | None:
    """Where the call was decided: the innermost coroutine (sync code it calls runs on the loop), or
    the first frame of the repository's code when a plain callback made it. Only the product's code
    (not a test's) is reported."""
    first: FrameType | None = None
    while frame is not None:
        name = frame.f_code.co_filename
        ours = name.startswith(str(_ROOT)) and "/.venv/" not in name
        if ours and first is None:
            first = frame
        if ours and frame.f_code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
            return _place(frame) if name.startswith(_OURS) else None
        frame = frame.f_back
    return _place(first) if first is not None and first.f_code.co_filename.startswith(_OURS) else None

def _place(frame: FrameType) -> str:
    return f"{Path(frame.f_code.co_filename).relative_to(_ROOT)}:{frame.f_lineno} ({frame.f_code.co_name})"
