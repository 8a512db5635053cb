"""Waiting on a log line: the signal a test has when the code under test says what it is doing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class LogSeen(logging.Handler):
    """``seen`` is set once a record whose message contains ``needle`` is logged (from any thread)."""

    def __init__(self, needle: str) -> None:
        super().__init__()
        self.needle, self.seen = needle, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.seen.set()


@contextmanager
def watching(logger: str, needle: str) -> Iterator[LogSeen]:
    """A :class:`LogSeen` on ``logger`` for the ``with`` block."""
    handler = LogSeen(needle)
    logging.getLogger(logger).addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger(logger).removeHandler(handler)
