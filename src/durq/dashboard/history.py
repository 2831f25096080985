"""The charts' history: samples of every queue in an in-memory ring buffer, and the
series and recent rates computed from them. No IO here (``durq.dashboard.sampler``
takes the samples).

Throughput is the change of the queues' lifetime counters between two samples (kept by
the scripts on the Redis server, so every producer and worker counts). Latency (enqueue
to start) and run time are the means over each interval of the running totals that
workers publish in their heartbeats.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice, pairwise

__all__ = ["History", "QueuePoint", "Recent", "Sample", "Series", "total_of"]


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
        for before, now in pairwise(samples):
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
