"""ShardedQueue: one queue spread over N shards, used from blocking code.

GENERATED from durq/_async/sharded.py by scripts/unasync.py: edit that file.

Each shard is a full queue (``<name>~<i>``) with a hash tag of its own, so on a Redis
Cluster the shards live on different primaries and one busy queue can use them all. A
job goes to the shard of its group, else of its dedup key, else of its id (fixed before
the first try, so a retried enqueue finds the same shard): per-group order, limits and
fairness, and dedup by key, hold within a shard exactly as in a plain queue. The shard
count is recorded in Redis (``<ns>:shards``) on the first enqueue; a client that names
another count is refused, and tools (``durq stats``, workers) read it from there.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace as with_changes
from typing import Any, TypeVar

from redis import Redis

from durq._sync.queue import Queue, Reason, per_job
from durq._sync.sharded_admin import ShardedQueueAdmin
from durq.backoff import Backoff
from durq.codec import PayloadCodec
from durq.durability import Durability
from durq.errors import InvalidArgument
from durq.keys import NamespaceKeys, check_shards, shard_index, shard_name, split_shard
from durq.models import (
    EnqueueResult,
    Job,
    Message,
    Outcome,
)
from durq.protocol import namespace
from durq.protocol.args import new_ids
from durq.protocol.calls import Op
from durq.protocol.durable import check_signal_name
from durq.protocol.lifecycle import Leased
from durq.transport import connection

__all__ = ["ShardedQueue", "shard_index"]  # shard_index: from durq.keys, where it lives

T = TypeVar("T")
#: the longest block on one shard's wake marker while ``dequeue`` waits on all of them
_TURN = 0.05


class ShardedQueue(ShardedQueueAdmin):
    """A queue of ``shards`` shards, with the API of ``Queue``.

    Args:
        name: the queue name (no '/').
        url: as for ``Queue``; a ``redis+cluster://`` URL spreads the shards over
            the cluster's primaries.
        shards: the number of shards (1..256). Fixed for the life of the queue: the
            count is recorded in Redis, and a client naming another one is refused.
        client: an existing client to use instead of ``url`` (left open on close).
        options: the other ``Queue`` options (namespace, serializer, lease, ...).

    ``dequeue`` with ``wait`` blocks on each shard's wake marker in turn, for at most
    50 ms each; workers do better (one waiter per shard, see ``durq.worker``).
    """

    def __init__(
        self,
        name: str,
        url: str | None = None,
        *,
        shards: int,
        client: Redis | None = None,
        **options: Any,
    ) -> None:
        self.shard_count = check_shards(name, shards)
        self.name = name
        if client is None:
            self.client = connection.sync_client(url)
            self._owns_client = True
        else:
            self.client = client
            self._owns_client = False
        self.shards = [
            Queue(shard_name(name, i), client=self.client, shard_count=shards, **options)
            for i in range(shards)
        ]
        self.namespace = self.shards[0].keys.namespace
        self._registered = False
        self._turn = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} shards={self.shard_count}>"

    # the options every shard shares, as Queue has them (its keys are per shard)

    @property
    def codec(self) -> PayloadCodec:
        """The payload codec (``serializer``, ``max_payload_bytes``)."""
        return self.shards[0].codec

    @property
    def lease(self) -> float:
        """The default lease of ``dequeue``, in seconds."""
        return self.shards[0].lease

    @property
    def max_attempts(self) -> int:
        """The default attempts before a job is dead-lettered."""
        return self.shards[0].max_attempts

    @property
    def backoff(self) -> Backoff:
        """The default retry delay of ``requeue``."""
        return self.shards[0].backoff

    @property
    def result_ttl(self) -> float:
        """How long results passed to ``release`` are kept, in seconds."""
        return self.shards[0].result_ttl

    @property
    def enqueue_retry_for(self) -> float:
        """How long ``enqueue`` keeps retrying through connection errors, in seconds."""
        return self.shards[0].enqueue_retry_for

    @property
    def durability(self) -> Durability | None:
        """What an enqueue waits for before it returns (``durq.Durability``)."""
        return self.shards[0].durability

    def close(self) -> None:
        """Close the connections, if the queue created its own client."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> ShardedQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, op: Op[T]) -> T:
        """Run a protocol operation that names no queue key (e.g. server checks): for
        durq's own layers, not a public API."""
        return self.shards[0]._run(op)

    # -- routing ------------------------------------------------------------------

    def shard_of(self, job: Leased | str) -> Queue:
        """The shard a job (by its ``queue``, e.g. ``emails~3``) or shard name is in."""
        queue = job if isinstance(job, str) else getattr(job, "queue", None)
        base, index = split_shard(queue) if isinstance(queue, str) else ("", None)
        if base != self.name or index is None or index >= self.shard_count:
            raise InvalidArgument(f"{queue!r} is not a shard of {self.name!r}")
        return self.shards[index]

    def route(self, message: Message, group: str | None = None, key: str | None = None) -> int:
        """The shard index of ``message`` (whose id is set): by group, else key, else id."""
        routing = message.group or group or message.key or key or message.id
        return shard_index(str(routing), self.shard_count)

    def register(self) -> None:
        """Record the queue and its shard count (``<ns>:queues``, ``<ns>:shards``).
        Raises InvalidArgument if Redis knows the queue with another shard count."""
        space = NamespaceKeys(self.namespace)
        self.shards[0]._run(namespace.register_sharded(space, self.name, self.shard_count))
        self._registered = True

    # -- producing ------------------------------------------------------------------

    def enqueue(
        self,
        payload: Any,
        *,
        id: str | None = None,
        delay: float = 0,
        priority: int = 0,
        max_attempts: int | None = None,
        group: str | None = None,
        key: str | None = None,
        replace: bool = False,
        expires: float | datetime.datetime | None = None,
        ttl: float | None = None,
        debounce: float | None = None,
        max_wait: float | None = None,
        keep_last: bool = False,
    ) -> EnqueueResult:
        """Add one job (options as for ``Queue.enqueue``); ``result.queue`` names
        the shard it went to."""
        message = Message(
            payload, id, delay, priority, max_attempts, group, key, replace,
            expires, ttl, debounce, max_wait, keep_last,
        )  # fmt: skip
        return (self.enqueue_many([message]))[0]

    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        delay: float = 0,
        priority: int = 0,
        max_attempts: int | None = None,
        group: str | None = None,
        key: str | None = None,
        replace: bool = False,
    ) -> list[EnqueueResult]:
        """Add many jobs, one round trip per shard they go to (options as for
        ``Queue.enqueue_many``); results in order."""
        messages = [p if isinstance(p, Message) else Message(p) for p in payloads]
        if not messages:
            return []
        fresh = iter(new_ids(sum(1 for m in messages if m.id is None)))
        messages = [m if m.id is not None else with_changes(m, id=next(fresh)) for m in messages]
        options: dict[str, Any] = {"delay": delay, "priority": priority, "group": group}
        options.update(max_attempts=max_attempts, key=key, replace=replace)
        if not self._registered:
            # checked before the name is recorded: bad input registers nothing
            self.shards[0]._enqueue_op(messages, [], **options).close()
            self.register()
        by_shard: dict[int, list[int]] = {}
        for i, m in enumerate(messages):
            by_shard.setdefault(self.route(m, group, key), []).append(i)
        results: list[Any] = [None] * len(messages)
        for index, positions in by_shard.items():
            shard = self.shards[index]
            done = shard.enqueue_many([messages[i] for i in positions], **options)
            for i, result in zip(positions, done, strict=True):
                results[i] = with_changes(result, queue=shard.name)
        return results

    def enqueue_encoded(
        self, jobs: Sequence[tuple[str, int, bytes]], *, max_attempts: int | None = None
    ) -> list[EnqueueResult]:
        """Add plain jobs whose payloads are encoded already (see
        ``Queue.enqueue_encoded``), each to the shard of its id, one round trip per
        shard; results in order, ``result.queue`` naming the shard."""
        if not jobs:
            return []
        for _id, _codec, data in jobs:
            self.codec.check_size(data)  # nothing is enqueued if one is too large
        if not self._registered:
            self.register()
        by_shard: dict[int, list[int]] = {}
        for i, job in enumerate(jobs):
            by_shard.setdefault(shard_index(job[0], self.shard_count), []).append(i)
        results: list[Any] = [None] * len(jobs)
        for index, positions in by_shard.items():
            shard = self.shards[index]
            mine = [jobs[i] for i in positions]
            done = shard.enqueue_encoded(mine, max_attempts=max_attempts)
            for i, result in zip(positions, done, strict=True):
                results[i] = with_changes(result, queue=shard.name)
        return results

    # -- consuming ------------------------------------------------------------------

    def dequeue(self, *, lease: float | None = None, wait: float | None = None) -> Job | None:
        """Take one ready job from any shard, or None (see ``dequeue_many``)."""
        jobs = self.dequeue_many(1, lease=lease, wait=wait)
        return jobs[0] if jobs else None

    def dequeue_many(
        self, count: int, *, lease: float | None = None, wait: float | None = None
    ) -> list[Job]:
        """Take up to ``count`` jobs, trying the shards in turn from a rotating start;
        with ``wait``, block up to that long (each shard's marker in turn)."""
        give_up = time.monotonic() + (wait or 0)
        while True:
            jobs: list[Job] = []
            for _ in range(self.shard_count):
                shard = self.shards[self._turn % self.shard_count]
                self._turn += 1
                jobs += shard.dequeue_many(count - len(jobs), lease=lease)
                if len(jobs) == count:
                    return jobs
            remaining = give_up - time.monotonic()
            if jobs or remaining <= 0:
                return jobs
            shard = self.shards[self._turn % self.shard_count]
            jobs = shard.dequeue_many(count, lease=lease, wait=min(remaining, _TURN))
            if jobs:
                return jobs

    def _per_shard(self, jobs: Sequence[Leased], call: Any) -> list[Any]:
        """Run ``call(shard, positions)`` for the jobs of each shard; results in order."""
        by_shard: dict[int, list[int]] = {}
        for i, job in enumerate(jobs):
            by_shard.setdefault(self.shards.index(self.shard_of(job)), []).append(i)
        out: list[Any] = [None] * len(jobs)
        for index, positions in by_shard.items():
            for i, value in zip(positions, call(self.shards[index], positions), strict=True):
                out[i] = value
        return out

    def release(self, job: Leased, *, keep: float = 0, result: Any = None) -> None:
        """The job is done (see ``Queue.release``)."""
        self.shard_of(job).release(job, keep=keep, result=result)

    def release_many(
        self,
        jobs: Sequence[Leased],
        *,
        keep: float = 0,
        results: Sequence[bytes | None] | None = None,
    ) -> list[Outcome]:
        """Release many jobs, one round trip per shard; an outcome per job."""

        def call(shard: Queue, at: list[int]) -> list[Outcome]:
            mine = None if results is None else [results[i] for i in at]
            return shard.release_many([jobs[i] for i in at], keep=keep, results=mine)

        return self._per_shard(jobs, call)

    def requeue(
        self, job: Job, *, reason: Reason = None, delay: float | None = None, dead: bool = False
    ) -> Outcome:
        """The job failed (see ``Queue.requeue``)."""
        return self.shard_of(job).requeue(job, reason=reason, delay=delay, dead=dead)

    def requeue_many(
        self,
        jobs: Sequence[Job],
        *,
        reason: Reason | Sequence[Reason] = None,
        delay: float | Sequence[float] | None = None,
        dead: bool | Sequence[bool] = False,
    ) -> list[Outcome]:
        """Requeue many failed jobs, one round trip per shard (see
        ``Queue.requeue_many``: one value for all jobs, or one per job)."""
        reasons = per_job("reason", reason, len(jobs))
        delays = per_job("delay", delay, len(jobs))
        deads = per_job("dead", dead, len(jobs))

        def call(shard: Queue, at: list[int]) -> list[Outcome]:
            return shard.requeue_many(
                [jobs[i] for i in at],
                reason=[reasons[i] for i in at],
                delay=[delays[i] for i in at],
                dead=[deads[i] for i in at],
            )

        return self._per_shard(jobs, call)

    def extend(self, job: Leased, *, lease: float | None = None) -> float:
        """Lengthen the job's lease (see ``Queue.extend``)."""
        return self.shard_of(job).extend(job, lease=lease)

    def extend_many(
        self, jobs: Sequence[Leased], *, lease: float | None = None
    ) -> list[Outcome]:
        """Extend many leases, one round trip per shard."""

        def call(shard: Queue, at: list[int]) -> list[Outcome]:
            return shard.extend_many([jobs[i] for i in at], lease=lease)

        return self._per_shard(jobs, call)

    def defer(self, job: Leased, delay: float = 0) -> None:
        """Put the job back without counting an attempt (see ``Queue.defer``)."""
        self.shard_of(job).defer(job, delay)

    def defer_many(
        self, jobs: Sequence[Leased], delay: float | Sequence[float] = 0
    ) -> list[Outcome]:
        """Defer many jobs, one round trip per shard; ``delay`` is one value or one per
        job."""
        delays = per_job("delay", delay, len(jobs))

        def call(shard: Queue, at: list[int]) -> list[Outcome]:
            return shard.defer_many([jobs[i] for i in at], [delays[i] for i in at])

        return self._per_shard(jobs, call)

    def wait_result(self, job_id: str, timeout: float, *, shard: str) -> bytes | None:
        """The raw result of ``job_id`` in ``shard`` (``EnqueueResult.queue``): a job id
        does not tell its shard (a group or a key may have routed it)."""
        return self.shard_of(shard).wait_result(job_id, timeout)

    # -- job control as the job's holder (cancels and reads: ShardedQueueAdmin) --

    def progress(self, job: Leased, fraction: float, info: Any = None) -> bool:
        """Store how far a job you hold got (see ``Queue.progress``)."""
        return self.shard_of(job).progress(job, fraction, info)

    # -- for workers ------------------------------------------------------------------

    def _run_all(self, operations: Sequence[Op[Any]]) -> list[Any]:
        """Run several operations at once (see ``Queue._run_all``): each names its
        own shard's keys, and the driver sends each request to its slot."""
        return self.shards[0]._run_all(operations)

    # -- durable steps (docs/durable.md) ------------------------------------------------

    def signal(self, name: str, payload: Any = None, **options: Any) -> int:
        """Send signal ``name`` to every shard (see ``Queue.signal``): it enters by
        the shard of its name, which forwards it to the others through its outbox
        (delivered at least once, applied once). Returns how many jobs that shard made
        ready now."""
        home = self.shards[shard_index(check_signal_name(name), len(self.shards))]
        return home.signal(name, payload, **options)
