"""The index: SQLite + FTS5 tables of files, chunks and entries, the keyword search over them, and sync.

Scans the workspace, chunks what changed, and writes rows and vectors (the vectors come from ``vectors/``).
May import ``config``, ``files/`` and ``vectors/``; never the manager, retrieval or anything above it.
"""
