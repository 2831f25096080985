"""Prometheus metrics of a worker, in a registry of its own (no global state).

Values are kept in plain lists and turned into Prometheus metrics when scraped, so
recording a job costs about a microsecond in all. Pickup latency is measured on the Redis
server's clock (the time of the dequeue minus the time of the enqueue), so client clock
skew does not distort it.

Serve the registry with ``durq worker --metrics-port N`` (or
``prometheus_client.start_http_server(N, registry=metrics.registry)``). The worker also
publishes small running totals per queue (``WorkerMetrics.totals``) in its registry
heartbeat, from which the dashboard charts latency and run time without scraping workers.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["JobMetrics", "WorkerMetrics", "serve_metrics"]

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
_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
_RUN_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)


class _Family:
    """A counter or histogram whose values live in plain lists, read at scrape time:
    recording a job costs a few list operations instead of a lock per metric."""

    def __init__(self, name: str, doc: str, labels: tuple[str, ...],
                 buckets: tuple[float, ...] = ()) -> None:  # fmt: skip
        self.name = name
        self.doc = doc
        self.labels = labels
        self.buckets = buckets
        # counters: per label values, a one-element list (a cell a JobMetrics can hold)
        self.values: dict[tuple[str, ...], list[float]] = {}
        # histograms: per label values, counts per bucket (the last one: +Inf) and sum
        self.hist: dict[tuple[str, ...], list[float]] = {}

    def cell(self, key: tuple[str, ...]) -> list[float]:
        """The counter of ``key`` (made at 0: it is then scraped as 0)."""
        cell = self.values.get(key)
        if cell is None:
            cell = self.values[key] = [0.0]
        return cell

    def row(self, key: tuple[str, ...]) -> list[float]:
        """The histogram row of ``key``: a count per bucket, then the sum."""
        row = self.hist.get(key)
        if row is None:
            row = self.hist[key] = [0.0] * (len(self.buckets) + 2)
        return row

    def inc(self, key: tuple[str, ...], n: float = 1) -> None:
        self.cell(key)[0] += n

    def observe(self, key: tuple[str, ...], value: float) -> None:
        _observe(self.row(key), self.buckets, value)

    def collect(self) -> Metric:
        if not self.buckets:
            counter = CounterMetricFamily(self.name, self.doc, labels=self.labels)
            for key, cell in list(self.values.items()):
                counter.add_metric(list(key), cell[0])
            return counter
        histogram = HistogramMetricFamily(self.name, self.doc, labels=self.labels)
        for key, row in list(self.hist.items()):
            cumulative, running = [], 0.0
            for bound, n in zip((*self.buckets, float("inf")), row[:-1], strict=True):
                running += n
                cumulative.append((_le(bound), running))
            histogram.add_metric(list(key), cumulative, sum_value=row[-1])
        return histogram


def _observe(row: list[float], buckets: tuple[float, ...], value: float, n: int = 1) -> None:
    row[bisect_left(buckets, value)] += n
    row[-1] += value * n


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


class _Collector(Collector):
    def __init__(self, families: list[_Family]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        for family in self.families:
            yield family.collect()


class WorkerMetrics:
    """Counters, gauges and histograms of one worker process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        qt, q = ("queue", "task"), ("queue",)
        self._started = _Family("durq_jobs_started", "Jobs started", qt)
        self._completed = _Family("durq_jobs_completed", "Jobs completed", qt)
        self._failed = _Family("durq_jobs_failed", "Job runs that failed (retried or dead)", qt)
        self._retried = _Family("durq_jobs_retried", "Jobs sent back for a retry", qt)
        self._dead = _Family("durq_jobs_dead_lettered", "Jobs dead-lettered", qt)
        self._deferred = _Family("durq_jobs_deferred", "Jobs given back without an attempt", qt)
        self._cancelled = _Family("durq_jobs_cancelled", "Running jobs stopped by a cancel", qt)
        self._recovered = _Family(
            "durq_jobs_recovered", "Expired leases reclaimed by this worker's fetches", q
        )
        self._lease_lost = _Family(
            "durq_leases_lost",
            "Acknowledgements or extensions refused because the lease had been taken over",
            q,
        )
        self._fetch_oom = _Family(
            "durq_fetches_refused_oom",
            "Fetches the server refused because it was at maxmemory (the worker backs off)",
            q,
        )
        self._pickup = _Family(
            "durq_job_pickup_seconds",
            "Enqueue (or due time) to dequeue, server clock",
            q,
            _LATENCY_BUCKETS,
        )
        self._run = _Family("durq_job_run_seconds", "Run time of jobs", qt, _RUN_BUCKETS)
        self._batch = _Family(
            "durq_batch_size",
            "Items per batch of a batch task, by why it started: size (max_size) or wait",
            ("queue", "task", "cause"),
            _BATCH_BUCKETS,
        )
        self.registry.register(
            _Collector(
                [
                    self._started,
                    self._completed,
                    self._failed,
                    self._retried,
                    self._dead,
                    self._deferred,
                    self._cancelled,
                    self._recovered,
                    self._lease_lost,
                    self._fetch_oom,
                    self._pickup,
                    self._run,
                    self._batch,
                ]
            )
        )
        self.in_hand = Gauge("durq_jobs_in_hand", "Jobs this worker holds", registry=self.registry)
        # per queue: [jobs started, pickup seconds summed, runs finished, run seconds summed]
        self._totals: dict[str, list[float]] = {}
        self._rows: dict[tuple[str, str], JobMetrics] = {}

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

    def job_metrics(self, queue: str, task: str) -> JobMetrics:
        """What recording a job of ``task`` on ``queue`` touches, found once and kept:
        the worker records each job through it, without label lookups per job."""
        row = self._rows.get((queue, task))
        if row is None:
            row = self._rows[(queue, task)] = JobMetrics(self, queue, task)
        return row

    def started(self, queue: str, task: str, pickup: float | None) -> None:
        """A job started; ``pickup`` is its enqueue-to-dequeue delay, if known."""
        self.job_metrics(queue, task).started(pickup)

    def finished(self, queue: str, task: str, kind: str, seconds: float) -> None:
        """A job finished with outcome ``kind`` after ``seconds``."""
        self.job_metrics(queue, task).finished(kind, seconds)

    def _finished_otherwise(self, key: tuple[str, str], kind: str) -> None:
        """The counters of an outcome other than done (rare: no cell kept for them)."""
        if kind == "retry":
            self._failed.inc(key)
            self._retried.inc(key)
        elif kind == "dead":
            self._failed.inc(key)
            self._dead.inc(key)
        elif kind in ("defer", "limited"):  # limited: durq.RateLimited
            self._deferred.inc(key)
        elif kind == "cancelled":
            self._cancelled.inc(key)

    def batch(self, queue: str, task: str, size: int, cause: str) -> None:
        """A batch of ``size`` items of a batch task started, for ``cause``."""
        self._batch.observe((queue, task, cause), size)

    def reclaimed(self, queue: str, n: int) -> None:
        """This worker's fetch reclaimed ``n`` expired leases."""
        self._recovered.inc((queue,), n)

    def lease_lost(self, queue: str) -> None:
        """An acknowledgement or extension was refused: the lease had been taken over."""
        self._lease_lost.inc((queue,))

    def fetch_out_of_memory(self, queue: str) -> None:
        """The server, at maxmemory, refused to hand out jobs of ``queue``."""
        self._fetch_oom.inc((queue,))


