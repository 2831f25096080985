"""Job control in the worker: the cancel flag and progress reports of the jobs it runs
(``durq.current_job().cancelled`` and ``.progress()``), the listener of the queues'
cancel channels, and stopping a job whose cancel was asked (``WorkerControl``).

A cancel is durable in Redis, a flag in the job's record (cancel.lua). The worker learns
of it from the lease keeper, whose extensions answer CANCELLED (every third of the
lease), or sooner from a message on the queue's cancel channel, which only makes the
keeper extend at once: the flag decides, a message lost costs at most a third of the
lease, and a message sent by anything else cancels nothing.

Progress reports are coalesced: at most one write per ``PROGRESS_INTERVAL`` per job, the
newest value always written (a report waiting at the end of the job is written before
its outcome is sent). Writes are fenced by the lease token: once another worker was
handed the job, the next report raises LeaseLost in the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis.asyncio
from redis.exceptions import RedisError

from durq._async.queue import AsyncQueue
from durq.errors import DurqError, LeaseLost
from durq.models import Job
from durq.protocol.args import reason_json
from durq.protocol.control import cancel_channel, progress_json, write_progress
from durq.protocol.status import Status
from durq.worker.capacity import Capacity, Delivery
from durq.worker.executor import Outcome
from durq.worker.joblog import job_fields, task_name
from durq.worker.leases import LeaseKeeper

__all__ = ["CANCELLED", "PROGRESS_INTERVAL", "CancelListener", "JobControls", "WorkerControl"]

log = logging.getLogger("durq.worker")

#: seconds between two progress writes of one job, at least
PROGRESS_INTERVAL = 0.25
#: the outcome of a job stopped by a cancel: the queue ends it cancelled, never retried
CANCELLED = Outcome("cancelled", reason=reason_json({"reason": "cancelled"}))
#: how long a sync task's report waits for a write that is due at once (its answer says
#: whether the lease is still held)
_SYNC_WAIT = 10.0


def _key(job: Job) -> tuple[str, str, str]:
    return (job.queue, job.id, job.token)


class _Reporter:
    """The progress writes of one job: the newest report, and the write in flight or
    scheduled. Reports come from the loop (async tasks) or from a task's thread."""

    def __init__(self, queue: AsyncQueue, job: Job, loop: asyncio.AbstractEventLoop) -> None:
        self.queue = queue
        self.job = job
        self.loop = loop
        self.lock = threading.Lock()
        self.latest: bytes | None = None  # not yet written
        self.pending = False  # a flush runs or is scheduled
        self.lost = False  # a write was refused: the lease is gone
        self.closed = False
        self.next_at = 0.0  # monotonic time the next write may start
        self.writer: asyncio.Task[None] | None = None
        self.on_cancel: Callable[[], None] = lambda: None
        self.on_lost: Callable[[], None] = lambda: None

    def report(self, fraction: Any, info: Any) -> None:
        data = progress_json(fraction, info)  # bad input fails in the task, at the call
        with self.lock:
            if self.lost or self.closed:
                raise LeaseLost(self.job.id, ": this worker no longer holds the job")
            self.latest = data
            if self.pending:
                return  # the flush under way writes the newest report
            self.pending = True
        try:
            in_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            in_loop = False
        if in_loop:
            self.loop.create_task(self.flush())
            return
        due_now = time.monotonic() >= self.next_at
        future = asyncio.run_coroutine_threadsafe(self.flush(), self.loop)
        if due_now:
            # a sync task waits for a write due now, so that a holder whose lease was
            # taken over hears it at this call
            # a failed write is logged by the flush; the next report tries again
            with contextlib.suppress(Exception):
                future.result(_SYNC_WAIT)
            with self.lock:
                if self.lost:
                    raise LeaseLost(self.job.id)

    async def flush(self) -> None:
        """Write the newest report, then any that arrive, at most one per interval."""
        self.writer = asyncio.current_task()
        try:
            while True:
                with self.lock:  # nothing new since the last write: done, without waiting
                    if self.latest is None:
                        self.pending = False
                        return
                wait = self.next_at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                with self.lock:
                    data, self.latest = self.latest, None
                    if data is None:
                        self.pending = False
                        return
                await self.write(data)
        except BaseException:
            with self.lock:
                self.pending = False
            raise
        finally:
            self.writer = None

    async def write(self, data: bytes) -> None:
        self.next_at = time.monotonic() + PROGRESS_INTERVAL
        job = self.job
        try:
            status = await self.queue._run(write_progress(self.queue.keys, job.id, job.token, data))
        except (RedisError, OSError, DurqError) as exc:
            log.debug("job %s of %s: progress not written: %s", job.id, job.queue, exc)
            return
        if status is Status.CANCELLED:
            self.on_cancel()
        elif status is not Status.OK:
            with self.lock:
                self.lost = True
            self.on_lost()

    async def close(self) -> None:
        """The job ended: write the report still waiting, if any, now."""
        with self.lock:
            self.closed = True
            data, self.latest = self.latest, None
        writer = self.writer
        if writer is not None and writer is not asyncio.current_task():
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        if data is not None and not self.lost:
            await self.write(data)


