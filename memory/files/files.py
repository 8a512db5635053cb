"""Durable file primitives every memory writer shares: read, append, replace atomically.

A crash at any point leaves a file either as it was or as it is meant to be: appends are
fsynced as one block, replacements go through a temp file, fsync and rename (then the folder is
fsynced so the rename itself survives). A file or folder that a write creates has its folder
fsynced too: on ext4 and XFS a new directory entry is not durable until then, so a crash could
otherwise lose a new daily file with every note fsynced into it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def read_text(path: Path) -> str:
    """Read a memory file as UTF-8; undecodable bytes become U+FFFD rather than failing."""
    return path.read_bytes().decode("utf-8", errors="replace")


def append_text(target: Path, text: str) -> None:
    """Append ``text`` as its own block (newline-separated) and fsync, so a crash keeps it whole."""
    make_folders(target.parent)
    block = text if text.endswith("\n") else text + "\n"
    try:  # O_EXCL tells whether this call made the file (O_APPEND keeps other appenders' bytes)
        descriptor = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o666)
        created = True
    except FileExistsError:
        descriptor = os.open(target, os.O_RDWR | os.O_APPEND)
        created = False
    with os.fdopen(descriptor, "a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                block = "\n" + block
        handle.write(block.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    if created:
        fsync_dir(target.parent)


def append_once(target: Path, text: str, marker: str, *, also_in: Sequence[Path] = ()) -> bool:
    """Append ``text``, which holds ``marker``, unless ``target`` (or a file of ``also_in``) holds
    the marker already: the block of a job run again after a crash (a flush, a redelivered
    document's note) is written once. False when it was there. The caller holds the workspace
    lock, so the check and the append are one step for every writer."""
    for path in (target, *also_in):
        if path.is_file() and marker in read_text(path):
            return False
    append_text(target, text)
    return True


def atomic_write(target: Path, data: bytes) -> None:
    """Write via a hidden temp file in the same folder (``.<name>.*.tmp``), fsync, rename."""
    with atomic_file(target) as handle:
        handle.write(data)


@contextmanager
def atomic_file(target: Path) -> Iterator[BinaryIO]:
    """A handle on a hidden temp file beside ``target`` that becomes ``target`` (fsync, rename) when
    the block ends without error; on an error, or a crash, ``target`` is untouched."""
    make_folders(target.parent)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w+b") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def make_folders(folder: Path) -> None:
    """``mkdir -p`` whose new folders survive a crash: each one's entry is fsynced in its parent."""
    missing: list[Path] = []
    while not folder.is_dir() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for new in reversed(missing):
        new.mkdir(exist_ok=True)
        fsync_dir(new.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename or unlink in ``folder`` durable (POSIX only; elsewhere the rename stands alone)."""
    if os.name != "posix":
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
