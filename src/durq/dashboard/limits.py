"""Flow control on the dashboard: the ``/queue/flow`` page (a queue's limits, current
rate, pauses, parked groups) and the flow gauges of ``/metrics``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from durq.dashboard.params import corrupt_page, queue_or_error
from durq.dashboard.state import Dashboard, dashboard_of, render
from durq.errors import CorruptQueue
from durq.limits import FlowInfo

__all__ = ["FlowCollector", "flow_infos", "flow_page"]

MAX_PARKED_SHOWN = 100


async def flow_infos(dash: Dashboard, names: Sequence[str], parked: int = 1) -> list[FlowInfo]:
    """The flow state of each queue (a queue whose keys are damaged is left out)."""
    found = await dash.data.each(names, lambda name: dash.data.queue(name).limits(parked))
    for result in found:
        if isinstance(result, Exception) and not isinstance(result, CorruptQueue):
            raise result
    return [info for info in found if not isinstance(info, Exception)]


async def flow_page(request: Request) -> Response:
    """One queue's flow control: limits, the current rate, pauses, parked groups."""
    dash = dashboard_of(request)
    name = await queue_or_error(request, dash)
    if isinstance(name, Response):
        return name
    infos = await flow_infos(dash, [name], MAX_PARKED_SHOWN)
    if not infos:
        return corrupt_page(request, dash, name)
    return render(request, dash, "limits.html", {"name": name, "f": infos[0], "live": True})


class FlowCollector(Collector):
    """The flow gauges of the queues read at one scrape (``durq_queue_*``)."""

    def __init__(self, infos: Sequence[FlowInfo]) -> None:
        self.infos = infos

    def collect(self) -> Iterator[Metric]:
        q = ["queue"]
        rate = GaugeMetricFamily(
            "durq_queue_rate_limit",
            "Configured job starts per second (scope: queue, or group for the default "
            "rate of named groups)",
            labels=["queue", "scope"],
        )
        cap = GaugeMetricFamily("durq_queue_max_active", "Configured max_active", labels=q)
        started = GaugeMetricFamily(
            "durq_queue_started_per_second",
            "Jobs started in the last full second (counted while flow control is on)",
            labels=q,
        )
        paused = GaugeMetricFamily(
            "durq_queue_paused_seconds",
            "Seconds until the queue's own rate or pause lets the next job start",
            labels=q,
        )
        parked = GaugeMetricFamily(
            "durq_queue_parked_groups", "Groups waiting for their rate or a pause", labels=q
        )
        waiting = GaugeMetricFamily(
            "durq_queue_waiting_for_limit", "Ready jobs held back by a limit", labels=q
        )
        limited = CounterMetricFamily(
            "durq_queue_rate_limited", "Jobs given back by durq.RateLimited", labels=q
        )
        for info in self.infos:
            if info.rate:
                rate.add_metric([info.name, "queue"], info.rate.per_second)
            if info.group_rate:
                rate.add_metric([info.name, "group"], info.group_rate.per_second)
            if info.max_active:
                cap.add_metric([info.name], info.max_active)
            started.add_metric([info.name], info.started)
            until = info.paused_until
            paused.add_metric([info.name], max(until - info.server_time, 0) if until else 0)
            parked.add_metric([info.name], info.parked)
            waiting.add_metric([info.name], info.waiting)
            limited.add_metric([info.name], info.rate_limited)
        yield from (rate, cap, started, paused, parked, waiting, limited)
