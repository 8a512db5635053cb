"""Past one machine (DESIGN.md §5): receivers and shard workers on Redis Streams.

Off unless ``cluster.redis_url`` is set; the single process (``membridge run``) never imports it.
A receiver (:mod:`.receiver`) takes messages in, dedupes them and appends each to the stream of
its scope's virtual shard; a worker (:mod:`.worker`) holds shard leases (:mod:`.leases`) and runs
each held shard (:mod:`.shard`) against the shard's own ordinary workspace.
"""
