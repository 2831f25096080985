"""The schedules page: every periodic job of the namespace with its next and last tick,
last outcome and counts; pause, resume and trigger (POST, CSRF-checked, refused in
read-only mode); and the schedules' Prometheus metrics."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from durq._async.queue import AsyncQueue
from durq.dashboard.actions import _form
from durq.dashboard.render import url_builder
from durq.dashboard.security import CSRF_COOKIE, CSRF_FIELD, csrf_ok, origin_ok
from durq.dashboard.state import Dashboard, dashboard_of, render
from durq.errors import CorruptQueue, InvalidArgument
from durq.keys import check_queue_name, split_shard
from durq.models import ScheduleInfo

__all__ = ["schedule_action", "schedule_metrics", "schedules_of", "schedules_page"]

log = logging.getLogger("durq.dashboard")
MAX_SCHEDULES = 1000  # per queue, on the page and in the metrics
ACTIONS = {"pause": "paused", "resume": "resumed", "trigger": "triggered"}


def _queue(dash: Dashboard, name: str, shards: int = 0) -> AsyncQueue:
    """The queue, or the shard (``name~i``) of a sharded queue, that holds schedules."""
    base, index = split_shard(name)
    if index is None:
        return dash.data.queue(name)
    check_queue_name(base)
    if not index < shards:
        raise InvalidArgument(f"{name!r} is not a shard of a sharded queue")
    return AsyncQueue(name, client=dash.data.client, namespace=dash.config.namespace,
                      shard_count=shards)  # fmt: skip


async def _shard_counts(dash: Dashboard) -> dict[str, int]:
    return await dash.data.shard_counts()


async def schedules_of(dash: Dashboard) -> list[ScheduleInfo]:
    """The schedules of every queue (every shard of a sharded queue), read a bounded
    number of queues at a time. A queue that cannot be read (keys of another type, an
    odd name) is left out and logged, so the others stay visible."""
    names, _total = await dash.data.queue_names()
    shards = await _shard_counts(dash)
    counts = {
        queue: shards.get(name, 0)
        for name in names
        for queue in ([f"{name}~{i}" for i in range(shards[name])] if shards.get(name) else [name])
    }

    async def one(queue: str) -> list[ScheduleInfo]:
        return (await _queue(dash, queue, counts[queue]).schedules_page(0, MAX_SCHEDULES))[1]

    found: list[ScheduleInfo] = []
    for queue, result in zip(counts, await dash.data.each(list(counts), one), strict=True):
        if isinstance(result, (CorruptQueue, InvalidArgument)):
            log.warning("schedules of queue %s left out: %s", queue, result)
        elif isinstance(result, Exception):
            raise result
        else:
            found.extend(result)
    return found


async def schedules_page(request: Request) -> Response:
    """Every schedule: timing, state, next tick, last tick and outcome, counts."""
    dash = dashboard_of(request)
    items = await schedules_of(dash)
    verb = request.query_params.get("done") or ""
    done = None  # fixed wording: the query string only names the verb and the schedule
    if verb in ACTIONS.values():
        done = f"{verb.capitalize()} {request.query_params.get('s', '')}."
    return render(request, dash, "schedules.html", {"schedules": items, "done": done})


async def schedule_action(request: Request) -> Response:
    """Pause, resume or trigger one schedule (form fields ``q``, ``s``, ``action``)."""
    dash = dashboard_of(request)
    if dash.config.read_only:
        return PlainTextResponse("this dashboard is read-only", status_code=403)
    if not origin_ok(request.headers):
        return PlainTextResponse("cross-site request refused", status_code=403)
    form = await _form(request)
    if isinstance(form, Response):
        return form
    if not csrf_ok(
        dash.secret, request.cookies.get(CSRF_COOKIE), (form.get(CSRF_FIELD) or [""])[0]
    ):
        return PlainTextResponse(
            "missing or invalid CSRF token: reload the page and try again", status_code=403
        )
    queue, name, action = ((form.get(k) or [""])[0] for k in ("q", "s", "action"))
    counts = await _shard_counts(dash)
    try:
        q = _queue(dash, queue, counts.get(split_shard(queue)[0], 0))
        if action not in ACTIONS or not name or len(name) > 128:
            raise InvalidArgument("unknown action or schedule")
    except InvalidArgument as exc:
        return PlainTextResponse(f"bad request: {exc}", status_code=400)
    if await q.control_schedule(action, name) is None:
        return PlainTextResponse(f"no schedule {name!r} in {queue!r}", status_code=404)
    root = str(request.scope.get("root_path", "")).rstrip("/")
    return RedirectResponse(url_builder(root)("/schedules", done=ACTIONS[action], s=name), 303)


def schedule_metrics(items: Sequence[ScheduleInfo]) -> Iterator[Metric]:
    """Ticks fired, skipped (overlap) and missed (catch-up) per schedule, and whether
    each is active."""
    ticks = CounterMetricFamily(
        "durq_schedule_ticks", "Ticks of periodic schedules by outcome",
        labels=["queue", "schedule", "outcome"],
    )  # fmt: skip
    active = GaugeMetricFamily(
        "durq_schedule_active", "1 when the schedule fires ticks (not paused or ended)",
        labels=["queue", "schedule"],
    )  # fmt: skip
    for s in items:
        for outcome in ("fired", "skipped", "missed"):
            ticks.add_metric([s.queue, s.name, outcome], getattr(s, outcome))
        active.add_metric([s.queue, s.name], 1 if s.state == "active" else 0)
    yield ticks
    yield active
