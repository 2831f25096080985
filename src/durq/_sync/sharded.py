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

import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import fields
from dataclasses import replace as with_changes
from typing import Any, TypeVar

from redis import Redis

from durq._sync.queue import Queue
from durq.errors import InvalidArgument
from durq.keys import NamespaceKeys, check_shards, shard_name, split_shard
from durq.limits import FlowInfo, merge_flow, shard_settings
from durq.models import (
    BatchRecord,
    CancelResult,
    CancelStatus,
    EnqueueResult,
    GroupInfo,
    Job,
    JobInfo,
    Message,
    Outcome,
    QueueStats,
    Settle,
)
from durq.protocol import namespace
from durq.protocol.args import job_ids, new_ids
from durq.protocol.calls import Op
from durq.protocol.lifecycle import Leased
from durq.transport import connection

__all__ = ["ShardedQueue"]

T = TypeVar("T")
#: the longest block on one shard's wake marker while ``dequeue`` waits on all of them
_TURN = 0.05


def shard_index(key: str, shards: int) -> int:
    """The shard of a routing key (a group, a dedup key or a job id): CRC-32, so every
    client and language agrees."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % shards


class ShardedQueue:
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

    def enqueue(self, payload: Any, **options: Any) -> EnqueueResult:
        """Add one job (options as for ``Queue.enqueue``); ``result.queue`` names
        the shard it went to."""
        return (self.enqueue_many([Message(payload, **options)]))[0]

    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        group: str | None = None,
        key: str | None = None,
        **options: Any,
    ) -> list[EnqueueResult]:
        """Add many jobs, one round trip per shard they go to (options as for
        ``Queue.enqueue_many``); results in order."""
        messages = [p if isinstance(p, Message) else Message(p) for p in payloads]
        if not messages:
            return []
        fresh = iter(new_ids(sum(1 for m in messages if m.id is None)))
        messages = [m if m.id is not None else with_changes(m, id=next(fresh)) for m in messages]
        if not self._registered:
            # checked before the name is recorded: bad input registers nothing
            self.shards[0]._enqueue_op(messages, [], group=group, key=key, **options).close()
            self.register()
        by_shard: dict[int, list[int]] = {}
        for i, m in enumerate(messages):
            by_shard.setdefault(self.route(m, group, key), []).append(i)
        results: list[Any] = [None] * len(messages)
        for index, positions in by_shard.items():
            shard = self.shards[index]
            done = shard.enqueue_many(
                [messages[i] for i in positions], group=group, key=key, **options
            )
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

    def dequeue_batch(
        self,
        max_size: int,
        *,
        max_wait: float = 0.0,
        by_group: bool = False,
        lease: float | None = None,
        wait: float | None = None,
    ) -> list[Job]:
        """Take a batch from one shard, the shards tried in turn from a rotating start
        (see ``Queue.dequeue_batch``); with ``wait``, block up to that long (each
        shard's marker in turn)."""
        give_up = time.monotonic() + (wait or 0)
        options: dict[str, Any] = {"max_wait": max_wait, "by_group": by_group, "lease": lease}
        while True:
            for _ in range(self.shard_count):
                shard = self.shards[self._turn % self.shard_count]
                self._turn += 1
                jobs = shard.dequeue_batch(max_size, **options)
                if jobs:
                    return jobs
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                return []
            shard = self.shards[self._turn % self.shard_count]
            jobs = shard.dequeue_batch(max_size, wait=min(remaining, _TURN), **options)
            if jobs:
                return jobs

    def settle(
        self, jobs: Sequence[Leased], outcomes: Sequence[Settle] | None = None, *, cause: str = ""
    ) -> list[Outcome]:
        """End a batch's jobs (see ``Queue.settle``), one call per shard they are in
        (a batch of ``dequeue_batch`` is in one)."""

        def call(shard: Queue, at: list[int]) -> list[Outcome]:
            mine = None if outcomes is None else [outcomes[i] for i in at]
            return shard.settle([jobs[i] for i in at], mine, cause=cause)

        return self._per_shard(jobs, call)

    def batches(self) -> list[BatchRecord]:
        """Every shard's recent batches, newest first."""
        found = [record for shard in self.shards for record in shard.batches()]
        return sorted(found, key=lambda record: record.at, reverse=True)

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
        self, job: Job, *, reason: Any = None, delay: float | None = None, dead: bool = False
    ) -> Outcome:
        """The job failed (see ``Queue.requeue``)."""
        return self.shard_of(job).requeue(job, reason=reason, delay=delay, dead=dead)

    def requeue_many(self, jobs: Sequence[Job], **options: Any) -> list[Outcome]:
        """Requeue many failed jobs, one round trip per shard (options as for
        ``Queue.requeue_many``, one value for all jobs)."""

        def call(shard: Queue, at: list[int]) -> list[Outcome]:
            return shard.requeue_many([jobs[i] for i in at], **options)

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

    def wait_result(self, job_id: str, timeout: float, *, shard: str) -> bytes | None:
        """The raw result of ``job_id`` in ``shard`` (``EnqueueResult.queue``)."""
        return self.shard_of(shard).wait_result(job_id, timeout)

    # -- inspecting and repairing -----------------------------------------------------

    def stats(self) -> QueueStats:
        """The shards' sizes and counters added up (``server_time``: the latest)."""
        return self._added_up([shard.stats() for shard in self.shards])

    def outbox_stats(self) -> QueueStats:
        """The shards' workflow outboxes, added up (see ``Queue.outbox_stats``)."""
        return self._added_up([shard.outbox_stats() for shard in self.shards])

    def _added_up(self, each: list[QueueStats]) -> QueueStats:
        sums = {
            f.name: sum(getattr(s, f.name) for s in each)
            for f in fields(QueueStats)
            if f.name not in ("name", "server_time")
        }
        return QueueStats(name=self.name, server_time=max(s.server_time for s in each), **sums)

    def job(self, job_id: str) -> JobInfo | None:
        """Everything stored about one job, from whichever shard holds it."""
        for shard in self.shards:
            info = shard.job(job_id)
            if info is not None:
                return info
        return None

    def cancel(self, ids: str | Sequence[str]) -> list[CancelResult]:
        """Cancel jobs, whichever shard holds them (see ``Queue.cancel``): each
        shard is asked for the ids the shards before it did not know."""
        wanted = job_ids(ids)
        found: dict[str, CancelResult] = {}
        for shard in self.shards:
            left = [i for i in dict.fromkeys(wanted) if i not in found]
            if not left:
                break
            for result in shard.cancel(left):
                if result.status is not CancelStatus.NOT_FOUND:
                    found[result.id] = result
        return [found.get(i) or CancelResult(i, CancelStatus.NOT_FOUND) for i in wanted]

    def dead_letters(self, limit: int = 100, offset: int = 0) -> list[JobInfo]:
        """Dead letters of every shard, newest first."""
        found: list[JobInfo] = []
        for shard in self.shards:
            found += shard.dead_letters(limit + offset)
        found.sort(key=lambda info: info.died_at or 0, reverse=True)
        return found[offset : offset + limit]

    def replay(self, ids: str | Sequence[str]) -> int:
        """Replay dead letters, whichever shard holds them; returns how many."""
        return sum([shard.replay(ids) for shard in self.shards])

    def replay_all(self) -> int:
        """Replay every dead letter of every shard; returns how many."""
        return sum([shard.replay_all() for shard in self.shards])

    def purge(self, ids: str | Sequence[str]) -> int:
        """Delete dead letters for good, whichever shard holds them."""
        return sum([shard.purge(ids) for shard in self.shards])

    def purge_all(self) -> int:
        """Delete every dead letter of every shard."""
        return sum([shard.purge_all() for shard in self.shards])

    def check(self) -> list[str]:
        """The keys of any shard that hold another Redis type than durq expects."""
        return [problem for shard in self.shards for problem in shard.check()]

    def groups(self, limit: int = 20, names: Sequence[str] = ()) -> list[GroupInfo]:
        """The largest groups by ready jobs (a group lives in one shard)."""
        found: list[GroupInfo] = []
        for shard in self.shards:
            found += shard.groups(limit, names)
        found.sort(key=lambda g: g.ready, reverse=True)
        return found if names else found[:limit]

    def configure(self, **settings: Any) -> None:
        """Change shared settings on every shard (see ``Queue.configure``). The
        queue's ``rate`` and ``max_active`` are shared out among the shards, so they hold
        for the whole queue (docs/flow-control.md, "Sharded queues")."""
        count = len(self.shards)
        shared = [shard_settings(settings, count, i) for i in range(count)]  # checked first
        for shard, own in zip(self.shards, shared, strict=True):
            shard.configure(**own)

    def limits(self, limit: int = 20) -> FlowInfo:
        """Flow control at a glance, the shards' states added up."""
        return merge_flow(self.name, [shard.limits(limit) for shard in self.shards])
