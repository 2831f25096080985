"""The loop that moves one queue's jobs: each round trip sends the buffered
acknowledgements and fetches as many jobs as there are free slots. When the queue is
empty a separate waiter blocks on the queue's wake marker (no polling), while the pump
stays free to send the acknowledgements of jobs that finish meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from redis.exceptions import ConnectionError, OutOfMemoryError, RedisError, TimeoutError

from durq._async.queue import AsyncQueue
from durq.errors import DurqError
from durq.metrics import WorkerMetrics
from durq.models import Job
from durq.protocol import holding, lifecycle, wake
from durq.protocol.calls import IDLE_BLOCK, MAX_BLOCK
from durq.protocol.status import Status
from durq.protocol.wake import Look
from durq.worker.acks import AckBuffer, HoldOp
from durq.worker.alarm import RING_TTL_MS, Alarm
from durq.worker.cancel import cancel_and_wait
from durq.worker.capacity import Capacity
from durq.worker.memory import MemoryBackoff

__all__ = ["PumpOwner", "QueuePump"]

log = logging.getLogger("durq.worker")
_TRANSIENT = (ConnectionError, TimeoutError, OSError)
_BURST_RECHECK = 0.5  # seconds
_NO_RING = contextlib.nullcontext()  # reusable: it holds no state
_RING_FALLBACK = 0.25  # seconds the server's timeout trails a wait's own ring (worker.alarm)
# past a flow-control alarm's time, the ms its holder has to act before other idle
# consumers look (the alarm's own slack in lua/lib/limits/park.lua)
_ALARM_SLACK_MS = 1000
# Fetch pacing: while this queue's jobs are in hand, a round trip that would fetch or
# acknowledge fewer than a quarter of the queue's slots waits up to PACE seconds for
# more to finish. Jobs that do I/O finish one reply at a time, and a round trip per
# finished job or two costs the worker and the server far more than the jobs (bench/
# archive/analysis-wave2.md §3.2 item 1). An idle worker, or one stopping, never waits.
PACE = 0.001
# the statuses of an acknowledgement that was applied (any other: the lease was lost)
_SETTLED = frozenset((Status.OK, Status.RETRYING, Status.DEAD, Status.CANCELLED))


def _nothing() -> None:
    pass


class _Answered(Exception):
    """A round trip was answered but part of it failed (``error``): what was answered
    is handled, so nothing is put back; the pump pauses and goes on."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class PumpOwner(Protocol):
    """What a pump asks of the worker it fetches for (the Worker)."""

    def accept(self, jobs: list[Job]) -> None:
        """Take fetched jobs into hand: they take their slots and start when they can."""
        ...

    def pump_drained(self) -> bool:
        """Burst mode: a pump found its queue drained. True when every queue is and
        nothing is held: the worker then stops fetching."""
        ...


