"""Running a batch task (``durq.Batch``): the worker part that forms a batch of its
queue's items, calls the task once with all of them, and settles each item in one call.

One ``BatchPump`` per queue (or shard) of a batch task replaces the queue's QueuePump.
It has ``Batch.concurrency`` lanes (``Lane``), each forming one batch at a time
(``Queue.dequeue_batch``: blocking on the wake marker, or its own, while the queue is
empty or a partial batch waits, never polling), so no item is leased beyond the batches
being formed or run, one per lane. While a function runs, one extension call a third of
the lease keeps every item's lease of its batch; an item whose extension is refused (its
lease was lost) is left out of the settle, and the settle is fenced per item anyway. A
batch's settle goes out with its lane's next fetch, in one round trip (as a queue's
acknowledgements go with its next fetch), and before it: no item of a lane's next batch
is fetched before its batch before was settled. The lanes of a pump overlap one batch's
run with another's forming and settling, which alternate in one lane; a batch formed
lets the loop turn a few times before it starts, so that the batches finishing then
send their settles (and next fetches) first.
Batch tasks run in the worker's own process (the loop, or a thread for a sync one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from redis.exceptions import ConnectionError, RedisError, TimeoutError

from durq._async.queue import AsyncQueue
from durq.app.batch import Batch, Item
from durq.errors import DurqError
from durq.metrics import WorkerMetrics
from durq.models import Job
from durq.models import Outcome as Answer
from durq.protocol import batches
from durq.protocol.calls import IDLE_BLOCK, MAX_BLOCK, Op
from durq.protocol.status import Status
from durq.protocol.wake import Look
from durq.worker.alarm import Alarm
from durq.worker.executor import DONE, Executor, Outcome
from durq.worker.joblog import log_outcome
from durq.worker.summary import add_summary

if TYPE_CHECKING:
    from durq.app.task import Task

__all__ = ["BatchPump", "Lane", "settle_code"]

log = logging.getLogger("durq.worker")
_TRANSIENT = (ConnectionError, TimeoutError, OSError, RedisError, DurqError)
_BURST_RECHECK = 0.5  # seconds a burst worker waits for a batch before it stops
_HOLD_BACK = 1.0  # seconds an item of a version this worker cannot run is given back for
_SETTLE_TRIES = 5  # sends of a batch's settle before its items are left to their lease
#: loop turns a formed batch gives the others before it starts (its items decoded, its
#: function called): the batches finishing in those turns send their settles, each with
#: its lane's next fetch, before this batch's CPU work delays them, so the server has
#: the next batches' work while the worker runs this one's (docs/decisions/
#: batch-throughput.md, "Finishing before starting")
_START_TURNS = 3
#: settle.lua's outcome codes for the worker's outcomes ('cancelled' is sent as a
#: failure: the record's cancel flag makes the script end it cancelled)
_CODES = {"done": "d", "retry": "r", "cancelled": "r", "dead": "x", "defer": "f"}


@dataclass(slots=True)
class _Unsettled:
    """A batch run and not settled yet: its items, their outcomes, why it started, the
    items whose lease was lost (not sent), and the settles of it tried so far."""

    jobs: Sequence[Job]
    outcomes: list[Outcome]
    cause: str
    lost: frozenset[str] | set[str] = frozenset()
    tries: int = 0


class Lane:
    """One batch in flight of a BatchPump: the batch it forms or runs (``runner``), its
    items (``holding``), its last batch's settle not sent yet, its own wake marker."""

    __slots__ = ("alarm", "failures", "holding", "runner", "unsettled")

    def __init__(self, queue: AsyncQueue) -> None:
        self.alarm = Alarm(queue)  # its own marker, which the upkeep rings (worker.upkeep)
        #: the batch being run, if any (the worker's drain waits for it)
        self.runner: asyncio.Task[None] | None = None
        #: the items of that batch, leased to it
        self.holding: list[Job] = []
        #: the last batch's settle, sent with the next fetch (or alone when the lane stops)
        self.unsettled: _Unsettled | None = None
        self.failures = 0  # round trips failed in a row


