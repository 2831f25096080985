"""durq in a FastAPI (or plain Starlette) application.

    from fastapi import Depends, FastAPI
    from durq.contrib.fastapi import dashboard, get_queue, lifespan

    api = FastAPI(lifespan=lifespan(durq_app))        # opens durq's clients, closes them
    api.mount("/ops/durq", dashboard(durq_app, auth=staff_only))

    @api.post("/signup")
    async def signup(email: str, queue: AsyncQueue = Depends(get_queue)) -> dict: ...

Only Starlette is needed (FastAPI is built on it): the dependencies take a Starlette
``Request``, which FastAPI hands to them, and a Starlette app uses them as plain
functions. The lifespan is the place for setup and teardown: ``on_event`` handlers are
deprecated, and ignored once an app has a lifespan.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from durq import App, AsyncQueue, InvalidArgument

__all__ = [
    "ProtectedDashboard",
    "close_dashboards",
    "dashboard",
    "get_app",
    "get_queue",
    "lifespan",
    "open_durq",
    "queue",
]

Auth = Callable[[Request], Any | Awaitable[Any]]


@contextlib.asynccontextmanager
async def open_durq(app: App, *, check: bool = True) -> AsyncIterator[App]:
    """Open ``app``'s clients for the life of the block and close both pools after.

    For an application that has a lifespan of its own:
    ``async with open_durq(durq_app): yield {...}``. With ``check`` (the default) the
    server is pinged first, so a wrong URL or password stops the start-up with a clear
    error instead of failing the first request.
    """
    try:
        if check:
            with contextlib.suppress(InvalidArgument):  # a sharded default queue
                await app.aqueue(app.default_queue).client.ping()
        yield app
    finally:
        await app.aclose()


def lifespan(
    app: App, *, check: bool = True
) -> Callable[[Any], contextlib.AbstractAsyncContextManager[dict[str, Any]]]:
    """A lifespan for ``FastAPI(lifespan=...)`` or ``Starlette(lifespan=...)``.

    On start-up it opens ``app``'s clients (see ``open_durq``) and puts ``app`` in the
    lifespan state, where ``get_app`` and ``get_queue`` find it. On shutdown it closes
    the dashboards mounted at the top level of the web app (a parent does not run a
    mounted app's lifespan) and then ``app``'s pools, so no connection outlives it.
    """

    @contextlib.asynccontextmanager
    async def run(web_app: Any) -> AsyncIterator[dict[str, Any]]:
        async with open_durq(app, check=check):
            try:
                yield {"durq": app}
            finally:
                await close_dashboards(web_app)

    return run


async def close_dashboards(web_app: Any) -> None:
    """Stop the sampler and close the connections of each dashboard mounted directly in
    ``web_app`` (``dashboard(...)`` or ``durq.dashboard.create_app(...)``)."""
    for route in getattr(web_app, "routes", ()):
        if isinstance(route, Mount):
            state = getattr(getattr(route.app, "state", None), "durq", None)
            if state is not None and callable(getattr(state, "aclose", None)):
                await state.aclose()


def get_app(request: Request) -> App:
    """Dependency: the durq App of the running application (``Depends(get_app)``)."""
    app = getattr(request.state, "durq", None)
    if not isinstance(app, App):
        raise RuntimeError(
            "no durq App in the lifespan state: create the application with "
            "lifespan=durq.contrib.fastapi.lifespan(durq_app)"
        )
    return app


def get_queue(request: Request) -> AsyncQueue:
    """Dependency: the App's default queue as an AsyncQueue (``Depends(get_queue)``)."""
    app = get_app(request)
    return app.aqueue(app.default_queue)


def queue(name: str) -> Callable[[Request], AsyncQueue]:
    """A dependency handing out the AsyncQueue ``name``: ``Depends(queue("emails"))``."""

    def dependency(request: Request) -> AsyncQueue:
        return get_app(request).aqueue(name)

    return dependency


class ProtectedDashboard:
    """The dashboard behind the host application's own check of who may see it.

    ``auth(request)`` (sync or async) runs before every request of the dashboard: a
    false result answers 403; raising ``HTTPException`` (FastAPI's or Starlette's)
    answers with its status, detail and headers (e.g. 401 with ``WWW-Authenticate``).
    """

    def __init__(self, app: Any, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    @property
    def state(self) -> Any:
        """The dashboard's own state (what the lifespan closes)."""
        return self.app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = await self._refusal(Request(scope, receive))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _refusal(self, request: Request) -> ASGIApp | None:
        try:
            allowed = self.auth(request)
            if inspect.isawaitable(allowed):
                allowed = await allowed
        except HTTPException as exc:
            return PlainTextResponse(str(exc.detail), exc.status_code, headers=exc.headers)
        return None if allowed else PlainTextResponse("Forbidden", 403)


def dashboard(app: App, *, auth: Auth | None = None, **options: Any) -> Any:
    """durq's dashboard for ``app``'s Redis and namespace, to ``mount`` in the web app.

    Args:
        auth: the host application's check (see ``ProtectedDashboard``); without it the
            dashboard is as open as the path it is mounted on.
        options: further ``durq.dashboard.create_app`` options (``read_only``,
            ``token``, ``allowed_hosts``, ``show_payloads``...); ``redact`` defaults to
            the app's.
    """
    from durq.dashboard import create_app  # needs jinja2: durq[dashboard]

    options.setdefault("redact", app.redact)
    inner = create_app(app.url, namespace=app.namespace, **options)
    return inner if auth is None else ProtectedDashboard(inner, auth)