class QueuePump:
    """Fetches and acknowledges the jobs of one queue for a Worker.

    Args:
        queue: the queue (or shard).
        owner: the worker, which takes the fetched jobs.
        capacity: the worker's slots, which say how many jobs this pump may fetch and
            wake it when that changes.
        metrics: where reclaimed and lost leases are counted.
        batch: the most jobs (and acknowledgements) per round trip.
        lease: the lease of the jobs fetched, in seconds.
        burst: stop once every queue is drained.
    """

    def __init__(
        self,
        queue: AsyncQueue,
        owner: PumpOwner,
        capacity: Capacity,
        metrics: WorkerMetrics,
        *,
        batch: int,
        lease: float,
        burst: bool = False,
    ) -> None:
        self.queue = queue
        self.owner = owner
        self.capacity = capacity
        self.metrics = metrics
        self.batch = batch
        self.lease = lease
        self.burst = burst
        self.acks = AckBuffer()
        self.alarm = Alarm(queue)  # this consumer's id and its own wake marker
        self.changed = asyncio.Event()
        capacity.add_queue(queue.name, self.changed.set)
        self.drained = False  # burst mode: nothing ready, running or scheduled
        self._wait_armed = asyncio.Event()
        self._wait_timeout = MAX_BLOCK
        self._wait_precise = False
        self._wait_want = 0  # jobs the waiter fetches when its wait ends
        self._in_wait = False  # the waiter's request is in flight: the pump does not fetch
        self._poked = False
        self._wait_rings = False  # the wait under way blocks on this consumer's own marker
        self._wakes = 0  # times the waiter's wait ended: plans older than that are stale
        self._failures = 0
        self.memory = MemoryBackoff(queue.name, metrics, self.changed.set)
        #: outcomes in the round trip under way: sent, no reply yet (the drain counts them)
        self.sending: list[tuple[Job, Any]] = []
        self._hold_until = 0.0  # fetch pacing: when the round trip held back goes anyway
        # the waiter's fetch got fewer jobs than it asked for, so the queue had nothing
        # more ready: the next_ms it returned, for a wait planned without another fetch
        self._emptied: int | None = None
        #: how held jobs are sent, and this worker's capabilities that have held jobs in
        #: this queue: brought back before the next fetches (worker.holding)
        self.hold_op: HoldOp | None = None
        self.unhold_caps: list[str] = []
        #: told when a wait ends in a fetch that finds nothing (the upkeep's ``soon``)
        self.woke_empty: Callable[[], None] = _nothing

    @property
    def name(self) -> str:
        """The queue's name."""
        return self.queue.name

    async def run(self) -> None:
        """Run until the worker stops accepting jobs and every outcome was sent."""
        waiter = asyncio.create_task(self._waiter(), name=f"durq-wait-{self.name}")
        try:
            await self._loop()
        finally:
            await cancel_and_wait(waiter, *self.alarm.pending())

    async def _loop(self) -> None:
        while True:
            self.changed.clear()
            want = min(self.capacity.free(), self.batch)
            if self._in_wait or self.memory.holding():
                # the waiter's wait ends in a fetch of its own; or the server is full
                want = 0
            if self._pace(want, len(self.acks)):
                await self.changed.wait()
                continue
            taken = self.acks.take(self.batch)
            if self._wait_again(want, taken):
                await self.changed.wait()
                continue
            if not taken and want == 0:
                if await self._finished():
                    return
                await self.changed.wait()
                continue
            wakes = self._wakes
            try:
                got = await self._round_trip(taken, want)
            except _Answered as answered:  # e.g. a fetch refused: its acks were handled
                await self._pause(answered.error)
                continue
            # no reply: transient, or e.g. a key of the wrong type: sent again after a pause
            except (*_TRANSIENT, DurqError, RedisError) as exc:
                self.acks.put_back(taken)
                await self._pause(exc)
                continue
            if self._failures:  # failures are logged sparsely: say when they are over
                log.info(
                    "queue %s: working again after %d failed attempts", self.name, self._failures
                )
            self._failures = 0
            if got is None:  # the fetch was refused for want of memory: backing off
                continue
            fetched, next_ms = got
            if not fetched and want and self._idle_after_fetch(next_ms, want, wakes):
                await self.changed.wait()

    def _pace(self, want: int, acks: int) -> bool:
        """True when this round trip is held back (see PACE); the pump then waits for a
        change or the end of the hold."""
        loop = asyncio.get_running_loop()
        refill = max(self.capacity.share() // 4, 1)
        if (
            want + acks == 0  # nothing to send: the pump waits anyway
            or want >= refill
            or acks >= refill
            or not self.capacity.open
            or self.capacity.in_use_by(self.name) == 0
        ):
            self._hold_until = 0.0
            return False
        now = loop.time()
        if not self._hold_until:
            self._hold_until = now + PACE
            loop.call_at(self._hold_until, self.changed.set)  # early or late: one more lap
        elif now >= self._hold_until:
            self._hold_until = 0.0
            return False
        return True

    def _wait_again(self, want: int, taken: list[Any]) -> bool:
        """True when the waiter's fetch has just emptied the queue and there is nothing
        to acknowledge: the wait is armed again at once, without a fetch that would find
        nothing (a round trip saved per wake-up, and none in the way of the jobs just
        fetched)."""
        emptied, self._emptied = self._emptied, None
        if emptied is None or not want or taken or self.burst or self.unhold_caps:
            return False
        self._went_idle()
        self._plan_wait(emptied, want)
        return True

    def _idle_after_fetch(self, next_ms: int, want: int, wakes: int) -> bool:
        """After a fetch that found nothing: True when the wait is armed (the pump then
        waits for a change), False when the pump should go round again at once."""
        self._went_idle()
        if self.burst and next_ms < 0 and self.capacity.in_use_by(self.name) == 0 and not self.acks:
            self.drained = True
            if self.owner.pump_drained():
                return False
        if self._wakes != wakes:
            # the waiter woke during this round trip, e.g. on a delayed job becoming
            # the earliest: next_ms may predate that; plan again before waiting
            return False
        self._plan_wait(next_ms, want)
        return True

    def _plan_wait(self, next_ms: int, want: int) -> None:
        """Arm the waiter: block until work may have come, then fetch ``want`` jobs."""
        # next_ms is planned from the leases that exist now. A lease taken later by
        # another consumer, whose holder then dies or hangs, would be reclaimed only
        # when this wait ends: the upkeep notices it (worker.upkeep: it looks once per
        # heartbeat, and rings this pump's own marker when a lease ends before its
        # wait does), and a short lease (< MAX_BLOCK) is looked for once per lease
        limit = self.lease if self.lease < MAX_BLOCK else IDLE_BLOCK
        if self.burst:
            # drained only once the jobs other workers hold have ended, and nothing
            # wakes this wait when they do: look again soon
            limit = min(limit, _BURST_RECHECK)
        self._wait_timeout = limit if next_ms < 0 else min(max(next_ms / 1000, 0.001), limit)
        self._wait_precise = 0 <= next_ms < limit * 1000  # work is due then (worker.alarm)
        self._wait_want = want
        self._wait_armed.set()

    async def _finished(self) -> bool:
        """True when the worker stopped accepting and this pump has nothing left to send."""
        if self.capacity.open or self.capacity.in_use_by(self.name) or self.acks:
            return False
        if not self._in_wait:
            return True
        # the waiter's wait ends in a fetch: end it now, so what it brings is given back
        # (and acknowledged) before this pump stops
        await self._poke()
        return False

    async def _poke(self) -> None:
        """End this worker's blocked wait, once: through this consumer's own marker
        when the wait blocks on it (the queue's wake marker would wake the consumer
        blocked first, perhaps another, and the coalesced pokes of several workers
        stopping at once only one), else through the queue's (a wait without a fetch,
        MAX_BLOCK at most)."""
        if self._poked:
            return
        self._poked = True
        try:
            if self._wait_rings:
                await self.queue._run(wake.ring(self.alarm.ring_key, RING_TTL_MS))
            else:
                await self.queue._run(wake.signal(self.queue.keys))
        except (*_TRANSIENT, RedisError, DurqError):
            pass  # the wait then ends by its own timeout

    def unhold_soon(self, caps: list[str]) -> None:
        """Held jobs of ``caps`` wait in this queue: bring them back with the next fetch
        (a waiter blocked on the wake marker is woken through this consumer's own)."""
        self.unhold_caps = caps
        if self._in_wait:
            self.alarm.ring()
        else:
            self.changed.set()

    def watch(self, look: Look) -> None:
        """The upkeep's look at this queue (once per heartbeat): while this pump waits,
        end its wait when a lease ends (another consumer's, taken after the wait was
        planned), or a second after the time of a flow-control alarm another consumer
        holds (its holder may have died), if either comes before the wait's end."""
        due = [ms for ms in (look.lease_ms, look.alarm_ms) if ms >= 0]
        if look.alarm_ms >= 0:
            due[-1] += _ALARM_SLACK_MS
        if due:
            self.alarm.due(min(due) / 1000 + 0.001)

    def _went_idle(self) -> None:
        """The queue was found empty: leave this pump's share of slots to the others."""
        self.capacity.set_idle(self.name, True)

    def _fetched(self, jobs: list[Job], reclaimed: int) -> None:
        if reclaimed:
            self.metrics.reclaimed(self.name, reclaimed)
        if jobs:
            self.drained = False
            # busy again; the others' share shrinks, which wakes none of them
            self.capacity.set_idle(self.name, False, rebalance=False)
            self.owner.accept(jobs)

    async def _round_trip(self, taken: list[Any], want: int) -> tuple[int, int] | None:
        """Send ``taken`` and fetch ``want`` jobs: (jobs fetched, next_ms), or None when
        the fetch was refused for want of memory (the pump backs off). Raises _Answered
        when the replies came but acknowledgements or the fetch failed otherwise."""
        sends = AckBuffer.ops(self.queue.keys, taken, self.queue.result_ttl, self.hold_op)
        batch = [op for _, _, op in sends]
        unhold = bool(want and self.unhold_caps)
        if unhold:  # held jobs this worker can run go back right before its fetch
            batch.append(holding.unhold(self.queue.keys, self.unhold_caps, want))
        if want:
            batch.append(
                lifecycle.fetch(
                    self.queue.keys, self.queue.codec, want, self.lease, self.alarm.consumer
                )
            )
        self.sending = taken
        try:
            results = await self.queue._run_all(batch)
        finally:
            self.sending = []
        if unhold:
            self._unheld(results[len(sends)])
        refused: BaseException | None = None
        for (kind, jobs, _), result in zip(sends, results, strict=False):
            if self._check_acks(kind, jobs, result):
                mine = {id(job) for job in jobs}
                self.acks.put_back([t for t in taken if id(t[0]) in mine], unsure=False)
                refused = result
        fetched = results[-1] if want else None
        if isinstance(fetched, OutOfMemoryError):
            self.memory.refused()
            fetched = None
        elif isinstance(fetched, BaseException):
            raise _Answered(fetched)
        got = None if want else (0, -1)
        if fetched is not None:
            jobs, next_ms, reclaimed = fetched
            if self.memory.refusals:
                self.memory.fetched()
            self._fetched(jobs, reclaimed)  # taken into hand, whatever the acks' replies
            got = len(jobs), next_ms
        if refused is not None:
            raise _Answered(refused)  # acknowledgements kept: sent again after a pause
        return got

    def _unheld(self, reply: Any) -> None:
        if isinstance(reply, BaseException):  # tried again with the next fetch
            log.warning("queue %s: held jobs not brought back: %s", self.name, reply)
            return
        _brought, self.unhold_caps = reply

    def _check_acks(self, kind: str, jobs: list[Any], result: Any) -> bool:
        """Log what the reply to an acknowledgement says; True when the server refused it
        for want of memory: it was not applied, and is sent again."""
        if isinstance(result, OutOfMemoryError):
            # an acknowledgement is never dropped (the job would run again after its
            # lease); lib/core/frees_memory.lua makes this rare: an older durq's library?
            log.warning(
                "%s of %d jobs on %s refused for want of memory; sent again: %s",
                kind,
                len(jobs),
                self.name,
                result,
            )
            return True
        # forget the outcomes this sending repeated, whatever its reply (a list of
        # False when none was sent again, the common case: no set lookup per job)
        acks = self.acks
        resent = [acks.sent_again(job) for job in jobs] if acks.unsure else None
        if isinstance(result, BaseException):
            # the script refused the whole batch (e.g. a corrupted key): the jobs stay
            # leased and come back after their lease; say so loudly
            log.error("%s of %d jobs on %s failed: %s", kind, len(jobs), self.name, result)
            return False
        if _SETTLED.issuperset(result):  # every outcome applied: nothing to say
            return False
        if resent is None:
            resent = [False] * len(jobs)
        for job, status, again in zip(jobs, result, resent, strict=True):
            if status in _SETTLED:
                continue
            if again and status == Status.NOT_FOUND:
                # no record and no tombstone: a first sending applied after the job's
                # dedup window leaves neither, and so does a Redis that lost the job
                log.warning(
                    "%s of job %s on %s was sent again after a lost reply and the job is "
                    "no longer in Redis: either the first sending was applied after the "
                    "job's dedup window, or Redis lost the job (a restart without "
                    "persistence, a failover), and then it will not run again",
                    kind,
                    job.id,
                    self.name,
                )
            elif again:
                # Sent again after a round trip lost its reply (connection cut): the
                # first sending was most likely applied, and then this one is refused
                # (the job is released already). That is not a lost lease.
                log.info(
                    "%s of job %s on %s was sent again after a lost reply and refused "
                    "(%s): the first sending was most likely applied",
                    kind,
                    job.id,
                    self.name,
                    Status(status).name,
                )
            else:
                log.warning(
                    "%s of job %s on %s refused (%s): its lease had expired and it was "
                    "handed out again, so it may run twice",
                    kind,
                    job.id,
                    self.name,
                    Status(status).name,
                )
                self.metrics.lease_lost(self.name)
        return False

    async def _pause(self, exc: BaseException) -> None:
        self._failures += 1
        delay = min(0.05 * 2**self._failures, 2.0)
        if self._failures in (1, 3) or self._failures % 20 == 0:
            log.warning(
                "queue %s: %s: %s; retrying (attempt %d)",
                self.name,
                type(exc).__name__,
                exc,
                self._failures,
            )
        await asyncio.sleep(delay)

    async def _waiter(self) -> None:
        """While the pump has nothing to fetch: block on the queue's wake marker and fetch
        the moment it is signalled, in one round trip (no polling)."""
        failures = 0
        while True:
            await self._wait_armed.wait()
            self._wait_armed.clear()
            self._in_wait = True
            try:
                await self._wait_and_fetch()
                failures = 0
            except _TRANSIENT:
                failures += 1
                await asyncio.sleep(min(0.05 * 2**failures, 2.0))
            except OutOfMemoryError:  # the pump backs off, then fetches itself
                self.memory.refused()
            except (DurqError, RedisError) as exc:  # e.g. a wake marker of another type
                failures += 1
                log.warning("queue %s: waiting failed: %s", self.name, exc)
                await asyncio.sleep(min(0.05 * 2**failures, 2.0))
            finally:
                self._in_wait = False
            # An arm set while this wait was blocked carries a timeout planned before
            # whatever ended the wait: using it would block again on an old plan (a
            # delayed job that became due would wait for MAX_BLOCK). Drop it; the pump
            # plans afresh on `changed` and arms again.
            self._wakes += 1
            self._wait_armed.clear()
            # there may be work: claim a share of the slots again
            self.capacity.set_idle(self.name, False)
            self.changed.set()

    async def _wait_and_fetch(self) -> None:
        want = min(self._wait_want, self.capacity.free_for(self.name), self.batch)
        self._wait_rings = want > 0 and self.capacity.open
        if not self._wait_rings:
            await self.queue._run(wake.wait(self.queue.keys, min(self._wait_timeout, MAX_BLOCK)))
            return
        # the server ends a blocking wait up to 1/hz s late: a local timer rings this
        # consumer's own marker on time, and the server's timeout is only the fallback.
        # Every wait blocks on that marker too: the upkeep rings it for work due sooner
        # than planned (Alarm.due)
        timeout, precise = self._wait_timeout, self._wait_precise
        alarm = self.alarm
        op = lifecycle.fetch_after_wait(
            self.queue.keys,
            self.queue.codec,
            want,
            self.lease,
            timeout + _RING_FALLBACK if precise else timeout,
            alarm.consumer,
            alarm.ring_key,
        )
        # a plain idle wait sets no ring: a null context, not ring_after's generator-based
        # one, on the pickup path
        ring = alarm.ring_after(timeout) if precise else _NO_RING
        alarm.waiting(timeout)
        try:
            async with ring:
                jobs, next_ms, reclaimed = await self.queue._run(op)
        finally:
            alarm.woke()
        if len(jobs) < want:
            self._emptied = next_ms
        if not jobs:
            self.woke_empty()
        if self.memory.refusals:
            self.memory.fetched()
        self._fetched(jobs, reclaimed)
