"""Another process holding an SQLite database's write lock until the test lets it go.

The process runs :data:`SCRIPT` with the database's path: it prints ``locked`` once it holds
``BEGIN IMMEDIATE`` and commits when a line arrives on its stdin.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

SCRIPT = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@contextmanager
def write_lock_held(path: Path) -> Iterator[Callable[[], None]]:
    """Holds the lock from entry; the function yielded lets it go (at exit it is let go anyway)."""
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, str(path)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    stdin = process.stdin

    def release() -> None:
        if not stdin.closed:
            stdin.write(b"go\n")
            stdin.close()

    try:
        assert process.stdout.readline() == b"locked\n", "the locking process did not start"
        yield release
        release()
        process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        process.stdout.close()
