"""The worker's slots: how many jobs it may hold, which deliveries hold them, and how
they are shared among the queues it consumes.

A worker holds at most ``concurrency + prefetch`` jobs (running or waiting to run).
Each pump fetches into the free slots; with several queues (or shards) a busy pump is
held to an equal share, so a deep queue cannot starve the others, and a pump whose
queue is empty (idle) leaves its share to them. This class is the one place that
counts: the pumps ask it how much they may fetch, the worker fills and frees the
slots, and it wakes the pumps that may fetch more when that changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from durq.app.task import Task
from durq.metrics import JobMetrics
from durq.models import Job
from durq.worker.executor import Call, Outcome

__all__ = ["Capacity", "Delivery"]


class Delivery:
    """One delivery of a job to this worker, holding a slot from its fetch until its
    outcome is buffered. A job whose lease lapsed can be delivered again while its
    first run still goes on: each delivery has its own lease token, so its own slot.
    (A plain class with slots: one is made per job, without a dataclass's extra call.)"""

    __slots__ = (
        "call", "cancelling", "job", "key", "lost", "metrics", "name", "runner", "started",
        "task", "traced",
    )  # fmt: skip

    def __init__(
        self,
        job: Job,
        task: Task[Any, Any] | None,
        call: Call | Outcome,
        name: str,
        metrics: JobMetrics,
        traced: bool = False,
    ) -> None:
        self.job = job
        self.task = task
        self.call = call  # Executor.prepare's answer: parsed once, when delivered
        self.name = name  # the task's name ("?" when the app has no such task), for logs
        self.metrics = metrics  # where its start and end are counted
        self.traced = traced  # run in a consumer span (tracing was on when delivered)
        self.started: float | None = None  # monotonic time it started running
        self.runner: asyncio.Task[None] | None = None
        self.lost = False  # its lease was taken over: send nothing for it
        self.cancelling = False  # a cancel was asked: it is being stopped (worker.control)
        # (queue, job id, lease token): what tells two deliveries of one job apart
        self.key = (job.queue, job.id, job.token)


class Capacity:
    """The slots of a worker that may hold ``size`` jobs at once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.open = True  # False once the worker stops fetching
        self.held = False  # True while the worker's memory limit holds fetching
        # keyed by delivery, not by job: keyed by job, a second delivery replaced the
        # first, whose end then freed a slot twice and one queue's count leaked
        self.deliveries: dict[tuple[str, str, str], Delivery] = {}
        self._by_queue: dict[str, int] = {}  # deliveries per queue
        self._wake: dict[str, Callable[[], None]] = {}  # per queue: wakes its pump
        self._idle: set[str] = set()

    def add_queue(self, queue: str, wake: Callable[[], None]) -> None:
        """Share the slots with ``queue`` too; ``wake()`` tells its pump it may fetch."""
        self._by_queue.setdefault(queue, 0)
        self._wake[queue] = wake

    # -- asked by the pumps -------------------------------------------------------------

    def in_use(self) -> int:
        """Jobs held."""
        return len(self.deliveries)

    def in_use_by(self, queue: str) -> int:
        """Jobs of ``queue`` held."""
        return self._by_queue.get(queue, 0)

    def free(self) -> int:
        """How many more jobs the worker may fetch now (0 once it stopped fetching, and
        while its memory limit holds it)."""
        if not self.open or self.held:
            return 0
        return max(self.size - len(self.deliveries), 0)

    def free_for(self, queue: str) -> int:
        """How many more jobs ``queue``'s pump may fetch now: the free slots, at most
        what is left of its share when several queues compete."""
        room = self.free()
        if room == 0 or len(self._wake) < 2:
            return room
        return max(min(room, self.share() - self.in_use_by(queue)), 0)

    def share(self) -> int:
        """The slots each busy queue may hold: an equal part of all, rounded up."""
        busy = len(self._wake) - len(self._idle)
        return -(-self.size // max(busy, 1))

    def set_idle(self, queue: str, idle: bool, *, rebalance: bool = True) -> None:
        """``queue`` was found empty (idle) or may have work again (busy). With
        ``rebalance``, a change wakes the busy pumps that may now fetch more."""
        if (queue in self._idle) == idle:
            return
        if idle:
            self._idle.add(queue)
        else:
            self._idle.discard(queue)
        if rebalance:
            self.rebalance()

    # -- filled and freed by the worker -------------------------------------------------

    def occupy(self, delivery: Delivery) -> None:
        """``delivery`` takes a slot (it was fetched)."""
        key = delivery.key
        if key not in self.deliveries:
            queue = key[0]
            self._by_queue[queue] = self._by_queue.get(queue, 0) + 1
        self.deliveries[key] = delivery

    def vacate(self, delivery: Delivery) -> bool:
        """Free ``delivery``'s slot and wake the pumps that may fetch now; False when
        it held none (given back already)."""
        if self.deliveries.pop(delivery.key, None) is None:
            return False
        queue = delivery.job.queue
        self._by_queue[queue] -= 1
        self._wake[queue]()
        if len(self.deliveries) == self.size - 1:  # was full: every pump may fetch again
            self.wake_all()
        elif len(self._wake) > 1 and self._by_queue[queue] >= self.share():
            self.rebalance()  # a slot over this queue's share: another queue's turn
        return True

    def hold(self, held: bool) -> None:
        """Hold fetching (``held``) or let it go on (``worker.memory_limit``): the jobs
        in hand run and are acknowledged meanwhile."""
        if held != self.held:
            self.held = held
            if not held:
                self.wake_all()

    def close(self) -> None:
        """Stop fetching (burst mode finished, or shutting down); wake every pump."""
        self.open = False
        self.wake_all()

    def rebalance(self) -> None:
        """The share changed: wake the busy pumps under it."""
        share = self.share()
        for queue, wake in self._wake.items():
            if queue not in self._idle and self._by_queue[queue] < share:
                wake()

    def wake_all(self) -> None:
        """Wake every pump (slots freed, or the worker is stopping)."""
        for wake in self._wake.values():
            wake()
