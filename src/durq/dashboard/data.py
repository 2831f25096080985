"""What the dashboard reads from and does to Redis, through durq's bounded APIs only.

Every read costs O(1), O(log n + page) or O(workers): sizes come from the queues' kept
counters, groups from the top of the groups index, dead letters page by page, jobs by
id. Nothing here walks a whole queue, so pages stay fast with millions of jobs queued.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis.asyncio import Redis as AsyncRedis

from durq._async.namespace import AsyncNamespace
from durq._async.queue import AsyncQueue
from durq.errors import CorruptQueue
from durq.keys import check_queue_name
from durq.models import CancelResult, CancelStatus, GroupInfo, JobInfo, QueueStats
from durq.transport import connection

__all__ = ["DashboardData", "WorkerChild", "WorkerJob", "WorkerEntry"]

log = logging.getLogger("durq.dashboard")

T = TypeVar("T")

# per-queue reads in flight at once, over the whole dashboard (each takes a connection
# while it runs): the sampler, a page and a scrape share them, so thousands of queues
# never ask the pool for thousands of connections at once
_CONCURRENT_READS = 16

# what a workflow cancel did, as the word its page's flash message is chosen by
_WORKFLOW_CANCEL = {CancelStatus.CANCELLED: "cancelled", CancelStatus.FINISHED: "finished"}


@dataclass(frozen=True)
class WorkerJob:
    """A job in a worker's hands, as its heartbeat lists it."""

    queue: str
    id: str
    task: str | None
    attempt: int
    running: bool


@dataclass(frozen=True)
class WorkerChild:
    """A child of a worker's process pool, as its heartbeat lists it."""

    pid: int
    state: str
    job: str | None
    queue: str | None
    task: str | None
    jobs: int
    rss: int
    age: float


def _child(c: dict[str, Any]) -> WorkerChild:
    def text(name: str) -> str | None:
        return None if c.get(name) is None else str(c.get(name))

    def number(name: str) -> float:
        value = c.get(name)
        return float(value) if isinstance(value, (int, float)) else 0.0

    return WorkerChild(
        int(number("pid")), str(c.get("state", "")), text("job"), text("queue"), text("task"),
        int(number("jobs")), int(number("rss")), number("age"),
    )  # fmt: skip


@dataclass(frozen=True)
class WorkerEntry:
    """A live worker, read from its heartbeat."""

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    started: float | None
    beat: float | None
    in_hand: int
    jobs: list[WorkerJob] = field(default_factory=list)
    totals: dict[str, list[float]] = field(default_factory=dict)
    children: list[WorkerChild] = field(default_factory=list)  # its process pool's
    #: seconds to its next beat at the latest, as its last beat said (minutes when idle)
    every: float | None = None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _worker(worker_id: str, fields: dict[str, Any]) -> WorkerEntry:
    """A WorkerEntry from a heartbeat's fields; fields that are missing or malformed (an
    older or newer worker) get neutral values instead of failing the page."""
    jobs = [
        WorkerJob(
            queue=str(j.get("queue", "")),
            id=str(j.get("id", "")),
            task=None if j.get("task") is None else str(j.get("task")),
            attempt=int(j.get("attempt") or 0),
            running=bool(j.get("running")),
        )
        for j in _as_list(fields.get("jobs"))
        if isinstance(j, dict)
    ]
    totals_raw = fields.get("totals")
    totals = {
        str(q): [float(x) for x in v[:4]]
        for q, v in (totals_raw.items() if isinstance(totals_raw, dict) else ())
        if isinstance(v, list) and len(v) >= 4 and all(isinstance(x, (int, float)) for x in v[:4])
    }

    def number(name: str) -> float | None:
        value = fields.get(name)
        return float(value) if isinstance(value, (int, float)) else None

    return WorkerEntry(
        id=worker_id,
        host=str(fields.get("host", "")),
        pid=int(number("pid") or 0),
        queues=[str(q) for q in _as_list(fields.get("queues"))],
        concurrency=int(number("concurrency") or 0),
        started=number("started"),
        beat=number("beat"),
        in_hand=int(number("in_hand") or 0),
        every=number("every"),
        jobs=jobs,
        totals=totals,
        children=[_child(c) for c in _as_list(fields.get("children")) if isinstance(c, dict)],
    )


