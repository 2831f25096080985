"""Live workers: each registers itself with a heartbeat, so tools can list them.

The heartbeat (host, pid, queues, started, concurrency, jobs in hand, last beat, and
running totals per queue for the dashboard's latency charts) expires three heartbeats
after the last one: an idle worker beats once per ``IDLE_HEARTBEAT`` (10 min,
``worker.pace``), and its entry then lives three of those (a worker that dies while
idle stays listed up to half an hour; it holds nothing meanwhile). Each beat says how
long until the next at the latest (``every``), so that listings show an idle worker as
such rather than as late. Its keys and the reads and
writes of it are ``durq.protocol.namespace``'s (``beat_worker``, ``remove_worker``,
``live_workers``).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis as AsyncRedis

from durq._async.driver import AsyncDriver
from durq._sync.driver import Driver
from durq.keys import NamespaceKeys
from durq.protocol.namespace import beat_worker, live_workers, remove_worker
from durq.transport.cluster import is_cluster

if TYPE_CHECKING:  # the admin commands read the registry without the worker's runtime
    from durq.metrics import WorkerMetrics
    from durq.worker.batches import BatchPump
    from durq.worker.capacity import Capacity
    from durq.worker.pace import Pace

__all__ = ["WorkerRegistry", "list_workers", "new_worker_id"]

log = logging.getLogger("durq.worker")

_MAX_JOBS_LISTED = 100


def new_worker_id() -> str:
    """``<host>:<pid>:<random>``: unique, and readable in listings."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class WorkerRegistry:
    """Writes one worker's heartbeat."""

    def __init__(
        self, client: AsyncRedis, namespace: str, worker_id: str, info: dict[str, Any]
    ) -> None:
        self.space = NamespaceKeys(namespace)
        self.worker_id = worker_id
        self.info = info
        self._driver = AsyncDriver(client)
        # a Cluster keeps the registry's keys on different nodes: one request per key
        self._batch = not is_cluster(client)
        #: when a beat last reached Redis (time.monotonic()), None before the first
        self.last_ok: float | None = None

    async def beat(
        self,
        ttl: float,
        jobs: list[dict[str, Any]],
        totals: dict[str, list[float]] | None = None,
        every: float | None = None,
    ) -> None:
        """Refresh the worker's entry; it expires after ``ttl`` seconds without a beat.
        ``totals`` are ``WorkerMetrics.totals()``; ``every``: the seconds to the next
        beat at the latest (shown by ``durq workers`` and the dashboard: an idle
        worker's last beat may be minutes old)."""
        fields = {
            **self.info,
            "jobs": jobs[:_MAX_JOBS_LISTED],
            "in_hand": len(jobs),
            "beat": time.time(),
        }
        if every is not None:
            fields["every"] = every
        if totals is not None:
            fields["totals"] = totals
        op = beat_worker(self.space, self.worker_id, fields, ttl, batch=self._batch)
        await self._driver.run(op)

    async def run(
        self,
        pace: Pace,
        capacity: Capacity,
        metrics: WorkerMetrics,
        more: Callable[[], dict[str, Any]] | None = None,
        batches: Iterable[BatchPump] = (),
    ) -> None:
        """Beat at ``pace`` (every heartbeat, stretched while idle), listing the jobs in
        hand, until cancelled; a failed beat is retried at the next one. ``more()``:
        fields to add (the process pool's children); ``batches``: the batch tasks'
        pumps, whose running batch's items are jobs in hand too (a batch of 100 is 100
        jobs in hand)."""
        while True:
            jobs = [
                {
                    "queue": d.job.queue,
                    "id": d.job.id,
                    "task": d.task.name if d.task else None,
                    "attempt": d.job.attempt,
                    "running": d.started is not None,
                }
                for d in capacity.deliveries.values()
            ]
            for pump in batches:
                jobs += [
                    {
                        "queue": job.queue,
                        "id": job.id,
                        "task": pump.task.name,
                        "attempt": job.attempt,
                        "running": True,
                    }
                    for job in pump.holding
                ]
            within = pace.within()
            extra = more() if more is not None else {}
            totals = metrics.totals()
            try:
                self.info.update(extra)
                await self.beat(3 * within, jobs, totals, within)
                self.last_ok = time.monotonic()
            except Exception as exc:
                log.debug("heartbeat failed: %s", exc)
            # an idle worker beats early when what it shows changed (its last job's
            # totals, its pool's children)
            shown = _shown(totals, extra)
            await pace.sleep(within, partial(_changed, shown, metrics, more))

    async def remove(self) -> None:
        """Unregister (on a clean stop)."""
        await self._driver.run(remove_worker(self.space, self.worker_id, batch=self._batch))


def _shown(totals: dict[str, list[float]], extra: dict[str, Any]) -> tuple[Any, ...]:
    """What ``durq workers`` and the dashboard show of a worker beyond its jobs, without
    what changes by itself (a child's memory and age)."""
    children = [
        (c.get("pid"), c.get("state"), c.get("job"), c.get("jobs"))
        for c in extra.get("children") or ()
        if isinstance(c, dict)
    ]
    return totals, children, {k: v for k, v in extra.items() if k != "children"}


def _changed(shown: Any, metrics: WorkerMetrics, more: Callable[[], dict[str, Any]] | None) -> bool:
    return bool(_shown(metrics.totals(), more() if more is not None else {}) != shown)


def list_workers(client: Any, namespace: str = "durq") -> list[dict[str, Any]]:
    """The live workers (blocking client), pruning the ids of dead ones: each entry is
    the worker's heartbeat fields and its ``id``."""
    op = live_workers(NamespaceKeys(namespace), batch=not is_cluster(client), prune=True)
    driver = Driver(client)
    try:
        found = driver.run(op)
    finally:
        driver.release_idle()
    return [{**fields, "id": worker_id} for worker_id, fields in found.items()]
