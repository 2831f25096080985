"""The shard counts of sharded queues, as recorded in Redis for tools and workers.

``<ns>:shards`` is a hash: queue name -> shard count. A sharded queue writes its count
there on first use (``AsyncShardedQueue.register``); a worker or ``durq stats`` told to
use a queue reads it to find the shards.
"""

from __future__ import annotations

from durq.protocol.calls import Command, Op

__all__ = ["shard_counts"]


def shard_counts(namespace: str) -> Op[dict[str, int]]:
    """Every sharded queue of ``namespace`` and its shard count."""
    raw = yield Command(("HGETALL", f"{namespace}:shards"))
    pairs = list(raw)
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): int(v)
        for k, v in zip(pairs[::2], pairs[1::2], strict=True)
    }
