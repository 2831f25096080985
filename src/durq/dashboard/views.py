"""The pages: overview, queue, job, dead letters, workers. Read-only handlers; the
actions are in ``durq.dashboard.actions``.

Queue names and job ids travel in query parameters (``/queue?q=emails``), not in the
path: both may contain ``/``.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from durq.dashboard.charts import Chart, format_count, format_rate, format_seconds, line_chart
from durq.dashboard.data import WorkerEntry, WorkerJob
from durq.dashboard.durable import job_steps
from durq.dashboard.history import History, Recent
from durq.dashboard.jobview import finished_view, job_numbers, payload_view, reason_fields
from durq.dashboard.params import corrupt_page, error_page, id_or_error, queue_or_error
from durq.dashboard.state import Dashboard, dashboard_of, render
from durq.errors import InvalidArgument
from durq.keys import check_group
from durq.models import JobState, QueueStats
from durq.payloads import finished_record

__all__ = [
    "api_overview",
    "dead_page",
    "job_page",
    "overview",
    "queue_page",
    "redis_unavailable",
    "workers_page",
]

DEAD_PAGE_SIZES = (20, 50, 100)
MAX_GROUPS_SHOWN = 100


@dataclass(frozen=True)
class QueueRow:
    """A line of the queues table."""

    name: str
    stats: QueueStats
    recent: Recent
    workers: int


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(request.query_params.get(name, default))
    except ValueError:
        return default
    return min(max(value, low), high)


def _charts(history: History, queue: str | None) -> list[Chart]:
    return [
        line_chart("Throughput", history.throughput(queue), format_rate),
        line_chart("Latency (means)", history.latency(queue), format_seconds),
        line_chart("Jobs", history.depth(queue), format_count),
    ]


def _consumers(workers: list[WorkerEntry], queue: str) -> list[WorkerEntry]:
    return [w for w in workers if queue in w.queues]


async def redis_unavailable(request: Request, exc: Exception) -> Response:
    """The page shown when Redis does not answer (the sampler keeps trying)."""
    dash: Dashboard = request.app.state.durq
    message = f"Redis at {dash.display_url} did not answer ({type(exc).__name__}). Retrying."
    return error_page(request, dash, 503, message)


async def corrupt_queue(request: Request, exc: Exception) -> Response:
    """The page shown when a queue's keys hold what durq did not write."""
    return error_page(request, request.app.state.durq, 500, f"{exc}.")


async def overview(request: Request) -> Response:
    """Every queue's sizes and recent activity, charts of all queues, live workers."""
    dash = dashboard_of(request)
    names, total = await dash.data.queue_names()
    stats, workers = await asyncio.gather(dash.data.stats(names), dash.data.workers())
    rows = [
        QueueRow(n, stats[n], dash.history.recent(n), len(_consumers(workers, n)))
        for n in names
        if n in stats  # not a corrupt one
    ]
    return render(
        request,
        dash,
        "overview.html",
        {
            "rows": rows,
            "total_queues": total,
            "workers": workers,
            "charts": _charts(dash.history, None),
            "recent": dash.history.recent(None),
            "live": True,
        },
    )


async def queue_page(request: Request) -> Response:
    """One queue: sizes, counters, charts, its largest groups, its workers."""
    dash = dashboard_of(request)
    name = await queue_or_error(request, dash)
    if isinstance(name, Response):
        return name
    limit = _int_param(request, "groups", 20, 1, MAX_GROUPS_SHOWN)
    wanted = request.query_params.get("group", "").strip()
    lookup = None
    if wanted:
        try:
            check_group(wanted)
            lookup = (await dash.data.groups(name, 1, [wanted]))[1][0]
        except InvalidArgument:
            lookup = None
    stats, (group_total, groups), workers = await asyncio.gather(
        dash.data.stats([name]), dash.data.groups(name, limit), dash.data.workers()
    )
    if name not in stats:
        return corrupt_page(request, dash, name)
    consumers = _consumers(workers, name)
    held: list[tuple[WorkerEntry, WorkerJob]] = [
        (w, j) for w in consumers for j in w.jobs if j.queue == name
    ]
    return render(
        request,
        dash,
        "queue.html",
        {
            "name": name,
            "s": stats[name],
            "groups": groups,
            "group_total": group_total,
            "group_limit": limit,
            "max_ready": max((g.ready for g in groups), default=0),
            "wanted": wanted,
            "lookup": lookup,
            "consumers": consumers,
            "held": held,
            "charts": _charts(dash.history, name),
            "recent": dash.history.recent(name),
            "live": True,
        },
    )