class DashboardData:
    """The dashboard's reads and actions, on one asyncio Redis client.

    The client connects on first use, in the event loop that serves the app.
    """

    def __init__(self, url: str, namespace: str, max_queues: int) -> None:
        self.namespace = namespace
        self.max_queues = max_queues
        self.client: AsyncRedis = connection.async_client(url)
        self._queues: dict[str, AsyncQueue] = {}
        # the namespace's own keys: its queues, shard counts and workers
        self.space = AsyncNamespace(client=self.client, namespace=namespace)
        self._gate: asyncio.Semaphore | None = None

    async def aclose(self) -> None:
        """Close the connections."""
        await self.client.aclose()

    def queue(self, name: str) -> AsyncQueue:
        """The AsyncQueue ``name`` (InvalidArgument for a malformed name)."""
        found = self._queues.get(name)
        if found is None:
            check_queue_name(name)
            found = AsyncQueue(name, client=self.client, namespace=self.namespace)
            if len(self._queues) < 4 * self.max_queues:  # a bounded cache
                self._queues[name] = found
        return found

    async def queue_names(self) -> tuple[list[str], int]:
        """The namespace's queue names, sorted (at most ``max_queues``), and how many
        there are."""
        names = await self.space.queue_names()
        return names[: self.max_queues], len(names)

    async def shard_counts(self) -> dict[str, int]:
        """Every sharded queue of the namespace and its shard count."""
        return await self.space.shard_counts()

    async def is_queue(self, name: str) -> bool:
        """True when ``name`` is one of the namespace's queues."""
        return await self.space.is_queue(name)

    async def each(
        self, names: Sequence[str], read: Callable[[str], Awaitable[T]]
    ) -> list[T | Exception]:
        """``read(name)`` for each name, concurrently but at most ``_CONCURRENT_READS``
        at a time across the whole dashboard; a read that raised gives its exception."""
        if self._gate is None:
            self._gate = asyncio.Semaphore(_CONCURRENT_READS)
        gate = self._gate

        async def one(name: str) -> T | Exception:
            async with gate:
                try:
                    return await read(name)
                except Exception as exc:  # the caller decides what a failed read means
                    return exc

        return await asyncio.gather(*(one(n) for n in names))

    async def stats(self, names: Sequence[str]) -> dict[str, QueueStats]:
        """Sizes and counters of each queue (O(1) each), read through :meth:`each`. A
        queue whose keys something else overwrote is left out (and logged): `durq doctor`
        names the keys, and the other queues stay visible."""
        results = await self.each(names, lambda name: self.queue(name).stats())
        found: dict[str, QueueStats] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, CorruptQueue):
                log.warning("queue %s left out: %s", name, result)
            elif isinstance(result, Exception):
                raise result
            else:
                found[name] = result
        return found

    async def workers(self) -> list[WorkerEntry]:
        """The live workers, by id. Entries whose heartbeat expired are skipped (the
        workers' own readers prune them; the dashboard writes nothing when browsing)."""
        found = await self.space.live_workers()
        return [_worker(worker_id, fields) for worker_id, fields in found.items()]

    async def groups(
        self, name: str, limit: int, names: Sequence[str] = ()
    ) -> tuple[int, list[GroupInfo]]:
        """The ``limit`` largest groups of a queue (or the groups named), and how many
        groups have ready jobs."""
        return await self.queue(name).groups_page(limit, names)

    async def dead_letters(self, name: str, offset: int, limit: int) -> tuple[int, list[JobInfo]]:
        """One page of a queue's dead letters, newest first, and their total."""
        return await self.queue(name).dead_letters_page(offset, limit)

    async def job(self, name: str, job_id: str) -> JobInfo | None:
        """Everything stored about one job."""
        return await self.queue(name).job(job_id)

    async def stored_result(self, name: str, job_id: str) -> bytes | None:
        """The result (or error) stored for a finished job, with its summary; None
        when none is kept."""
        return await self.queue(name).wait_result(job_id, 0)

    async def replay(self, name: str, ids: Sequence[str] | None) -> int:
        """Replay the dead letters ``ids`` (None: all); returns how many."""
        q = self.queue(name)
        return await (q.replay_all() if ids is None else q.replay(list(ids)))

    async def cancel(self, name: str, ids: Sequence[str]) -> list[CancelResult]:
        """Cancel the jobs ``ids`` (see ``AsyncQueue.cancel``)."""
        return await self.queue(name).cancel(list(ids))

    async def cancel_workflow(self, name: str, workflow_id: str) -> str:
        """Cancel the workflow ``workflow_id`` whose home is queue ``name`` (see
        ``WorkflowHandle.cancel``): ``cancelled``, ``finished`` (it had ended: nothing
        changed) or ``not_found``."""
        status, _state = await self.queue(name).cancel_workflow(workflow_id)
        return _WORKFLOW_CANCEL.get(status, "not_found")

    async def purge(self, name: str, ids: Sequence[str] | None) -> int:
        """Delete the dead letters ``ids`` (None: all); returns how many."""
        q = self.queue(name)
        return await (q.purge_all() if ids is None else q.purge(list(ids)))
