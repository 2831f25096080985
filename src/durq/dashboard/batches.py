"""Batch tasks on the dashboard (``durq.Batch``): the ``/queue/batches`` page, a queue's
recent batches (their sizes and why each started), read from the queue's history."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from durq.dashboard.params import queue_or_error
from durq.dashboard.state import dashboard_of, render

__all__ = ["batches_page"]


async def batches_page(request: Request) -> Response:
    """One queue's recent batches, newest first: when, how many items, and the cause
    (``size``: it reached max_size; ``wait``: max_wait ran out)."""
    dash = dashboard_of(request)
    name = await queue_or_error(request, dash)
    if isinstance(name, Response):
        return name
    recent = await dash.data.queue(name).batches()
    sizes = [b.size for b in recent]
    summary = {
        "batches": len(recent),
        "mean": sum(sizes) / len(sizes) if sizes else 0.0,
        "largest": max(sizes, default=0),
        "by_size": sum(1 for b in recent if b.cause == "size"),
        "by_wait": sum(1 for b in recent if b.cause == "wait"),
    }
    context = {"name": name, "recent": recent, "summary": summary}
    return render(request, dash, "batches.html", context)
