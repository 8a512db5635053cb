"""Retrieval: find the memories that answer a question (the rules are in :mod:`.scoring`), rerank, recall.

Also the recall log: what auto-recall put before the model, per turn, for the console.
May import ``config``, ``files/``, ``index/`` and ``vectors/``; never the manager.
"""
