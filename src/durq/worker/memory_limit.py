"""The worker's memory limit (``durq worker --memory-limit MB``): above it the worker
stops fetching, instead of growing until the kernel's OOM killer takes it with every job
it holds.

Once a second it adds up the resident memory of its own process, its process pool's
template and children (the current resident set, not the peak). Above the limit,
fetching stops (``Capacity.hold``): the jobs in hand run to their end and are
acknowledged, a child past ``max_memory_per_child`` is replaced, and memory comes down;
under 90% of the limit, fetching resumes. Each change is logged, and
``durq_worker_resident_bytes`` and ``durq_worker_fetching_held`` show it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from durq.metrics import WorkerMetrics
from durq.worker.capacity import Capacity
from durq.worker.pool.rss import rss

__all__ = ["INTERVAL", "RESUME", "MemoryLimit"]

log = logging.getLogger("durq.worker")

INTERVAL = 1.0  # seconds between two readings
RESUME = 0.9  # fetching resumes under this share of the limit


class MemoryLimit(Collector):
    """Holds ``capacity``'s fetching while the worker's memory is over ``limit`` bytes.

    Args:
        limit: bytes.
        capacity: the worker's slots.
        metrics: the worker's metrics (its gauges join their registry).
        pids: the other processes that count (the pool's template and children).
    """

    def __init__(
        self,
        limit: int,
        capacity: Capacity,
        metrics: WorkerMetrics,
        pids: Callable[[], list[int]] = list,
    ) -> None:
        self.limit = limit
        self.capacity = capacity
        self.pids = pids
        self.used = 0
        self.holds = 0  # times fetching was held
        metrics.registry.register(self)

    def measure(self) -> int:
        """The worker's resident bytes now."""
        return sum(rss(pid) or 0 for pid in (os.getpid(), *self.pids()))

    def check(self) -> None:
        """One reading: hold or resume fetching."""
        used = self.used = self.measure()
        mb = used / 1048576
        if not self.capacity.held and used > self.limit:
            self.holds += 1
            self.capacity.hold(True)
            log.warning(
                "worker memory %.0f MB is over its limit of %.0f MB: fetching stops until "
                "it is under %.0f MB (%d jobs in hand run on)",
                mb,
                self.limit / 1048576,
                RESUME * self.limit / 1048576,
                self.capacity.in_use(),
            )
        elif self.capacity.held and used < RESUME * self.limit:
            self.capacity.hold(False)
            log.info("worker memory %.0f MB is under its limit again: fetching resumes", mb)

    async def run(self) -> None:
        """Check every INTERVAL seconds until cancelled."""
        while True:
            self.check()
            await asyncio.sleep(INTERVAL)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "durq_worker_resident_bytes",
            "Resident memory of the worker (its process, its pool's template and children)",
            value=self.used,
        )
        yield GaugeMetricFamily(
            "durq_worker_fetching_held",
            "1 while the worker's memory limit holds fetching",
            value=1 if self.capacity.held else 0,
        )