async def job_page(request: Request) -> Response:
    """One job: state, attempts, times, reason with traceback, payload, its group, its
    durable steps."""
    dash = dashboard_of(request)
    name = await queue_or_error(request, dash)
    if isinstance(name, Response):
        return name
    job_id = id_or_error(request, dash, "job")
    if isinstance(job_id, Response):
        return job_id
    info, workers, stats, steps = await asyncio.gather(
        dash.data.job(name, job_id),
        dash.data.workers(),
        dash.data.stats([name]),
        job_steps(dash, name, job_id),
    )
    redact = dash.config.redact
    finished = None
    if info is None or (info.state is JobState.COMPLETED and info.data is None):
        # a completed job's record is gone (a tombstone at most): its stored result
        # keeps the job's summary, for result_ttl
        raw = await dash.data.stored_result(name, job_id)
        if raw is not None:
            info = finished_record(job_id, raw)
            finished = finished_view(raw, dash.config.show_payloads, redact)
    if info is None:
        return error_page(request, dash, 404, f"Queue {name} has no trace of job {job_id}.")
    info = redact.job(info)  # its reason and progress; the payload below
    if name not in stats:
        return corrupt_page(request, dash, name)
    group = None
    if info.group is not None:
        group = (await dash.data.groups(name, 1, [info.group]))[1][0]
    holders = [w for w in workers for j in w.jobs if j.queue == name and j.id == job_id]
    return render(
        request,
        dash,
        "job.html",
        {
            "name": name,
            "job": info,
            "reason": reason_fields(info) if info.reason else None,
            "payload": payload_view(info, dash.config.show_payloads, redact),
            "numbers": job_numbers(info, stats[name].server_time),
            "finished": finished,
            "group": group,
            "holders": holders,
            "steps": steps,
            "done": _CANCEL_SAID.get(request.query_params.get("done", "")),
            "cancellable": info.state.value in ("pending", "delayed", "active")
            and not info.cancel_requested,
        },
    )


# what the cancel that redirected to a job's page did (actions.cancel), in fixed wording
_CANCEL_SAID = {
    "cancelled": "Cancelled: the job will not run.",
    "cancelling": "Cancel requested: its worker is stopping the job; it ends cancelled.",
    "finished": "The job had ended already: nothing changed.",
    "not_found": "The queue has no trace of this job.",
}


async def dead_page(request: Request) -> Response:
    """A page of a queue's dead letters, newest first, with replay and purge."""
    dash = dashboard_of(request)
    name = await queue_or_error(request, dash)
    if isinstance(name, Response):
        return name
    limit = _int_param(request, "limit", 50, 1, max(DEAD_PAGE_SIZES))
    offset = _int_param(request, "offset", 0, 0, 10**12)
    total, items = await dash.data.dead_letters(name, offset, limit)
    redact, show = dash.config.redact, dash.config.show_payloads
    shown = [redact.job(info) for info in items]
    rows = [(info, reason_fields(info), payload_view(info, show, redact)) for info in shown]
    return render(
        request,
        dash,
        "dead.html",
        {
            "name": name,
            "rows": rows,
            "total": total,
            "offset": offset,
            "limit": limit,
            "sizes": DEAD_PAGE_SIZES,
            "done": _done_message(request),
        },
    )


def _done_message(request: Request) -> str | None:
    """The result of the action that redirected here, from fixed wording: the query
    string only carries a verb and a count."""
    verb = request.query_params.get("done")
    if verb not in ("replayed", "purged"):
        return None
    try:
        count = int(request.query_params.get("n", "0"))
    except ValueError:
        return None
    return f"{verb.capitalize()} {count} job{'s' if count != 1 else ''}."


async def workers_page(request: Request) -> Response:
    """Every live worker and the jobs in its hands."""
    dash = dashboard_of(request)
    workers = await dash.data.workers()
    return render(request, dash, "workers.html", {"workers": workers, "live": True})


async def api_overview(request: Request) -> Response:
    """The overview as JSON: each queue's sizes, counters and recent rates."""
    dash = dashboard_of(request)
    names, total = await dash.data.queue_names()
    stats, workers = await asyncio.gather(dash.data.stats(names), dash.data.workers())
    queues: list[dict[str, Any]] = []
    for n in names:
        if n not in stats:
            continue  # a corrupt queue: see the log, and `durq doctor`
        recent = dash.history.recent(n)
        queues.append(
            {
                **asdict(stats[n]),
                "completed_per_second": recent.completed_rate,
                "failed_per_second": recent.failed_rate,
                "mean_wait_seconds": recent.pickup,
                "mean_run_seconds": recent.run,
            }
        )
    return JSONResponse({"queues": queues, "total_queues": total, "workers": len(workers)})
