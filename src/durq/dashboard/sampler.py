"""The sampler: a background task that reads every queue's sizes and counters and the
workers' heartbeats every few seconds and adds a sample to the app's History.

The history lives in the app (not in Redis) and starts empty when the app starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable

from durq.dashboard.data import DashboardData, WorkerEntry
from durq.dashboard.history import History, QueuePoint, Sample, total_of

__all__ = ["Sampler"]

log = logging.getLogger("durq.dashboard")


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
            # a sample of many queues can take longer than the interval: rest at least as
            # long as it took, so that sampling keeps at most half of the dashboard's reads
            took = loop.time() - began
            await asyncio.sleep(max(self.interval - took, took, 0.05))
