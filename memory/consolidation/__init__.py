"""Consolidation: the flush that summarises conversations into daily files, and Deep Dream over MEMORY.md.

Both are async and leave the event loop through the caller's :class:`~.offload.Offload`.
May import ``config``, the manager, ``files/``, ``conversations/`` and the index's chunker.
"""
