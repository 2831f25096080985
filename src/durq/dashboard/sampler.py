"""The charts' history: a background task samples every queue's sizes and counters and
the workers' running totals into an in-memory ring buffer.

Throughput is the change of the queues' lifetime counters between two samples (the
Redis server's clock, so every worker counts, wherever it runs). Latency (enqueue to
start) and run time are the means over each interval of the totals that workers publish
in their heartbeats. The history lives in the app (not in Redis) and starts empty when
the app starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice

from durq.dashboard.data import DashboardData, WorkerEntry

__all__ = ["History", "QueuePoint", "Recent", "Sample", "Sampler", "Series"]

log = logging.getLogger("durq.dashboard")


@dataclass(frozen=True, slots=True)
class QueuePoint:
    """One queue at one sample: sizes, lifetime counters, and the workers' activity on
    it since the previous sample."""

    pending: int
    delayed: int
    active: int
    dead: int
    completed: int
    failed: int
    started: float = 0.0  # jobs started by workers since the previous sample
    pickup_sum: float = 0.0  # their enqueue-to-start seconds, summed
    finished: float = 0.0  # runs finished since the previous sample
    run_sum: float = 0.0  # their run seconds, summed


@dataclass(frozen=True, slots=True)
class Sample:
    """Every sampled queue at one moment (server time, seconds), and their sum."""

    at: float
    queues: dict[str, QueuePoint]
    total: QueuePoint
    workers: int = 0


def total_of(points: Iterable[QueuePoint]) -> QueuePoint:
    """The sum of several queues' points."""
    pts = list(points)
    return QueuePoint(
        pending=sum(p.pending for p in pts),
        delayed=sum(p.delayed for p in pts),
        active=sum(p.active for p in pts),
        dead=sum(p.dead for p in pts),
        completed=sum(p.completed for p in pts),
        failed=sum(p.failed for p in pts),
        started=sum(p.started for p in pts),
        pickup_sum=sum(p.pickup_sum for p in pts),
        finished=sum(p.finished for p in pts),
        run_sum=sum(p.run_sum for p in pts),
    )


