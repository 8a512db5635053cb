"""Meaning as numbers: embedding providers (remote, local, hash), their cache, the vector store and its RAM cache.

The index asks this room for vectors at sync time; retrieval reads them back at search time.
May import ``config``, ``files/`` and the index's database and text helpers (chunker, keyword); nothing above.
"""