class JobMetrics:
    """The metrics of one task's jobs on one queue (``WorkerMetrics.job_metrics``): the
    counters and histogram rows a job's start and end change, held directly. Each is
    made when first changed, so a scrape shows the same series as before any job."""

    __slots__ = ("_completed", "_key", "_metrics", "_pickup", "_run", "_started", "_totals")

    def __init__(self, metrics: WorkerMetrics, queue: str, task: str) -> None:
        self._metrics = metrics
        self._key = (queue, task)
        self._started: list[float] | None = None
        self._completed: list[float] | None = None
        self._pickup: list[float] | None = None
        self._run: list[float] | None = None
        self._totals: list[float] | None = None  # the queue's (WorkerMetrics.totals)

    def started(self, pickup: float | None) -> None:
        """A job started; ``pickup`` is its enqueue-to-dequeue delay, if known."""
        cell = self._started
        if cell is None:
            cell = self._started = self._metrics._started.cell(self._key)
        cell[0] += 1
        if pickup is not None and pickup >= 0:
            row = self._pickup
            if row is None:
                row = self._pickup = self._metrics._pickup.row(self._key[:1])
            _observe(row, _LATENCY_BUCKETS, pickup)
            totals = self._totals
            if totals is None:
                totals = self._totals = self._metrics._totals_of(self._key[0])
            totals[0] += 1
            totals[1] += pickup

    def started_many(self, pickups: Sequence[float]) -> None:
        """``started`` of many jobs at once (the items of a batch): ``pickups`` are
        their enqueue-to-dequeue delays, each >= 0."""
        if not pickups:
            return
        cell = self._started
        if cell is None:
            cell = self._started = self._metrics._started.cell(self._key)
        cell[0] += len(pickups)
        row = self._pickup
        if row is None:
            row = self._pickup = self._metrics._pickup.row(self._key[:1])
        for pickup in pickups:
            row[bisect_left(_LATENCY_BUCKETS, pickup)] += 1
        total = sum(pickups)
        row[-1] += total
        totals = self._totals
        if totals is None:
            totals = self._totals = self._metrics._totals_of(self._key[0])
        totals[0] += len(pickups)
        totals[1] += total

    def finished(self, kind: str, seconds: float, n: int = 1) -> None:
        """A job finished with outcome ``kind`` after ``seconds`` (``n``: so many jobs
        did, e.g. the items of a batch)."""
        row = self._run
        if row is None:
            row = self._run = self._metrics._run.row(self._key)
        _observe(row, _RUN_BUCKETS, seconds, n)
        if kind not in ("lost", "defer", "limited"):  # cut short or given back: no run time
            totals = self._totals
            if totals is None:
                totals = self._totals = self._metrics._totals_of(self._key[0])
            totals[2] += n
            totals[3] += seconds * n
        if kind == "done":
            cell = self._completed
            if cell is None:
                cell = self._completed = self._metrics._completed.cell(self._key)
            cell[0] += n
        else:
            for _ in range(n):
                self._metrics._finished_otherwise(self._key, kind)


def serve_metrics(metrics: WorkerMetrics, port: int, host: str = "127.0.0.1") -> None:
    """Serve ``metrics`` at ``http://host:port/metrics`` from a daemon thread (what
    ``durq worker --metrics-port`` does), on loopback unless ``host`` says otherwise:
    the endpoint has no authentication. Only this worker's registry is exposed, not
    prometheus_client's global one."""
    start_http_server(port, addr=host, registry=metrics.registry)
    log.info("serving worker metrics on http://%s:%d/metrics", host, port)
