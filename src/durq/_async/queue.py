"""AsyncQueue: the asyncio front end of a durq queue.

This file is the source of truth; ``durq/_sync/queue.py`` (``Queue``) is generated from
it by ``scripts/unasync.py`` (CI fails when they drift). All logic lives in
``durq.protocol`` (``lifecycle``, ``admin``, ``namespace``); the methods here check
arguments that need the queue's defaults and drive the operations.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from redis.asyncio import Redis as AsyncRedis

from durq._async.admin import AsyncQueueAdmin
from durq._async.driver import AsyncDriver
from durq._async.durable import AsyncQueueDurable
from durq._async.retry import retrying
from durq.backoff import Backoff, exponential
from durq.codec import DEFAULT_MAX_PAYLOAD_BYTES, PayloadCodec
from durq.durability import Durability
from durq.errors import InvalidArgument, JobNotFound, LeaseLost
from durq.keys import NamespaceKeys, QueueKeys, check_job_id
from durq.models import (
    EnqueueResult,
    Job,
    Message,
    Outcome,
)
from durq.protocol import control, lifecycle, namespace
from durq.protocol.args import lease_ms, new_ids, reason_json
from durq.protocol.calls import Op
from durq.protocol.lifecycle import Leased
from durq.protocol.status import OUTCOMES, Status, outcomes
from durq.transport import connection

__all__ = ["AsyncQueue", "Reason", "per_job"]

T = TypeVar("T")
Reason = str | Mapping[str, Any] | None


def per_job(name: str, value: Any, count: int) -> list[Any]:
    """A value for each of ``count`` jobs: one value for all, or a sequence of values."""
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            raise InvalidArgument(f"{name} must have one entry per job ({count})")
        return list(value)
    return [value] * count


def _raise_for(outcome: Outcome, job_id: str) -> None:
    if outcome is Outcome.LEASE_LOST:
        raise LeaseLost(job_id)
    if outcome is Outcome.NOT_FOUND:
        raise JobNotFound(job_id)
    if outcome is Outcome.CORRUPT:
        raise LeaseLost(job_id, ": its record is unreadable")


class AsyncQueue(AsyncQueueAdmin, AsyncQueueDurable):
    """A durq queue, used from asyncio code.

    Args:
        name: the queue name (letters, digits, ``.``, ``_``, ``-``; ``a/b`` puts queue
            ``a/b`` in the same Redis Cluster slot as ``a``).
        url: Redis URL (``redis://``, ``rediss://``, ``unix://``); defaults to
            ``$DURQ_URL``, then ``redis://localhost:6379/0``.
        client: an existing ``redis.asyncio.Redis`` to use instead of ``url`` (it must
            not decode responses); the queue then does not close it.
        namespace: the first part of every key (default ``durq``).
        serializer: ``json`` (default), ``msgpack`` or ``pickle`` (only by name).
        max_payload_bytes: the largest encoded payload accepted (default 1 MiB).
        lease: default lease in seconds for ``dequeue`` (default 30).
        max_attempts: default attempts before a job is dead-lettered (default 5).
        backoff: default retry delay for ``requeue`` (exponential, 1 s to 5 min).
        result_ttl: how long results passed to ``release`` are kept (default 1 h).
        enqueue_retry_for: how long ``enqueue`` keeps retrying through connection errors
            (default 10 s; 0 disables). Safe: ids are chosen before the first try, and an
            id that exists is not enqueued twice.
        durability: make enqueues return only once the write has more copies (WAIT,
            WAITAOF); see durq.Durability. Off by default.
        shard_count: set by ``AsyncShardedQueue`` (and by apps and workers): this queue
            is the shard ``name`` (``<queue>~<i>``) of a queue of that many shards.
    """

    def __init__(
        self,
        name: str,
        url: str | None = None,
        *,
        client: AsyncRedis | None = None,
        namespace: str = "durq",
        serializer: str = "json",
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        lease: float = 30.0,
        max_attempts: int = 5,
        backoff: Backoff | None = None,
        result_ttl: float = 3600.0,
        enqueue_retry_for: float = 10.0,
        durability: Durability | None = None,
        shard_count: int = 0,
    ) -> None:
        self.keys = QueueKeys(name, namespace, shard_count)
        self.codec = PayloadCodec(serializer, max_payload_bytes)
        lease_ms(lease)
        if not isinstance(max_attempts, int) or not 1 <= max_attempts <= 10000:
            raise InvalidArgument("max_attempts must be an int in 1..10000")
        self.lease = lease
        self.max_attempts = max_attempts
        self.backoff: Backoff = backoff or exponential()
        self.result_ttl = result_ttl
        self.enqueue_retry_for = enqueue_retry_for
        self.durability = durability
        self._registered = shard_count > 0  # the sharded queue registers its name
        if client is None:
            self.client = connection.async_client(url)
            self._owns_client = True
        else:
            connection.check_client(client)
            self.client = client
            self._owns_client = False
        self._driver = AsyncDriver(self.client)

    @property
    def name(self) -> str:
        """The queue name."""
        return self.keys.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    async def _run(self, op: Op[T]) -> T:
        """Run a protocol operation (from ``durq.protocol``) against this queue's server:
        for durq's own layers (the app, the worker), not a public API."""
        return await self._driver.run(op)

    async def aclose(self) -> None:
        """Close the connections, if the queue created its own client."""
        if self._owns_client:
            await self.client.aclose()
        else:
            await self._driver.release_idle()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- producing ----------------------------------------------------------------

    async def enqueue(
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
        """Add one job. Enqueueing an id that exists changes nothing (safe to retry).

        Args:
            payload: bytes, or any JSON value (the queue's serializer).
            id: the job id; give your own to make retries after a dropped connection
                idempotent. Random (16 characters) by default.
            delay: seconds before the job becomes ready.
            priority: -10..10; higher is served first within its group.
            max_attempts: attempts before the job is dead-lettered.
            group: the tenant or key the job belongs to; groups are served in turn.
            key: a dedup key: while a job holding it has not started, another enqueue
                with the key returns that job (DEDUPLICATED), or replaces it when
                ``replace`` is true (REPLACED).
            expires: seconds from now, or an aware datetime: a job not started by
                then is never delivered and ends expired.
            ttl: with ``key``, throttle: one job per key per ``ttl`` seconds.
            debounce: with ``key``, run once after a burst, with the newest payload.
            max_wait: with ``debounce``, the longest a steady stream is held back.
            keep_last: with ``key``, while a job of the key runs, keep at most one
                follow-up, with the newest payload (see docs/job-control.md).
        """
        plain = type(delay) is int and type(priority) is int and not (delay or priority)
        controlled = (
            expires is not None
            or ttl is not None
            or debounce is not None
            or max_wait is not None
            or keep_last
        )
        if plain and max_attempts is None and group is None and key is None and not controlled:
            if replace:
                raise InvalidArgument("replace=True needs a key: it replaces the job holding it")
            # a plain job (the common case): no per-message options to resolve
            job_id = new_ids(1)[0] if id is None else check_job_id(id)
            codec_id, data = self.codec.encode(payload)
            return (await self.enqueue_encoded([(job_id, codec_id, data)]))[0]
        message = Message(
            payload, id, delay, priority, max_attempts, group, key, replace,
            expires, ttl, debounce, max_wait, keep_last,
        )  # fmt: skip
        return (await self.enqueue_many([message]))[0]

    async def enqueue_many(
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
        """Add many jobs in one round trip. Items are payloads, or ``durq.Message``
        objects with options of their own; the keyword options apply to the rest."""
        messages = [p if isinstance(p, Message) else Message(p) for p in payloads]
        if not messages:
            return []
        # ids are fixed now so that a retry after a lost reply cannot enqueue twice
        fresh = new_ids(sum(1 for m in messages if m.id is None))

        options: dict[str, Any] = {"delay": delay, "priority": priority, "group": group}
        options.update(max_attempts=max_attempts, key=key, replace=replace)

        async def attempt() -> list[EnqueueResult]:
            # the op checks the messages as it is made: bad input registers nothing
            op = self._enqueue_op(messages, fresh, **options)
            if not self._registered:
                await self.register()
            return await self._driver.run(op)

        return await retrying(attempt, self.enqueue_retry_for)

    def _enqueue_op(
        self, messages: list[Message], ids: list[str], **options: Any
    ) -> Op[list[EnqueueResult]]:
        """The enqueue of ``messages`` (``enqueue_many``'s options; ``ids`` for the
        messages without one), checked as it is made: bad input raises here."""
        max_attempts = options.pop("max_attempts", None)
        return lifecycle.enqueue(
            self.keys,
            self.codec,
            messages,
            max_attempts=self.max_attempts if max_attempts is None else max_attempts,
            durability=self.durability,
            ids=ids,
            result_ttl=self.result_ttl,
            **options,
        )

    async def enqueue_encoded(
        self, jobs: Sequence[tuple[str, int, bytes]], *, max_attempts: int | None = None
    ) -> list[EnqueueResult]:
        """Add plain jobs whose payloads are encoded already, ``(id, codec, data)`` each
        (ids checked or from ``new_ids``; codec and data as ``self.codec.encode``
        returns them), with no delay, priority, group or key: the task layer's path,
        which builds its messages itself. Same script, results and retries as
        ``enqueue_many``; a payload over ``max_payload_bytes`` raises PayloadTooLarge
        and nothing is enqueued."""
        if not jobs:
            return []
        for _id, _codec, data in jobs:
            self.codec.check_size(data)
        attempts = self.max_attempts if max_attempts is None else max_attempts

        async def attempt() -> list[EnqueueResult]:
            if not self._registered:
                await self.register()
            op = lifecycle.enqueue_encoded(self.keys, jobs, attempts, self.durability)
            return await self._driver.run(op)

        return await retrying(attempt, self.enqueue_retry_for)

    async def register(self) -> None:
        """Add this queue to the namespace's list of queues (for ``durq stats``).
        Raises InvalidArgument if the queue was declared sharded: its jobs belong in its
        shards (``AsyncShardedQueue``), and these keys would never be consumed."""
        space = NamespaceKeys(self.keys.namespace)
        await self._driver.run(namespace.register_queue(space, self.name, "AsyncShardedQueue"))
        self._registered = True

    # -- consuming ----------------------------------------------------------------

    async def dequeue(self, *, lease: float | None = None, wait: float | None = None) -> Job | None:
        """Take one ready job under a lease of ``lease`` seconds, or None.

        With ``wait``, block up to that many seconds for a job (no polling).
        """
        jobs = await self.dequeue_many(1, lease=lease, wait=wait)
        return jobs[0] if jobs else None

    async def dequeue_many(
        self, count: int, *, lease: float | None = None, wait: float | None = None
    ) -> list[Job]:
        """Take up to ``count`` ready jobs in one round trip (see ``dequeue``)."""
        lease = self.lease if lease is None else lease
        return await self._driver.run(lifecycle.dequeue(self.keys, self.codec, count, lease, wait))

    async def release(self, job: Leased, *, keep: float = 0, result: Any = None) -> None:
        """The job is done: its data is removed (or kept ``keep`` seconds).

        ``result``, when given, is stored for ``result_ttl`` seconds (see ``result``).
        Raises LeaseLost if the lease was taken over; nothing changes then.
        """
        results = None if result is None else [self.codec.encode(result)[1]]
        _raise_for((await self.release_many([job], keep=keep, results=results))[0], job.id)

    async def release_many(
        self,
        jobs: Sequence[Leased],
        *,
        keep: float = 0,
        results: Sequence[bytes | None] | None = None,
    ) -> list[Outcome]:
        """Release many jobs in one round trip; returns an outcome per job (OK,
        LEASE_LOST, NOT_FOUND). ``results`` are encoded payloads, one per job or None."""
        op = lifecycle.release(
            self.keys, jobs, keep=keep, results=results, result_ttl=self.result_ttl
        )
        return outcomes(await self._driver.run(op))

    async def requeue(
        self, job: Job, *, reason: Reason = None, delay: float | None = None, dead: bool = False
    ) -> Outcome:
        """The job failed: the attempt counts and the job comes back after ``delay``
        (default: the queue's backoff), or goes to the dead letters with ``reason`` when
        its attempts are exhausted or ``dead`` is true. Returns RETRYING or DEAD; raises
        LeaseLost if the lease was taken over."""
        status = (await self.requeue_many([job], reason=reason, delay=delay, dead=dead))[0]
        _raise_for(status, job.id)
        return status

    async def requeue_many(
        self,
        jobs: Sequence[Job],
        *,
        reason: Reason | Sequence[Reason] = None,
        delay: float | Sequence[float] | None = None,
        dead: bool | Sequence[bool] = False,
    ) -> list[Outcome]:
        """Requeue many failed jobs in one round trip. ``reason``, ``delay`` and ``dead``
        are one value for all jobs or a sequence with one entry per job."""
        reasons = per_job("reason", reason, len(jobs))
        delays = per_job("delay", delay, len(jobs))
        deads = per_job("dead", dead, len(jobs))
        items = [
            (
                j,
                self.backoff(j.attempt) if delays[i] is None else delays[i],
                reason_json(reasons[i], attempt=j.attempt),
                bool(deads[i]),
            )
            for i, j in enumerate(jobs)
        ]
        return outcomes(
            await self._driver.run(lifecycle.requeue(self.keys, items, result_ttl=self.result_ttl))
        )

    async def extend(self, job: Leased, *, lease: float | None = None) -> float:
        """Lengthen the lease to ``lease`` seconds from now; returns the new deadline
        (server time). Raises LeaseLost if the lease was taken over."""
        deadline, statuses = await self._driver.run(
            lifecycle.extend(self.keys, [job], self.lease if lease is None else lease)
        )
        _raise_for(OUTCOMES[statuses[0]], job.id)
        return deadline

    async def extend_many(
        self, jobs: Sequence[Leased], *, lease: float | None = None
    ) -> list[Outcome]:
        """Extend many leases in one round trip; returns an outcome per job."""
        if not jobs:
            return []
        lease = self.lease if lease is None else lease
        return outcomes((await self._driver.run(lifecycle.extend(self.keys, jobs, lease)))[1])

    async def defer(self, job: Leased, delay: float = 0) -> None:
        """Put the job back for ``delay`` seconds without counting a failed attempt.
        Raises LeaseLost if the lease was taken over."""
        _raise_for((await self.defer_many([job], delay))[0], job.id)

    async def defer_many(
        self, jobs: Sequence[Leased], delay: float | Sequence[float] = 0
    ) -> list[Outcome]:
        """Defer many jobs in one round trip; ``delay`` is one value or one per job."""
        delays = per_job("delay", delay, len(jobs))
        return outcomes(
            await self._driver.run(lifecycle.defer(self.keys, list(zip(jobs, delays, strict=True))))
        )

    async def wait_result(self, job_id: str, timeout: float) -> bytes | None:
        """The raw result stored for ``job_id`` (see ``release``), waiting up to
        ``timeout`` seconds for it without polling; None if there is none by then."""
        return await self._driver.run(lifecycle.wait_result(self.keys, job_id, timeout))

    # -- job control as the job's holder (cancels and reads: AsyncQueueAdmin) ----

    async def progress(self, job: Leased, fraction: float, info: Any = None) -> bool:
        """Store how far a job you hold got (``fraction`` in 0..1, ``info`` any small
        JSON value), for ``read_progress``, ``durq job`` and the dashboard. Not
        coalesced: inside a worker use ``durq.current_job().progress``. Raises LeaseLost
        if the lease was taken over; returns True when a cancel of the job was asked."""
        data = control.progress_json(fraction, info)
        status = await self._driver.run(control.write_progress(self.keys, job.id, job.token, data))
        _raise_for(OUTCOMES[status], job.id)
        return status is Status.CANCELLED

    # -- for workers ------------------------------------------------------------------

    async def _run_all(self, operations: Sequence[Op[Any]]) -> list[Any]:
        """Run several operations at once, their first requests in one round trip (a
        worker's acknowledgements and its next fetch): each result, or the exception
        its operation raised."""
        return await self._driver.run_all(operations)
