"""Live workers: each registers itself with a heartbeat, so tools can list them.

``<ns>:workers`` is a set of worker ids; ``<ns>:worker:<id>`` a hash (host, pid, queues,
started, concurrency, jobs in hand as JSON, last beat, and running totals per queue for
the dashboard's latency charts) that expires three heartbeats after
the last one. A listed id whose hash expired belongs to a dead worker and is pruned by
readers.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from typing import Any

import orjson
from redis.asyncio import Redis as AsyncRedis

__all__ = ["WorkerRegistry", "list_workers", "new_worker_id"]

_MAX_JOBS_LISTED = 100


def new_worker_id() -> str:
    """``<host>:<pid>:<random>``: unique, and readable in listings."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class WorkerRegistry:
    """Writes one worker's heartbeat."""

    def __init__(
        self, client: AsyncRedis, namespace: str, worker_id: str, info: dict[str, Any]
    ) -> None:
        self.client = client
        self.set_key = f"{namespace}:workers"
        self.key = f"{namespace}:worker:{worker_id}"
        self.worker_id = worker_id
        self.info = info

    async def beat(
        self, ttl: float, jobs: list[dict[str, Any]], totals: dict[str, list[float]] | None = None
    ) -> None:
        """Refresh the worker's entry; it expires after ``ttl`` seconds without a beat.
        ``totals`` are ``WorkerMetrics.totals()``."""
        fields = {
            **{k: orjson.dumps(v) for k, v in self.info.items()},
            "jobs": orjson.dumps(jobs[:_MAX_JOBS_LISTED]),
            "in_hand": orjson.dumps(len(jobs)),
            "beat": orjson.dumps(time.time()),
        }
        if totals is not None:
            fields["totals"] = orjson.dumps(totals)
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(self.set_key, self.worker_id)
        pipe.hset(self.key, mapping=fields)  # type: ignore[arg-type]
        pipe.pexpire(self.key, int(ttl * 1000))
        await pipe.execute()

    async def remove(self) -> None:
        """Unregister (on a clean stop)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.srem(self.set_key, self.worker_id)
        pipe.delete(self.key)
        await pipe.execute()


def list_workers(client: Any, namespace: str = "durq") -> list[dict[str, Any]]:
    """The live workers (blocking client), pruning the ids of dead ones."""
    set_key = f"{namespace}:workers"
    ids = sorted(m.decode() if isinstance(m, bytes) else m for m in client.smembers(set_key))
    pipe = client.pipeline(transaction=False)
    for wid in ids:
        pipe.hgetall(f"{namespace}:worker:{wid}")
    out = []
    for wid, raw in zip(ids, pipe.execute(), strict=True):
        if not raw:
            client.srem(set_key, wid)
            continue
        entry = {k.decode(): orjson.loads(v) for k, v in raw.items()}
        entry["id"] = wid
        out.append(entry)
    return out