class JobControls:
    """The job control of every job a worker runs, behind ``Job.control``
    (``durq.models.JobControl``). A plain job costs nothing here: state is made only for
    a job that reports progress or whose cancel was asked."""

    def __init__(self, queues: Mapping[str, AsyncQueue], loop: asyncio.AbstractEventLoop) -> None:
        self.queues = queues
        self.loop = loop
        self.cancelled: set[tuple[str, str, str]] = set()
        self.reporters: dict[tuple[str, str, str], _Reporter] = {}
        self.on_cancel: Callable[[Job], None] = lambda job: None
        #: whether the worker still has ``job`` in hand (its delivery has not ended)
        self.in_hand: Callable[[Job], bool] = lambda job: False

    def is_cancelled(self, job: Job) -> bool:
        """True once a cancel of ``job`` was asked (``Job.cancelled``)."""
        return _key(job) in self.cancelled

    def progress(self, job: Job, fraction: float, info: Any = None) -> None:
        """A report of ``job`` (``Job.progress``), from the loop or a task's thread."""
        key = _key(job)
        reporter = self.reporters.get(key)
        if reporter is None:
            made = _Reporter(self.queues[job.queue], job, self.loop)
            made.on_cancel = lambda: self.on_cancel(job)
            made.on_lost = lambda: self._lost(job, made)
            reporter = self.reporters.setdefault(key, made)  # atomic: one per job
        reporter.report(fraction, info)

    def _lost(self, job: Job, reporter: _Reporter) -> None:
        """A write of ``job``'s progress was refused: another worker holds the job. While
        the job is in hand the reporter stays, lost, so that every later report raises
        LeaseLost (an async task's too: its writes are not waited for); a report after
        the job ended here (an abandoned thread's) is forgotten at once."""
        key = _key(job)
        if not self.in_hand(job) and self.reporters.get(key) is reporter:
            del self.reporters[key]

    def cancel(self, job: Job) -> None:
        """A cancel of ``job`` was asked: ``Job.cancelled`` becomes true."""
        self.cancelled.add(_key(job))

    async def ended(self, job: Job) -> None:
        """``job`` ended here: write its last report, forget it."""
        key = _key(job)
        self.cancelled.discard(key)
        reporter = self.reporters.pop(key, None)
        if reporter is not None:
            await reporter.close()


class CancelListener:
    """Listens to the cancel channels of a worker's queues (``<prefix>cancel``, whose
    messages are job ids) and calls ``hint(queue)`` for each message. A hint only speeds
    things up: a lost connection is retried, and meanwhile the lease keeper finds the
    durable flag. Clients without pub/sub of their own (Redis Cluster) do not listen."""

    RETRY = 1.0

    def __init__(
        self, client: Any, channels: Mapping[str, str], hint: Callable[[str], None]
    ) -> None:
        self.client = client
        self.channels = dict(channels)  # channel -> queue
        self.hint = hint

    async def run(self) -> None:
        """Listen until cancelled."""
        if not isinstance(self.client, redis.asyncio.Redis) or not self.channels:
            return
        while True:
            pubsub: Any = self.client.pubsub(ignore_subscribe_messages=True)
            conn: Any = None
            try:
                await pubsub.subscribe(*self.channels)
                # No PING every health_check_interval (15 s) on this connection: an
                # idle worker would send nothing else. A server that closes it (a
                # restart, a kill) is seen at once, a silent cut by TCP keepalive
                # within two minutes (transport.connection.keepalive_options); until
                # then a cancel is found by the lease keeper (the durable flag), and an
                # idle worker has no job to cancel.
                conn = pubsub.connection
                checks, conn.health_check_interval = conn.health_check_interval, 0
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        channel = message["channel"]
                        if isinstance(channel, bytes):
                            channel = channel.decode()
                        queue = self.channels.get(channel)
                        if queue is not None:
                            self.hint(queue)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a cut connection, an ACL without the channel
                log.debug("cancel channel: %s; listening again in %.0f s", exc, self.RETRY)
            finally:
                if conn is not None:  # the pool's connection, for its next user
                    conn.health_check_interval = checks
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            await asyncio.sleep(self.RETRY)


