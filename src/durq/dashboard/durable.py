"""Durable steps on the dashboard (docs/durable.md): a job's steps, sleeps and waits for
its page, and ``durq_queue_parked{queue,reason}`` for ``/metrics`` (jobs asleep and
waiting for a signal, read from each queue at scrape time)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from durq.dashboard.state import Dashboard
from durq.errors import DurqError
from durq.models import Parked, StoredStep

__all__ = ["ParkedCollector", "job_steps", "parked_counts"]


async def job_steps(dash: Dashboard, name: str, job_id: str) -> list[StoredStep]:
    """What job ``job_id`` of queue ``name`` stored, oldest first (none when its keys
    cannot be read: the rest of its page still shows)."""
    try:
        return await dash.data.queue(name).steps(job_id)
    except DurqError:
        return []


async def parked_counts(dash: Dashboard, names: Sequence[str]) -> dict[str, Parked]:
    """The parked jobs of each queue, read through the dashboard's gate (``each``); a
    queue whose keys something else overwrote is left out, as from the other metrics."""
    found = await dash.data.each(names, lambda name: dash.data.queue(name).parked())
    return {
        name: parked
        for name, parked in zip(names, found, strict=True)
        if not isinstance(parked, Exception)
    }


class ParkedCollector(Collector):
    """``durq_queue_parked{queue,reason}``: jobs parked by a durable ``sleep`` or a
    ``wait`` for a signal (they hold no worker; they count among the delayed jobs)."""

    def __init__(self, counts: dict[str, Parked]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "durq_queue_parked",
            "Jobs parked by durable steps, by reason (sleep, wait); counted among delayed",
            labels=["queue", "reason"],
        )
        for queue, parked in self.counts.items():
            family.add_metric([queue, "sleep"], parked.asleep)
            family.add_metric([queue, "wait"], parked.waiting)
        yield family
