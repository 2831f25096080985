"""The workflow pages (a home queue's running workflows; one workflow: its steps, their
states, where it waits) and the workflow counters of ``/metrics``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import replace

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from durq.dashboard.params import error_page, id_or_error, queue_or_error
from durq.dashboard.state import Dashboard, dashboard_of, render

__all__ = ["WorkflowCounters", "workflow_counters", "workflow_page", "workflows_page"]

MAX_STEPS_SHOWN = 500
MAX_RUNNING_SHOWN = 200


async def workflows_page(request: Request) -> Response:
    """The running workflows whose home is a queue, oldest first, its counters, and
    the backlog of its outbox (deliveries to workflows and steps in other slots that no
    worker of this queue has made yet)."""
    dash = dashboard_of(request)
    name = await queue_or_error(request, dash)
    if isinstance(name, Response):
        return name
    queue = dash.data.queue(name)
    running, counts, outbox = await asyncio.gather(
        queue.running_workflows(MAX_RUNNING_SHOWN),
        queue.workflow_counters(),
        queue.outbox_stats(),
    )
    return render(
        request,
        dash,
        "workflows.html",
        {"name": name, "running": running, "counts": counts, "outbox": outbox},
    )


async def workflow_page(request: Request) -> Response:
    """One workflow: state, error, each step's state, and where it waits."""
    dash = dashboard_of(request)
    name = await queue_or_error(request, dash)
    if isinstance(name, Response):
        return name
    workflow_id = id_or_error(request, dash, "workflow")
    if isinstance(workflow_id, Response):
        return workflow_id
    queue = dash.data.queue(name)
    info = await queue.workflow(workflow_id)
    if info is None:
        return error_page(request, dash, 404, f"Queue {name} has no workflow {workflow_id}.")
    # where it waits: the open groups, their members still open, and dead steps
    members = {s.node: s for s in info.steps}
    redact = dash.config.redact
    error = redact.value(info.error) if info.error else info.error
    dead = {node: redact.value(reason) for node, reason in info.dead.items()}
    info = replace(info, error=error, dead=dead)
    return render(
        request,
        dash,
        "workflow.html",
        {
            "name": name,
            "wf": info,
            "steps": info.steps[:MAX_STEPS_SHOWN],
            "hidden": max(len(info.steps) - MAX_STEPS_SHOWN, 0),
            "counts": sorted(info.counts.items()),
            "dead": [(members.get(n), reason) for n, reason in sorted(info.dead.items())],
            "done": _CANCEL_SAID.get(request.query_params.get("done", "")),
            "cancellable": info.state == "running",
        },
    )


# what the cancel that redirected to a workflow's page did (actions.cancel_workflow), in
# fixed wording: the query string carries only a word
_CANCEL_SAID = {
    "cancelled": "Cancelled: its steps that did not start never will, its running ones "
    "are being stopped, and its callback does not run.",
    "finished": "The workflow had ended already: nothing changed.",
}


async def workflow_counters(dash: Dashboard, names: Sequence[str]) -> dict[str, dict[str, int]]:
    """The workflow counters of each queue (as a home), read concurrently; a queue whose
    keys something else overwrote is left out, as from the other metrics."""

    found = await dash.data.each(names, lambda name: dash.data.queue(name).workflow_counters())
    return {
        name: counts
        for name, counts in zip(names, found, strict=True)
        if not isinstance(counts, Exception)
    }


class WorkflowCounters(Collector):
    """``durq_workflows_{started,completed,failed,cancelled}_total{queue}``, by home queue."""

    def __init__(self, counts: dict[str, dict[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        docs = {
            "started": "Workflows started (by home queue)",
            "completed": "Workflows that completed",
            "failed": "Workflows that failed (a step dead-lettered, policy fail)",
            "cancelled": "Workflows cancelled (WorkflowHandle.cancel, durq workflow cancel)",
            "steps_cancelled": "Unstarted workflow steps cancelled because their workflow failed",
        }
        for kind, doc in docs.items():
            family = CounterMetricFamily(f"durq_workflows_{kind}", doc, labels=["queue"])
            for queue, counts in self.counts.items():
                family.add_metric([queue], counts.get(kind, 0))
            yield family
