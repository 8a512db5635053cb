"""Retrieval: find the memories that answer a question (the rules are in :mod:`.scoring`)."""

from __future__ import annotations

from .engine import Retriever
from .result import SearchResult
from .timewindow import TimeWindow, find_window

__all__ = ["Retriever", "SearchResult", "TimeWindow", "find_window"]
