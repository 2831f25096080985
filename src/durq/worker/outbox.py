"""Delivering workflow outbox entries, at least once.

A workflow step that completes in one Redis Cluster slot while its workflow lives in
another (another queue, another hash tag) cannot count there in the same script: its
release writes an entry into its queue's outbox instead (``lua/lib/core/outbox.lua``), in
the same atomic step. The outbox is a durq queue of its own in that slot. Every worker
consuming a queue also delivers that queue's outbox: it takes entries under a lease,
applies each in its target slot with ``workflow_deliver.lua`` (idempotent), and only
then releases it. A worker that dies in between leaves the entry to come back when its
lease ends; applying it again changes nothing, so nothing is lost or counted twice.
Idle couriers block on the outbox's wake marker (no polling), and on a marker of their
own that the worker's upkeep rings when an entry's lease ends before the wait does
(``worker.upkeep``: the lease of a courier that died). The same outbox carries
the pauses of a sharded queue (``durq.RateLimited(scope="queue")`` in one shard pauses
the others: ``limits_pause.lua``, idempotent too).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from redis.exceptions import ConnectionError, RedisError, TimeoutError

from durq._async.queue import AsyncQueue
from durq.codec import PayloadCodec
from durq.errors import DurqError, InvalidArgument
from durq.keys import OutboxKeys
from durq.models import Job
from durq.protocol import durable as durable_ops
from durq.protocol import lifecycle
from durq.protocol import limits as limit_ops
from durq.protocol import workflows as wf
from durq.protocol.args import reason_json
from durq.protocol.calls import IDLE_BLOCK, Op, Pipeline, ScriptCall
from durq.protocol.wake import Look
from durq.worker.alarm import Alarm

__all__ = ["OutboxCourier"]

log = logging.getLogger("durq.worker")
_TRANSIENT = (ConnectionError, TimeoutError, OSError)


def _send(calls: tuple[ScriptCall, ...]) -> Op[list[Any]]:
    replies: list[Any] = yield Pipeline(calls)
    return replies


class OutboxCourier:
    """Delivers the outbox of one queue (its workers run one each).

    Args:
        queue: the queue whose outbox this is (its connection is used).
        batch: the most entries taken per round trip.
        lease: the lease of an entry being delivered, in seconds: how soon an entry
            whose courier died is delivered again.
    """

    def __init__(self, queue: AsyncQueue, *, batch: int = 100, lease: float = 10.0) -> None:
        self.queue = queue
        self.keys = OutboxKeys(queue.keys.name, queue.keys.namespace, queue.keys.shard_count)
        self.batch = batch
        self.lease = lease
        self.delivered = 0
        self._codec = PayloadCodec()
        self.alarm = Alarm(queue, self.keys)

    async def run(self) -> None:
        """Deliver entries until cancelled."""
        try:
            await self._run()
        finally:
            for ringing in self.alarm.pending():
                ringing.cancel()

    async def _run(self) -> None:
        failures = 0
        block: float | None = None  # None: fetch at once; else wait first (seconds)
        while True:
            try:
                if block is None:
                    op = lifecycle.fetch(
                        self.keys, self._codec, self.batch, self.lease, self.alarm.consumer
                    )
                    jobs, next_ms, _ = await self.queue._run(op)
                else:
                    jobs, next_ms = await self._wait_and_fetch(block)
                failures = 0
            except _TRANSIENT:
                failures += 1
                await asyncio.sleep(min(0.05 * 2**failures, 2.0))
                continue
            except (DurqError, RedisError) as exc:
                failures += 1
                log.warning("outbox of %s: fetching failed: %s", self.queue.name, exc)
                await asyncio.sleep(min(0.05 * 2**failures, 2.0))
                continue
            if jobs:
                await self.deliver(jobs)
                block = None
            else:
                # an entry whose courier died comes back when its lease ends (next_ms)
                block = IDLE_BLOCK if next_ms < 0 else max(next_ms / 1000, 0.001)

    async def _wait_and_fetch(self, block: float) -> tuple[list[Job], int]:
        """Block on the outbox's wake marker and this courier's own up to ``block``
        seconds, then fetch."""
        alarm = self.alarm
        op = lifecycle.fetch_after_wait(
            self.keys, self._codec, self.batch, self.lease, block, alarm.consumer, alarm.ring_key
        )
        alarm.waiting(block)
        try:
            jobs, next_ms, _ = await self.queue._run(op)
        finally:
            alarm.woke()
        return jobs, next_ms

    def watch(self, look: Look) -> None:
        """The upkeep's look at this outbox (once per heartbeat): end this courier's
        wait when an entry's lease ends (another courier's, taken after the wait was
        planned) before the wait does."""
        if look.lease_ms >= 0:
            self.alarm.due(look.lease_ms / 1000 + 0.001)

    async def deliver(self, jobs: Sequence[Job]) -> None:
        """Apply ``jobs`` (entries) in their target slots, then release them; entries
        that could not be applied are retried later (or dead-lettered if malformed)."""
        by_target: dict[str, list[Job]] = {}
        bad: list[tuple[Job, str]] = []
        for job in jobs:
            try:
                by_target.setdefault(wf.entry_target(job.data), []).append(job)
            except (ValueError, UnicodeDecodeError) as exc:
                bad.append((job, str(exc)))
        done: list[Job] = []
        retry: list[tuple[Job, str]] = []
        for group in by_target.values():
            await self._apply(group, done, retry, bad)
        await self._acknowledge(done, retry, bad)

    async def _apply(
        self,
        group: list[Job],
        done: list[Job],
        retry: list[tuple[Job, str]],
        bad: list[tuple[Job, str]],
    ) -> None:
        """Apply entries of one target slot, in one round trip."""
        try:
            replies = await self.queue._run(_send(tuple(_apply_call(j.data) for j in group)))
        except (DurqError, RedisError, OSError) as exc:  # the target slot is unreachable
            retry.extend((j, f"{type(exc).__name__}: {exc}") for j in group)
            return
        for job, reply in zip(group, replies, strict=True):
            if isinstance(reply, InvalidArgument):
                bad.append((job, str(reply)))
            elif isinstance(reply, Exception):
                retry.append((job, f"{type(reply).__name__}: {reply}"))
            else:
                done.append(job)

    async def _acknowledge(
        self, done: list[Job], retry: list[tuple[Job, str]], bad: list[tuple[Job, str]]
    ) -> None:
        name = self.queue.name
        for job, why in retry:
            log.warning("outbox of %s: entry %s not delivered yet: %s", name, job.id, why)
        for job, why in bad:
            log.error("outbox of %s: entry %s cannot be delivered: %s", name, job.id, why)
        items = [
            (j, min(0.1 * 2 ** min(j.attempt, 8), 30.0), _reason(why), False) for j, why in retry
        ]
        items += [(j, 0.0, _reason(why), True) for j, why in bad]
        try:
            if done:
                await self.queue._run(lifecycle.release(self.keys, done))
                self.delivered += len(done)
            if items:
                await self.queue._run(lifecycle.requeue(self.keys, items))
        except (DurqError, RedisError, OSError) as exc:
            # the entries come back when their leases end and are applied again: harmless
            log.warning("outbox of %s: acknowledging failed: %s", name, exc)


def _apply_call(entry: bytes) -> ScriptCall:
    """The call applying ``entry`` in its target slot: a pause of a sharded queue's
    shard (durq.RateLimited, protocol.limits), a signal for a shard or for this queue's
    waiters beyond one call's (durable steps, protocol.durable), else a workflow order."""
    if entry.startswith(limit_ops.PAUSE_ENTRY):
        return limit_ops.pause_call(entry)
    if entry.startswith(durable_ops.SIGNAL_ENTRY):
        return durable_ops.deliver_call(entry)
    return wf.deliver_call(entry)


def _reason(message: str) -> bytes:
    return reason_json({"reason": "undelivered", "message": message})
