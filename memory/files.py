"""Durable file primitives every memory writer shares: read, append, replace atomically.

A crash at any point leaves a file either as it was or as it is meant to be: appends are
fsynced as one block, replacements go through a temp file, fsync and rename (then the folder is
fsynced so the rename itself survives).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def read_text(path: Path) -> str:
    """Read a memory file as UTF-8; undecodable bytes become U+FFFD rather than failing."""
    return path.read_bytes().decode("utf-8", errors="replace")


def append_text(target: Path, text: str) -> None:
    """Append ``text`` as its own block (newline-separated) and fsync, so a crash keeps it whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    block = text if text.endswith("\n") else text + "\n"
    with open(target, "a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                block = "\n" + block
        handle.write(block.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


def atomic_write(target: Path, data: bytes) -> None:
    """Write via a hidden temp file in the same folder (``.<name>.*.tmp``), fsync, rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename or unlink in ``folder`` durable (POSIX only; elsewhere the rename stands alone)."""
    if os.name != "posix":
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
