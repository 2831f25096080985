"""``create_app``: the dashboard as an ASGI app, to run with ``durq dashboard`` or mount
in a FastAPI or Starlette application."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from durq.dashboard import actions, schedules, views, workflows
from durq.dashboard.batches import batches_page
from durq.dashboard.config import DashboardConfig
from durq.dashboard.exposition import metrics_endpoint
from durq.dashboard.limits import flow_page
from durq.dashboard.security import Guard, csrf_secret
from durq.dashboard.state import Dashboard
from durq.errors import CorruptQueue
from durq.redaction import Redact
from durq.transport import connection

__all__ = ["SECRET_ENV", "create_app"]

STATIC = Path(__file__).parent / "static"
SECRET_ENV = "DURQ_DASHBOARD_SECRET"
"""The environment variable ``create_app`` takes its CSRF secret from by default."""


def create_app(
    url: str | None = None,
    *,
    namespace: str = "durq",
    token: str | None = None,
    read_only: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    show_payloads: bool = True,
    sample_interval: float = 5.0,
    history: int = 720,
    max_queues: int = 200,
    refresh: float = 5.0,
    secret: str | bytes | None = None,
    redact: Redact | None = None,
) -> Starlette:
    """The durq dashboard as an ASGI application.

    Mount it in your own app (``app.mount("/durq", create_app(url, token=...))``) or
    serve it with ``durq dashboard``. Its state (Redis client, chart history, CSRF
    secret) lives on ``app.state.durq``; nothing is shared between two apps.

    Args:
        url: Redis URL (default ``$DURQ_URL``, then ``redis://localhost:6379/0``).
        namespace: the key namespace of the queues.
        token: require ``Authorization: Bearer <token>`` or basic auth with this
            password on every request, ``/metrics`` included (8 characters at least).
        read_only: no replay or purge (no buttons; POSTs answered 403).
        allowed_hosts: Host header values to answer (default: any). Restrict it when
            the dashboard has no token, against DNS rebinding.
        show_payloads: show job payloads (False shows only their size).
        sample_interval: seconds between the samples the charts draw.
        history: samples kept in memory (default 720: an hour at 5 s).
        max_queues: queues listed and sampled at most.
        refresh: seconds between live updates of the pages (0: none).
        secret: signs the CSRF tokens of the forms (16 characters at least); default
            ``$DURQ_DASHBOARD_SECRET``, else derived from ``token``, else random per
            app. Every process serving one dashboard (``gunicorn -w N``, replicas
            behind a load balancer) needs the same one, or POSTs that another process
            rendered the form of are refused (403).
        redact: what of task data is secret (``durq.Redact``); payloads, failure
            reasons and progress are shown through it (default ``Redact()``: the
            common secret names).
    """
    config = DashboardConfig(
        url=connection.resolve_url(url),
        namespace=namespace,
        token=token,
        read_only=read_only,
        allowed_hosts=None if allowed_hosts is None else tuple(allowed_hosts),
        show_payloads=show_payloads,
        sample_interval=sample_interval,
        history=history,
        max_queues=max_queues,
        refresh=refresh,
        redact=redact if redact is not None else Redact(),
    )
    if secret is None:
        secret = os.environ.get(SECRET_ENV) or None
    dash = Dashboard.create(config, csrf_secret(secret, token))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        # only when served on its own: a parent app does not run a mounted app's
        # lifespan, so the sampler also starts with the first request
        dash.sampler.ensure_started()
        try:
            yield
        finally:
            await dash.aclose()

    routes = [
        Route("/", views.overview, name="overview"),
        Route("/queue", views.queue_page, name="queue"),
        Route("/queue/job", views.job_page, name="job"),
        Route("/queue/dead", views.dead_page, name="dead"),
        Route("/queue/flow", flow_page, name="flow"),
        Route("/queue/batches", batches_page, name="batches"),
        Route("/queue/dead/replay", actions.replay, methods=["POST"], name="replay"),
        Route("/queue/dead/purge", actions.purge, methods=["POST"], name="purge"),
        Route("/queue/workflows", workflows.workflows_page, name="workflows"),
        Route("/queue/workflow", workflows.workflow_page, name="workflow"),
        Route("/queue/job/cancel", actions.cancel, methods=["POST"], name="cancel"),
        Route(
            "/queue/workflow/cancel",
            actions.cancel_workflow,
            methods=["POST"],
            name="cancel_workflow",
        ),
        Route("/workers", views.workers_page, name="workers"),
        Route("/schedules", schedules.schedules_page, name="schedules"),
        Route("/schedules/action", schedules.schedule_action, methods=["POST"], name="schedule"),
        Route("/api/overview", views.api_overview, name="api_overview"),
        Route("/metrics", metrics_endpoint, name="metrics"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [Middleware(Guard, token=token, allowed_hosts=config.allowed_hosts)]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        # Redis down or refusing: a page that says so, not a bare 500
        exception_handlers={
            RedisError: views.redis_unavailable,
            CorruptQueue: views.corrupt_queue,
        },
    )
    app.state.durq = dash
    return app
