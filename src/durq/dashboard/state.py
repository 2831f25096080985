"""Everything one dashboard app holds, kept on ``app.state.durq`` (no module globals, so
several dashboards can live in one process, e.g. mounted for two Redis instances)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import jinja2
from starlette.requests import Request

from durq.connection import redact
from durq.dashboard.config import DashboardConfig
from durq.dashboard.data import DashboardData
from durq.dashboard.history import History
from durq.dashboard.render import environment
from durq.dashboard.sampler import Sampler

__all__ = ["Dashboard", "dashboard_of"]


@dataclass
class Dashboard:
    """The state of one dashboard app."""

    config: DashboardConfig
    data: DashboardData
    history: History
    sampler: Sampler
    templates: jinja2.Environment
    # signs CSRF tokens; random per app, so a restart simply asks for a fresh page
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @classmethod
    def create(cls, config: DashboardConfig) -> Dashboard:
        """Build the state of a dashboard for ``config`` (nothing connects yet)."""
        data = DashboardData(config.url, config.namespace, config.max_queues)
        history = History(config.history)
        return cls(
            config=config,
            data=data,
            history=history,
            sampler=Sampler(data, history, config.sample_interval),
            templates=environment(),
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
