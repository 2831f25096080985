"""The process pool's metrics, in the worker's registry: children killed by reason,
children replaced by cause, children alive."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from durq.metrics import WorkerMetrics

__all__ = ["PoolMetrics"]


class PoolMetrics(Collector):
    """Counts kept in plain dicts, turned into metrics when scraped."""

    def __init__(self, metrics: WorkerMetrics, alive: Callable[[], int]) -> None:
        self.kills: dict[str, int] = {}
        self.recycles: dict[str, int] = {}
        self._alive = alive
        metrics.registry.register(self)

    def killed(self, reason: str) -> None:
        """A child died running a job: killed by the worker (``timeout``, ``cancelled``,
        ``lease_lost``, ``shutdown``) or by itself (``killed:SIGSEGV``, ``exited:1``)."""
        self.kills[reason] = self.kills.get(reason, 0) + 1

    def recycled(self, cause: str) -> None:
        """A child was replaced between jobs (``max_jobs``, ``max_memory``, ``max_age``,
        ``timeout``: it had been stopped by TimeLimitExceeded)."""
        self.recycles[cause] = self.recycles.get(cause, 0) + 1

    def collect(self) -> Iterator[Metric]:
        kills = CounterMetricFamily(
            "durq_pool_kills",
            "Children of the process pool that died running a job, by reason",
            labels=["reason"],
        )
        for reason, n in sorted(self.kills.items()):
            kills.add_metric([reason], n)
        yield kills
        recycles = CounterMetricFamily(
            "durq_pool_recycles",
            "Children of the process pool replaced between jobs, by cause",
            labels=["cause"],
        )
        for cause, n in sorted(self.recycles.items()):
            recycles.add_metric([cause], n)
        yield recycles
        yield GaugeMetricFamily(
            "durq_pool_children", "Children of the process pool alive", value=self._alive()
        )
