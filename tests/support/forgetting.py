"""Plant a token in every place a scope keeps text, for the forget tests (in-process and killed)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from memory import MemoryManager, Turn, WorkspaceLock
from memory.privacy.forgetting import Forgetter


def plant(manager: MemoryManager, forgetter: Forgetter, scope: str, token: str) -> None:
    """The token in a daily file and its version, MEMORY.md and two versions, a dream diary, a user message, a tool
    call's escaped arguments and a session summary; beside text that must stay. Indexed."""
    ws = manager.workspace
    manager.append_daily(scope, f"- the {token} box is in the attic\n- likes green tea")
    day = sorted(ws.daily_dir(scope).glob("*.md"))[0].relative_to(ws.scope_dir(scope)).as_posix()
    forgetter.memory_file.write(scope, forgetter.memory_file.read(scope, day), "console edit", file=day)  # a version
    forgetter.memory_file.write(scope, f"- {token.upper()} code is 4411\n- lives in Porto\n".encode(), "test")
    forgetter.memory_file.write(scope, f"- lives in Porto\n- {token} code is 4411\n".encode(), "test")
    diary = ws.dreams_dir(scope) / "2026-12-01.md"
    diary.parent.mkdir(parents=True, exist_ok=True)
    diary.write_text(f"## 23:50\nNoticed the {token} again.\nA calm day.\n", encoding="utf-8")
    store = forgetter.conversations
    session = store.ensure_session(f"{scope}|chat", scope).id
    store.append_messages(session, [
        Turn("user", "hello there"), Turn("assistant", "hi"),
        Turn("user", f"remember {token}"),
        Turn("assistant", "", {"tool_calls": json.dumps([{"id": "c1", "type": "function", "function": {
            "name": "memory_write", "arguments": json.dumps({"text": token})}}])}),
        Turn("tool", "saved", {"tool_call_id": "c1"}), Turn("assistant", "noted"),
    ])
    job = store.trim(session, 3, "trim", "2026-12-01")
    assert job is not None
    assert store.remember_summary(job, f"- talked about {token}\n- said hello", 2000)
    assert manager.indexer.sync(scope).ok
    manager.indexer.finish_indexing()


def occurrences(root: Path, token: str) -> dict[str, int]:
    """Files under ``root`` (index.db, -wal, -shm, LanceDB data and manifests) holding ``token`` in
    any case, read as bytes, with their counts."""
    needle = token.encode("utf-8").lower()
    counts = {}
    for path in root.rglob("*"):
        if path.is_file():
            found = path.read_bytes().lower().count(needle)
            if found:
                counts[str(path.relative_to(root))] = found
    return counts


class ForgetAt:
    """A forget that arrives at a chosen moment of another thread's work.

    Called there (e.g. from a patched method), it starts ``forgetter.forget(scope, text)`` in a thread
    of its own and returns once that forget has finished, or is waiting for the workspace lock
    that the caller holds: the forget lands exactly at that point, whatever the scheduler does.
    """

    def __init__(self, forgetter: Forgetter, scope: str, text: str) -> None:
        self.forgetter, self.scope, self.text = forgetter, scope, text
        self.landed = threading.Event()  # finished, or waiting for the lock
        self._thread = threading.Thread(target=self._forget, name="forget-at")
        manager = forgetter.memory
        manager.lock = _SignallingLock(manager.lock, self._thread, self.landed)  # type: ignore[assignment]

    def __call__(self) -> None:
        if not self._thread.is_alive() and not self.landed.is_set():
            self._thread.start()
            self.landed.wait()

    def _forget(self) -> None:
        try:
            self.forgetter.forget(self.scope, self.text)
        finally:
            self.landed.set()

    def join(self) -> None:
        self._thread.join()


class _SignallingLock:
    """The workspace lock, telling when one thread has to wait for it."""

    def __init__(self, inner: WorkspaceLock, waiter: threading.Thread, waiting: threading.Event) -> None:
        self.inner, self.waiter, self.waiting = inner, waiter, waiting

    def acquire(self) -> None:
        if threading.current_thread() is self.waiter and not self.inner.try_acquire(0):
            self.waiting.set()
            self.inner.acquire()
        elif threading.current_thread() is not self.waiter:
            self.inner.acquire()

    def try_acquire(self, timeout_s: float) -> bool:
        return self.inner.try_acquire(timeout_s)

    def release(self) -> None:
        self.inner.release()

    def __enter__(self) -> _SignallingLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
