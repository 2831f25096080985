"""Prometheus metrics of a worker, in a registry of its own (no global state).

Labelled children are cached per (queue, task), so recording a job costs about a
microsecond per metric. Pickup latency is measured on the Redis server's clock (the time
of the dequeue minus the time of the enqueue), so client clock skew does not distort it.

Serve the registry with ``durq worker --metrics-port N`` (or
``prometheus_client.start_http_server(N, registry=metrics.registry)``). The worker also
publishes small running totals per queue (``WorkerMetrics.totals``) in its registry
heartbeat, from which the dashboard charts latency and run time without scraping workers.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["WorkerMetrics", "serve_metrics"]

log = logging.getLogger("durq.worker")

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
)
_RUN_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)


class WorkerMetrics:
    """Counters, gauges and histograms of one worker process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._started = Counter("durq_jobs_started", "Jobs started", ["queue", "task"], registry=r)
        self._completed = Counter(
            "durq_jobs_completed", "Jobs completed", ["queue", "task"], registry=r
        )
        self._failed = Counter(
            "durq_jobs_failed",
            "Job runs that failed (retried or dead)",
            ["queue", "task"],
            registry=r,
        )
        self._retried = Counter(
            "durq_jobs_retried", "Jobs sent back for a retry", ["queue", "task"], registry=r
        )
        self._dead = Counter(
            "durq_jobs_dead_lettered", "Jobs dead-lettered", ["queue", "task"], registry=r
        )
        self._deferred = Counter(
            "durq_jobs_deferred",
            "Jobs given back without an attempt",
            ["queue", "task"],
            registry=r,
        )
        self._recovered = Counter(
            "durq_jobs_recovered",
            "Expired leases reclaimed by this worker's fetches",
            ["queue"],
            registry=r,
        )
        self._lease_lost = Counter(
            "durq_leases_lost",
            "Acknowledgements or extensions refused because the lease had been taken over",
            ["queue"],
            registry=r,
        )
        self._pickup = Histogram(
            "durq_job_pickup_seconds",
            "Enqueue (or due time) to dequeue, server clock",
            ["queue"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self._run = Histogram(
            "durq_job_run_seconds",
            "Run time of jobs",
            ["queue", "task"],
            buckets=_RUN_BUCKETS,
            registry=r,
        )
        self.in_hand = Gauge("durq_jobs_in_hand", "Jobs this worker holds", registry=r)
        self._children: dict[tuple[str, ...], Any] = {}
        # per queue: [jobs started, pickup seconds summed, runs finished, run seconds summed]
        self._totals: dict[str, list[float]] = {}

    def _totals_of(self, queue: str) -> list[float]:
        totals = self._totals.get(queue)
        if totals is None:
            totals = self._totals[queue] = [0, 0.0, 0, 0.0]
        return totals

    def totals(self) -> dict[str, list[float]]:
        """Running totals per queue since the worker started: ``[started, pickup seconds
        summed, finished, run seconds summed]``; the difference of two readings gives the
        mean pickup latency and run time between them."""
        return {queue: list(values) for queue, values in self._totals.items()}

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (metric._name, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def started(self, queue: str, task: str, pickup: float | None) -> None:
        """A job started; ``pickup`` is its enqueue-to-dequeue delay, if known."""
        self._child(self._started, queue, task).inc()
        if pickup is not None and pickup >= 0:
            self._child(self._pickup, queue).observe(pickup)
            totals = self._totals_of(queue)
            totals[0] += 1
            totals[1] += pickup

    def finished(self, queue: str, task: str, kind: str, seconds: float) -> None:
        """A job finished with outcome ``kind`` after ``seconds``."""
        self._child(self._run, queue, task).observe(seconds)
        if kind not in ("lost", "defer"):  # runs cut short or given back: no run time
            totals = self._totals_of(queue)
            totals[2] += 1
            totals[3] += seconds
        if kind == "done":
            self._child(self._completed, queue, task).inc()
        elif kind == "retry":
            self._child(self._failed, queue, task).inc()
            self._child(self._retried, queue, task).inc()
        elif kind == "dead":
            self._child(self._failed, queue, task).inc()
            self._child(self._dead, queue, task).inc()
        elif kind == "defer":
            self._child(self._deferred, queue, task).inc()

    def reclaimed(self, queue: str, n: int) -> None:
        """This worker's fetch reclaimed ``n`` expired leases."""
        self._child(self._recovered, queue).inc(n)

    def lease_lost(self, queue: str) -> None:
        """An acknowledgement or extension was refused: the lease had been taken over."""
        self._child(self._lease_lost, queue).inc()


def serve_metrics(metrics: WorkerMetrics, port: int, host: str = "0.0.0.0") -> None:
    """Serve ``metrics`` at ``http://host:port/metrics`` from a daemon thread (what
    ``durq worker --metrics-port`` does). Only this worker's registry is exposed, not
    prometheus_client's global one."""
    start_http_server(port, addr=host, registry=metrics.registry)
    log.info("serving worker metrics on http://%s:%d/metrics", host, port)
