"""Conversations: sessions, messages and turns in SQLite, flush jobs, retention and a scope's view of them.

Knows nothing of chats or channels beyond the ids it is given; stores what the bridge hands it.
May import ``config``, ``files/`` and the index's database; never the manager or retrieval.
"""