class WorkerControl:
    """One worker's job control: the ``JobControls`` its jobs see, the listener of its
    queues' cancel channels, and stopping the jobs whose cancel was asked.

    Args:
        queues: the worker's queues by name (one per shard).
        client: the worker's client (the listener's connection comes from it).
        capacity: the worker's jobs in hand.
        cancel_grace: seconds a sync task may run on after its cancel.
        end_unstarted: ends a job in hand that has not started (with ``CANCELLED``).
    """

    def __init__(
        self,
        queues: Mapping[str, AsyncQueue],
        client: Any,
        capacity: Capacity,
        cancel_grace: float,
        end_unstarted: Callable[[Delivery], None],
    ) -> None:
        self.controls = JobControls(queues, asyncio.get_running_loop())
        self.controls.on_cancel = self._job_cancelled
        self.controls.in_hand = lambda job: _key(job) in capacity.deliveries
        self.listener = CancelListener(
            client, {cancel_channel(q.keys): name for name, q in queues.items()}, self._hint
        )
        #: the lease keeper, which a cancel message makes extend at once (set once made)
        self.keeper: LeaseKeeper | None = None
        self._capacity = capacity
        self._cancel_grace = cancel_grace
        self._end_unstarted = end_unstarted
        #: tells a sync task run elsewhere (a process pool's child) of its cancel
        self.tell_cancel: Callable[[Delivery], None] = lambda delivery: None

    def cancel_requested(self, delivery: Delivery) -> None:
        """A cancel of this job was asked (the lease keeper found the flag): a job not
        started yet ends at once, an async task is cancelled, a sync task sees
        ``current_job().cancelled`` and is abandoned after ``cancel_grace``. However it
        stops, the queue ends the job cancelled, never retried."""
        if delivery.cancelling or delivery.lost:
            return
        delivery.cancelling = True
        job, name = delivery.job, task_name(delivery)
        self.controls.cancel(job)
        log.info(
            "job %s (%s) of %s: cancel requested; stopping it",
            job.id,
            name,
            job.queue,
            extra=job_fields(job, name, None),
        )
        runner = delivery.runner
        if runner is None:  # in hand, not started: it never runs
            self._end_unstarted(delivery)
        elif delivery.task is not None and delivery.task.is_async:
            runner.cancel()
        else:
            self.tell_cancel(delivery)
            asyncio.get_running_loop().call_later(self._cancel_grace, _stop, runner)

    def busy(self) -> bool:
        """Whether some job in hand reports progress or was cancelled (else ``ended``
        has nothing to do: checked first, without a coroutine per job)."""
        controls = self.controls
        return bool(controls.reporters or controls.cancelled)

    async def ended(self, job: Job) -> None:
        """``job`` ended here: write its last progress report, if one waits."""
        if self.busy():
            await self.controls.ended(job)

    def _hint(self, queue: str) -> None:
        if self.keeper is not None:
            self.keeper.poke()

    def _job_cancelled(self, job: Job) -> None:
        delivery = self._capacity.deliveries.get((job.queue, job.id, job.token))
        if delivery is not None:
            self.cancel_requested(delivery)


def _stop(runner: asyncio.Task[None]) -> None:
    """A sync task's grace after a cancel ended: abandon its thread, as on a timeout."""
    if not runner.done():
        runner.cancel()