@dataclass(frozen=True)
class Series:
    """A named line of a chart: (time, value) points; None breaks the line."""

    name: str
    points: list[tuple[float, float | None]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Recent:
    """A queue's (or all queues') activity over the last few samples."""

    completed_rate: float | None = None  # jobs completed per second
    failed_rate: float | None = None  # runs failed per second
    pickup: float | None = None  # mean enqueue-to-start seconds
    run: float | None = None  # mean run seconds


def _rate(now: float, before: float, seconds: float) -> float:
    # counters only grow; a drop means the queue was recreated: no rate for that step
    return max(now - before, 0.0) / seconds


def _pair(before: Sample, now: Sample, queue: str | None) -> tuple[QueuePoint, QueuePoint] | None:
    """The points of ``queue`` (None: the sums) in two samples, when comparable: the
    sums only while the set of queues stayed the same, so a new queue's lifetime
    counters do not show up as a burst of throughput."""
    if queue is None:
        if before.queues.keys() != now.queues.keys():
            return None
        return before.total, now.total
    a, b = before.queues.get(queue), now.queues.get(queue)
    return None if a is None or b is None else (a, b)


class History:
    """The last ``size`` samples, oldest first, and the series the charts draw.

    ``queue=None`` in the methods below means all queues together.
    """

    def __init__(self, size: int) -> None:
        self.samples: deque[Sample] = deque(maxlen=size)

    def add(self, sample: Sample) -> None:
        """Append a sample (the oldest falls out when full)."""
        self.samples.append(sample)

    def latest(self) -> Sample | None:
        """The newest sample, if any."""
        return self.samples[-1] if self.samples else None

    @staticmethod
    def _point(sample: Sample, queue: str | None) -> QueuePoint | None:
        return sample.total if queue is None else sample.queues.get(queue)

    def recent(self, queue: str | None = None, window: int = 12) -> Recent:
        """Rates and mean latencies over the last ``window`` samples (a minute at the
        default interval); reads only those samples, so a table of many queues stays
        cheap."""
        last = list(islice(reversed(self.samples), window))[::-1]
        if len(last) < 2:
            return Recent()
        first, newest = last[0], last[-1]
        seconds = newest.at - first.at
        pair = _pair(first, newest, queue)
        completed = failed = None
        if pair is not None and seconds > 0:
            completed = _rate(pair[1].completed, pair[0].completed, seconds)
            failed = _rate(pair[1].failed, pair[0].failed, seconds)
        points = [p for p in (self._point(s, queue) for s in last[1:]) if p is not None]
        started = sum(p.started for p in points)
        finished = sum(p.finished for p in points)
        return Recent(
            completed_rate=completed,
            failed_rate=failed,
            pickup=sum(p.pickup_sum for p in points) / started if started else None,
            run=sum(p.run_sum for p in points) / finished if finished else None,
        )

    def throughput(self, queue: str | None = None) -> list[Series]:
        """Jobs completed and runs failed per second."""
        done = Series("completed/s")
        failed = Series("failed/s")
        samples = list(self.samples)
        for before, now in zip(samples, samples[1:], strict=False):
            seconds = now.at - before.at
            pair = _pair(before, now, queue)
            if pair is None or seconds <= 0:
                done.points.append((now.at, None))
                failed.points.append((now.at, None))
                continue
            done.points.append((now.at, _rate(pair[1].completed, pair[0].completed, seconds)))
            failed.points.append((now.at, _rate(pair[1].failed, pair[0].failed, seconds)))
        return [done, failed]

    def latency(self, queue: str | None = None) -> list[Series]:
        """Mean enqueue-to-start latency and mean run time (seconds) per interval."""
        pickup = Series("wait (enqueue to start)")
        run = Series("run time")
        for sample in self.samples:
            p = self._point(sample, queue)
            if p is None:
                continue
            pickup.points.append((sample.at, p.pickup_sum / p.started if p.started else None))
            run.points.append((sample.at, p.run_sum / p.finished if p.finished else None))
        return [pickup, run]

    def depth(self, queue: str | None = None) -> list[Series]:
        """Pending, delayed, active and dead jobs over time."""
        names = ("pending", "delayed", "active", "dead")
        out = [Series(name) for name in names]
        for sample in self.samples:
            p = self._point(sample, queue)
            values = (None,) * 4 if p is None else (p.pending, p.delayed, p.active, p.dead)
            for series, value in zip(out, values, strict=True):
                series.points.append((sample.at, None if value is None else float(value)))
        return out


class _TotalsTracker:
    """Turns the workers' running totals into per-interval differences per queue."""

    def __init__(self) -> None:
        self._last: dict[str, dict[str, list[float]]] = {}
        self._last_at: float | None = None

    def step(self, workers: Iterable[WorkerEntry], now: float) -> dict[str, list[float]]:
        """Per queue: ``[started, pickup_sum, finished, run_sum]`` since the last step."""
        out: dict[str, list[float]] = {}
        seen: dict[str, dict[str, list[float]]] = {}
        for worker in workers:
            seen[worker.id] = worker.totals
            before = self._last.get(worker.id)
            if before is None:
                # a worker that started since the last step counts from zero; one seen
                # for the first time on the dashboard's first step is only a baseline
                fresh = self._last_at is not None and (worker.started or 0) >= self._last_at
                if not fresh:
                    continue
                before = {}
            for queue, totals in worker.totals.items():
                prior = before.get(queue, [0.0, 0.0, 0.0, 0.0])
                delta = [a - b for a, b in zip(totals, prior, strict=False)]
                if any(d < 0 for d in delta):  # the worker restarted its counts
                    delta = list(totals)
                acc = out.setdefault(queue, [0.0, 0.0, 0.0, 0.0])
                for i in range(4):
                    acc[i] += delta[i]
        self._last = seen
        self._last_at = now
        return out


class Sampler:
    """Samples the queues every ``interval`` seconds into ``history``, in a task of the
    event loop that serves the app (started by the first request or by the lifespan)."""

    def __init__(self, data: DashboardData, history: History, interval: float) -> None:
        self.data = data
        self.history = history
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._totals = _TotalsTracker()

    def ensure_started(self) -> None:
        """Start sampling in the running loop, unless it runs already (cheap to call on
        every request: a mounted app gets no lifespan events from its parent)."""
        task = self._task
        if task is not None and not task.done():
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name="durq-sampler")

    async def aclose(self) -> None:
        """Stop sampling."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def sample(self) -> Sample:
        """Take one sample now and add it to the history."""
        names, _total = await self.data.queue_names()
        stats, workers = await asyncio.gather(self.data.stats(names), self.data.workers())
        at = max((s.server_time for s in stats.values()), default=time.time())
        activity = self._totals.step(workers, at)
        points = {}
        for name, s in stats.items():
            act = activity.get(name, [0.0, 0.0, 0.0, 0.0])
            points[name] = QueuePoint(
                pending=s.pending,
                delayed=s.delayed,
                active=s.active,
                dead=s.dead,
                completed=s.completed,
                failed=s.failed,
                started=act[0],
                pickup_sum=act[1],
                finished=act[2],
                run_sum=act[3],
            )
        sample = Sample(at, points, total_of(points.values()), len(workers))
        self.history.add(sample)
        return sample

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            try:
                await self.sample()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: keep the history, try again later
                log.warning("dashboard sample failed: %s", exc)
            await asyncio.sleep(max(self.interval - (loop.time() - began), 0.05))