def settle_code(outcome: Outcome) -> str:
    """settle.lua's code for a worker outcome (not 'lost': a lost item is not sent)."""
    if outcome.kind == "limited":
        return "q" if outcome.scope == "queue" else "g"
    return _CODES[outcome.kind]


class BatchPump:
    """Forms, runs and settles the batches of one batch task's queue (or shard).

    Args:
        queue: the queue (or shard).
        task: the batch task that owns it.
        executor: the worker's executor (the decoding of items, the outcome of a
            failure, the threads of sync tasks).
        metrics: per item as for jobs, plus the batch sizes and why each started.
        lease: the lease of the items (the task's, else the worker's).
        burst: stop once no batch forms.
    """

    def __init__(
        self,
        queue: AsyncQueue,
        task: Task[Any, Any],
        executor: Executor,
        metrics: WorkerMetrics,
        *,
        lease: float,
        burst: bool = False,
        worker: str = "",
    ) -> None:
        spec = task.config.batch
        assert spec is not None, "a BatchPump runs a batch task"
        self.queue = queue
        self.task = task
        self.spec: Batch = spec
        self.executor = executor
        self.metrics = metrics
        self.lease = task.config.lease or lease
        self.burst = burst
        self.worker = worker  # the worker's id, kept in each item's result summary
        self.stopping = False
        #: the batches in flight, ``spec.concurrency`` at most (the worker runs each lane)
        self.lanes = [Lane(queue) for _ in range(spec.concurrency)]
        self.giving_back = False  # the drain cancels the runners: their items go back
        self.processed = 0
        #: told when a wait ends with nothing fetched (the upkeep's ``soon``)
        self.woke_empty: Callable[[], None] = lambda: None

    @property
    def name(self) -> str:
        """The queue's name."""
        return self.queue.name

    @property
    def holding(self) -> list[Job]:
        """The items of the batches being run: the worker's heartbeat lists them as
        jobs in hand, and its durq_jobs_in_hand counts them."""
        return [job for lane in self.lanes for job in lane.holding]

    @property
    def runners(self) -> list[asyncio.Task[None]]:
        """The batches being run (the worker's drain waits for them)."""
        return [lane.runner for lane in self.lanes if lane.runner is not None]

    @property
    def alarm(self) -> Alarm:
        """The consumer the upkeep's look names: the first lane's (a batch's fetch holds
        no flow-control alarm of its own)."""
        return self.lanes[0].alarm

    def stop(self) -> None:
        """Form no more batches; each lane's wait for items ends at once (its own
        marker, rung: the queue's wake marker would wake one waiter, maybe another's)."""
        if self.stopping:
            return
        self.stopping = True
        for lane in self.lanes:
            lane.alarm.ring()

    async def run(self, lane: Lane) -> None:
        """Form and run ``lane``'s batches until stopped (or, in burst mode, until none
        forms)."""
        try:
            await self._run(lane)
        finally:
            for ringing in lane.alarm.pending():
                ringing.cancel()
            if lane.unsettled is not None:  # the last batch's settle, not sent yet
                await self._settle(lane, lane.unsettled)

    async def _run(self, lane: Lane) -> None:
        spec = self.spec
        while not self.stopping:
            # an idle wait lasts until the upkeep rings this pump's own marker for a
            # lease that ends (a dead worker's items: worker.upkeep), or once per lease
            # when that is short
            if self.burst:
                wait = _BURST_RECHECK
            else:
                wait = self.lease if self.lease < MAX_BLOCK else IDLE_BLOCK
            alarm = lane.alarm
            try:
                op = batches.dequeue_batch(
                    self.queue.keys,
                    self.queue.codec,
                    spec.max_size,
                    spec.max_wait,
                    self.lease,
                    by_group=spec.by_group,
                    wait=wait,
                    stopping=self._woke_for_nothing,
                    ring=alarm.ring_key,
                )
                alarm.waiting(wait)
                try:
                    jobs = await self._settle_and_fetch(lane, op)
                finally:
                    alarm.woke()
            except _TRANSIENT as exc:
                await self._pause(lane, exc)
                continue
            lane.failures = 0
            if not jobs:
                if self.burst:
                    return
                self.woke_empty()
                continue
            if self.stopping:  # formed while the worker began to stop: never started
                await self._settle(lane, _Unsettled(jobs, [Outcome("defer")] * len(jobs), ""))
                return
            cause = batches.cause_of(len(jobs), spec.max_size)
            lane.runner = asyncio.create_task(self._batch(lane, jobs, cause), name="durq-batch")
            lane.holding = jobs
            try:
                await asyncio.shield(lane.runner)
            finally:
                lane.runner = None
                lane.holding = []

    def _woke_for_nothing(self) -> bool:
        """Asked by the batch's forming after each wake-up that brought no item: the
        upkeep looks at the next heartbeat (worker.upkeep); True once stopping."""
        self.woke_empty()
        return self.stopping

    def watch(self, look: Look) -> None:
        """The upkeep's look at this queue (once per heartbeat): end each lane's wait
        when a lease ends (another worker's items, taken after the wait was planned)
        before the wait does."""
        if look.lease_ms >= 0:
            for lane in self.lanes:
                lane.alarm.due(look.lease_ms / 1000 + 0.001)

    async def _batch(self, lane: Lane, jobs: list[Job], cause: str) -> None:
        """Run one batch and settle its items."""
        try:
            for _ in range(_START_TURNS):
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            if not self.giving_back:
                raise
            # given back before it started: every item's attempt returned, as at a stop
            lane.unsettled = _Unsettled(jobs, [Outcome("defer")] * len(jobs), cause)
            return
        self.metrics.batch(self.name, self.task.name, len(jobs), cause)
        job_metrics = self.metrics.job_metrics(self.name, self.task.name)
        calls = self.executor.prepare_batch(jobs, self.task)
        # an item per job prepared (a Call); the others (undecodable, bad arguments:
        # dead-lettered; a version this worker cannot run: given back) are not run
        items = [
            Item(job, c[1], c[2]) for job, c in zip(jobs, calls, strict=True) if type(c) is tuple
        ]
        # the index in jobs of each item; None: every job is one (the common batch)
        at = (
            None
            if len(items) == len(jobs)
            else [i for i, c in enumerate(calls) if type(c) is tuple]
        )
        now = time.time()
        job_metrics.started_many([max(now - job.enqueued_at, 0.0) for job in jobs])
        lost: set[str] = set()
        began = time.monotonic()
        # the leases' keeper starts a third of the lease in: a timer, not a task, until
        # then (most batches end before it)
        keeping: list[asyncio.Task[None]] = []
        timer = asyncio.get_running_loop().call_later(
            self._keep_every(),
            lambda: keeping.append(asyncio.create_task(self._keep(jobs, lost, began))),
        )
        try:
            ran = await self._call(items) if items else []
        except asyncio.CancelledError:
            if not self.giving_back:
                raise
            ran = [Outcome("defer")] * len(items)
        finally:
            timer.cancel()
            for keeper in keeping:
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeper
        elapsed = time.monotonic() - began
        final = ran if at is None else _merged(calls, at, ran)
        self._account(jobs, calls, final, lost, elapsed)
        # sent with the next batch's first fetch (one round trip less per batch)
        lane.unsettled = _Unsettled(jobs, final, cause, lost)
        self.processed += len(jobs)

    def _account(
        self,
        jobs: list[Job],
        calls: list[Any],
        final: list[Outcome],
        lost: set[str],
        elapsed: float,
    ) -> None:
        """A batch's items in the metrics and the log; each kept result gets its item's
        summary (``durq.worker.summary``)."""
        job_metrics = self.metrics.job_metrics(self.name, self.task.name)
        if not lost and final.count(DONE) == len(final):  # the common batch
            job_metrics.finished("done", elapsed, len(final))
            return
        name = self.task.name
        done = 0  # the common outcome, counted once for all
        for job, call, outcome in zip(jobs, calls, final, strict=True):
            if job.id in lost:
                outcome = Outcome("lost")
            else:
                if outcome.result is not None:  # the item's summary rides with its result
                    add_summary(outcome, job, name, call, elapsed, self.worker, self.lease)
                if outcome.kind == "done":
                    done += 1
                    continue
            job_metrics.finished(outcome.kind, elapsed)
            log_outcome(job, name, outcome, elapsed)
        if done:
            job_metrics.finished("done", elapsed, done)

    async def _call(self, items: list[Item]) -> list[Outcome]:
        """Call the task with ``items``; the outcome of each."""
        task, executor = self.task, self.executor
        timeout = task.config.timeout
        started = time.monotonic()
        failure: BaseException | None = None
        value: Any = None
        try:
            if task.is_async:
                coro = task.fn(items)
                value = await (coro if timeout is None else asyncio.wait_for(coro, timeout))
            else:
                value = await executor.threads.run(task.fn, (items,), {}, timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = exc
        elapsed = time.monotonic() - started
        keep = task.config.result
        if failure is None and not keep and _said_nothing(items):  # the common batch
            return [DONE] * len(items)
        per_item = keep and isinstance(value, list) and len(value) == len(items)
        out: list[Outcome] = []
        for n, item in enumerate(items):
            said = item.outcome if item.outcome is not None else failure
            if said is not None:
                out.append(executor.failure(task, item.job, said, elapsed))
            elif keep:
                out.append(executor.completed(task, item.job, value[n] if per_item else value))
            else:
                out.append(DONE)
        return out

    def _keep_every(self) -> float:
        """Seconds between two extensions of a running batch's leases."""
        return max(self.lease / 3, 0.05)

    async def _keep(self, jobs: Sequence[Job], lost: set[str], began: float) -> None:
        """Extend every item's lease now and each third of it, in one call, while the
        batch (run since ``began``) runs; not past the task's timeout: a hung call's
        items come back after their lease."""
        timeout = self.task.config.timeout
        while timeout is None or time.monotonic() - began <= timeout + 1:
            await self._extend(jobs, lost)
            await asyncio.sleep(self._keep_every())

    async def _extend(self, jobs: Sequence[Job], lost: set[str]) -> None:
        """One extension of the leases of ``jobs`` not ``lost`` (an item whose extension
        is refused joins ``lost``)."""
        held = [job for job in jobs if job.id not in lost]
        try:
            statuses = await self.queue.extend_many(held, lease=self.lease)
        except _TRANSIENT as exc:
            log.warning("could not extend %d leases on %s: %s", len(held), self.name, exc)
            return
        for job, status in zip(held, statuses, strict=True):
            if status not in (Answer.OK, Answer.CANCELLED):
                lost.add(job.id)
                self.metrics.lease_lost(self.name)
                log.warning(
                    "lease lost on item %s of a batch of %s (%s): another worker may run it",
                    job.id,
                    self.task.name,
                    status.name,
                )

    def _settle_op(self, batch: _Unsettled) -> Op[list[Status]] | None:
        """The settle of ``batch``: its items in one call; lost items are not sent
        (None: none is left to send)."""
        if not batch.lost and batch.outcomes.count(DONE) == len(batch.outcomes):  # the common batch
            if not batch.jobs:
                return None
            return batches.settle_done(
                self.queue.keys, batch.jobs, result_ttl=self.queue.result_ttl, cause=batch.cause
            )
        rows: list[batches.Row] = [
            (job, settle_code(o), o.delay, o.reason, o.result or b"")
            for job, o in zip(batch.jobs, batch.outcomes, strict=True)
            if o.kind != "lost" and job.id not in batch.lost
        ]
        if not rows:
            return None
        return batches.settle(
            self.queue.keys, rows, result_ttl=self.queue.result_ttl, cause=batch.cause
        )

    async def _settle_and_fetch(self, lane: Lane, fetch: Op[list[Job]]) -> list[Job]:
        """Run ``fetch`` (the lane's next batch's forming), with its last batch's
        settle, if any, in its first round trip and before it. A settle that failed is
        kept, sent again with the next fetch (an item settled already is refused alone),
        up to _SETTLE_TRIES times; a connection error raises, the settle kept."""
        batch = lane.unsettled
        settle = None if batch is None else self._settle_op(batch)
        if batch is None or settle is None:
            lane.unsettled = None
            return await self.queue._run(fetch)
        try:
            settled, jobs = await self.queue._run_all([settle, fetch])
        except _TRANSIENT as exc:
            self._settled(lane, batch, exc)
            raise
        self._settled(lane, batch, settled)
        if isinstance(jobs, BaseException):
            raise jobs
        return cast("list[Job]", jobs)

    def _settled(self, lane: Lane, batch: _Unsettled, reply: list[Status] | BaseException) -> None:
        """What became of ``batch``'s settle: done, or kept to be sent again (a failure,
        logged with the error once it was tried _SETTLE_TRIES times: its items come
        back after their lease)."""
        batch.tries += 1
        if isinstance(reply, BaseException):
            if batch.tries < _SETTLE_TRIES:
                lane.unsettled = batch
                return
            log.error(
                "could not settle a batch of %d items on %s: %s; they come back after their lease",
                len(batch.jobs),
                self.name,
                reply,
            )
        elif batch.tries == 1 and (refused := reply.count(Status.LEASE_LOST)):
            self.metrics.lease_lost(self.name)
            log.warning(
                "%d items of a batch of %s on %s were refused: their leases had "
                "expired and they were handed out again, so they may run twice",
                refused,
                self.task.name,
                self.name,
            )
        lane.unsettled = None

    async def _settle(self, lane: Lane, batch: _Unsettled) -> None:
        """Settle ``batch`` alone (the lane stops), sent again after a failure; a
        settle kept from before goes first."""
        if lane.unsettled is not None and lane.unsettled is not batch:
            await self._settle(lane, lane.unsettled)
        lane.unsettled = batch
        while lane.unsettled is not None:
            settle = self._settle_op(batch)
            if settle is None:
                lane.unsettled = None
                return
            try:
                reply: list[Status] | BaseException = await self.queue._run(settle)
            except _TRANSIENT as exc:
                reply = exc
            self._settled(lane, batch, reply)
            if lane.unsettled is not None:
                await self._pause(lane, cast(BaseException, reply))

    async def _pause(self, lane: Lane, exc: BaseException) -> None:
        lane.failures += 1
        failures = lane.failures
        if failures in (1, 3) or failures % 20 == 0:
            log.warning(
                "queue %s: %s: %s; retrying (attempt %d)",
                self.name,
                type(exc).__name__,
                exc,
                failures,
            )
        await asyncio.sleep(min(0.05 * 2**failures, 2.0))


def _merged(calls: Sequence[Any], at: Sequence[int], ran: Sequence[Outcome]) -> list[Outcome]:
    """The outcome of each job of a batch: of those run (``ran``, the jobs at ``at``),
    and of those not run, what their preparing said (``calls``): a version this worker
    cannot run is given back for a worker that can."""
    final = [
        Outcome("defer") if type(c) is tuple
        else Outcome("defer", delay=_HOLD_BACK) if c.kind == "hold"
        else c
        for c in calls
    ]  # fmt: skip
    for i, outcome in zip(at, ran, strict=True):
        final[i] = outcome
    return final


def _said_nothing(items: Sequence[Item]) -> bool:
    """True when the function settled none of ``items`` its own way (``Item.fail``,
    ``Item.retry``)."""
    said = [item.outcome for item in items]
    return said.count(None) == len(said)
