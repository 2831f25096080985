"""Everything one dashboard app holds, kept on ``app.state.durq`` (no module globals, so
several dashboards can live in one process, e.g. mounted for two Redis instances), and
rendering a page with it."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from durq.dashboard.config import DashboardConfig
from durq.dashboard.data import DashboardData
from durq.dashboard.history import History
from durq.dashboard.render import environment, url_builder
from durq.dashboard.sampler import Sampler
from durq.dashboard.security import CSRF_COOKIE, csrf_ok, new_csrf_token
from durq.transport.connection import redact

__all__ = ["Dashboard", "dashboard_of", "render"]


@dataclass
class Dashboard:
    """The state of one dashboard app."""

    config: DashboardConfig
    data: DashboardData
    history: History
    sampler: Sampler
    templates: jinja2.Environment
    # signs CSRF tokens (security.csrf_secret): random per app unless given
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @classmethod
    def create(cls, config: DashboardConfig, secret: bytes | None = None) -> Dashboard:
        """Build the state of a dashboard for ``config`` (nothing connects yet);
        ``secret`` signs its CSRF tokens (random when None)."""
        data = DashboardData(config.url, config.namespace, config.max_queues)
        history = History(config.history)
        return cls(
            config=config,
            data=data,
            history=history,
            sampler=Sampler(data, history, config.sample_interval),
            templates=environment(),
            secret=secret if secret is not None else secrets.token_bytes(32),
        )

    @property
    def display_url(self) -> str:
        """The Redis URL without its password, the only form pages and logs show."""
        return redact(self.config.url)

    async def aclose(self) -> None:
        """Stop sampling and close the connections."""
        await self.sampler.aclose()
        await self.data.aclose()


def dashboard_of(request: Request) -> Dashboard:
    """The dashboard serving ``request``, its sampler running."""
    dash: Dashboard = request.app.state.durq
    dash.sampler.ensure_started()
    return dash


def render(
    request: Request, dash: Dashboard, name: str, context: dict[str, Any], status: int = 200
) -> HTMLResponse:
    """Render template ``name``; sets a CSRF cookie when the browser has no valid one."""
    root = str(request.scope.get("root_path", "")).rstrip("/")
    token = request.cookies.get(CSRF_COOKIE)
    fresh = not csrf_ok(dash.secret, token, token)
    if fresh:
        token = new_csrf_token(dash.secret)
    page = dash.templates.get_template(name).render(
        root=root,
        url=url_builder(root),
        config=dash.config,
        redis=dash.display_url,
        csrf_token=token,
        can_act=not dash.config.read_only,
        now=time.time(),
        path=request.url.path,
        **context,
    )
    response = HTMLResponse(page, status_code=status)
    if fresh and token is not None:
        response.set_cookie(
            CSRF_COOKIE,
            token,
            path=root or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
    return response
