"""``/metrics`` of the dashboard: every queue's sizes and lifetime counters and the live
workers, read from Redis at scrape time, in the Prometheus text format.

These are the queues' own numbers (kept by the Lua scripts, so they count every
producer and worker); the workers' per-task counters and latency histograms come from
each worker's own endpoint (``durq worker --metrics-port``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from durq.dashboard.data import WorkerEntry
from durq.dashboard.durable import ParkedCollector, parked_counts
from durq.dashboard.limits import FlowCollector, flow_infos
from durq.dashboard.schedules import schedule_metrics, schedules_of
from durq.dashboard.state import dashboard_of
from durq.dashboard.workflows import WorkflowCounters, workflow_counters
from durq.models import QueueStats

__all__ = ["COUNTERS", "STATES", "metrics_endpoint", "queue_metrics"]

STATES = ("pending", "delayed", "active", "held", "dead", "retained")
"""The ``state`` label values of ``durq_queue_jobs``."""

COUNTERS: dict[str, str] = {
    "enqueued": "Jobs enqueued (created, not deduplicated)",
    "completed": "Jobs completed",
    "failed": "Job runs that failed (retried or dead-lettered)",
    "retried": "Jobs sent back for a retry",
    "dead_lettered": "Jobs moved to the dead letters",
    "reclaimed": "Jobs recovered from expired leases (their worker died or stalled)",
    "deferred": "Jobs given back without counting an attempt",
    "superseded": "Pending jobs replaced by a newer job with the same key",
    "deduplicated": "Enqueues answered with an existing job (same id or key)",
    "replayed": "Dead letters replayed",
    "purged": "Dead letters purged",
    "dead_evicted": "Dead letters evicted by the dead-letter cap",
    "corrupt": "Unreadable job records quarantined",
    "cancelled": "Jobs cancelled (before they started, or stopped while they ran)",
    "expired": "Jobs not started by their expiry time",
    "ticks_fired": "Ticks of periodic schedules that became a job",
    "ticks_skipped": "Ticks skipped because the previous run had not finished (overlap skip)",
    "ticks_missed": "Ticks not fired after downtime (catch-up policy)",
}
"""Lifetime counters of each queue, exported as ``durq_queue_<name>_total``."""


class _Snapshot(Collector):
    """The metric families of one scrape's readings."""

    def __init__(
        self, stats: Sequence[QueueStats], workers: Sequence[WorkerEntry], total_queues: int
    ) -> None:
        self.stats = stats
        self.workers = workers
        self.total_queues = total_queues

    def collect(self) -> Iterator[Metric]:
        # the per-queue families cover at most max_queues queues; this says how many
        # exist, so an operator sees when some are left out
        queues = GaugeMetricFamily("durq_queues", "Queues in the namespace")
        queues.add_metric([], self.total_queues)
        yield queues
        yield from queue_metrics(self.stats)
        live = GaugeMetricFamily(
            "durq_workers_live", "Live workers (a heartbeat within three intervals)"
        )
        live.add_metric([], len(self.workers))
        yield live
        in_hand = GaugeMetricFamily(
            "durq_workers_jobs_in_hand", "Jobs held by the live workers (fetched or running)"
        )
        in_hand.add_metric([], sum(w.in_hand for w in self.workers))
        yield in_hand
        per_queue = GaugeMetricFamily(
            "durq_queue_workers", "Live workers consuming the queue", labels=["queue"]
        )
        for s in self.stats:
            per_queue.add_metric([s.name], sum(1 for w in self.workers if s.name in w.queues))
        yield per_queue


class _Fixed(Collector):
    """Metric families read beforehand (the schedules')."""

    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self.metrics


def queue_metrics(stats: Sequence[QueueStats]) -> Iterator[Metric]:
    """The metric families of the queues' sizes and counters."""
    jobs = GaugeMetricFamily(
        "durq_queue_jobs", "Jobs in the queue by state", labels=["queue", "state"]
    )
    groups = GaugeMetricFamily(
        "durq_queue_groups", "Named groups with ready jobs", labels=["queue"]
    )
    counters = {
        name: CounterMetricFamily(f"durq_queue_{name}", doc, labels=["queue"])
        for name, doc in COUNTERS.items()
    }
    for s in stats:
        for state in STATES:
            jobs.add_metric([s.name, state], getattr(s, state))
        groups.add_metric([s.name], s.groups)
        for name, family in counters.items():
            family.add_metric([s.name], getattr(s, name))
    yield jobs
    yield groups
    yield from counters.values()


async def metrics_endpoint(request: Request) -> Response:
    """Serve the Prometheus text format (read from Redis at each scrape)."""
    dash = dashboard_of(request)
    names, total = await dash.data.queue_names()
    stats, workers, flows, parked = await asyncio.gather(
        dash.data.stats(names),
        dash.data.workers(),
        workflow_counters(dash, names),
        parked_counts(dash, names),
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot([stats[n] for n in names if n in stats], workers, total))
    registry.register(_Fixed(list(schedule_metrics(await schedules_of(dash)))))
    registry.register(FlowCollector(await flow_infos(dash, [n for n in names if n in stats])))
    registry.register(WorkflowCounters({n: c for n, c in flows.items() if n in stats}))
    registry.register(ParkedCollector({n: p for n, p in parked.items() if n in stats}))
    return Response(
        generate_latest(registry), media_type="text/plain; version=0.0.4; charset=utf-8"
    )
