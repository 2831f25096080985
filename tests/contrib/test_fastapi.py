"""durq.contrib.fastapi in a plain Starlette app: the lifespan opens and closes durq's
clients, the dependencies find the App, and the dashboard sits behind the host's auth."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

import durq
from contrib.connections import redis_connections
from dashboard.support import LiveServer
from durq.contrib.fastapi import dashboard, get_app, get_queue, lifespan, open_durq, queue
from durq.dev.server import free_port


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    app = durq.App(redis_url, default_queue=queue_name)
    yield app
    app.close()


def _web_app(app: durq.App, **options: Any) -> Starlette:
    async def enqueue(request: Request) -> JSONResponse:
        result = await get_queue(request).enqueue({"n": 1})
        other = queue("other-" + app.default_queue)(request)
        return JSONResponse({"id": result.id, "same_app": get_app(request) is app,
                             "other": other.name})  # fmt: skip

    return Starlette(routes=[Route("/enqueue", enqueue, methods=["POST"])],
                     lifespan=lifespan(app, **options))  # fmt: skip


@contextlib.contextmanager
def served(web_app: Starlette) -> Iterator[httpx.Client]:
    """``web_app`` served by uvicorn (lifespan included) and a client for it."""
    server = LiveServer(web_app).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            yield client
    finally:
        server.stop()


def test_the_lifespan_opens_and_closes_durqs_clients(app: durq.App, redis_url: str) -> None:
    before = redis_connections(redis_url)
    with served(_web_app(app)) as client:
        body = client.post("/enqueue").json()
        assert body["same_app"] is True
        assert body["other"] == "other-" + app.default_queue
        assert redis_connections(redis_url) - before  # the App's pool is open
    assert not redis_connections(redis_url) - before  # and closed at shutdown
    assert app.queue(app.default_queue).job(body["id"]) is not None


async def test_a_server_that_cannot_be_reached_stops_the_start_up() -> None:
    app = durq.App(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(RedisConnectionError):
        async with open_durq(app):
            pass
    async with open_durq(app, check=False):  # without the check, the first use fails
        pass


def test_the_dependencies_need_the_lifespan() -> None:
    with pytest.raises(RuntimeError, match=r"lifespan=durq.contrib.fastapi.lifespan\("):
        get_app(Request({"type": "http", "state": {}}))


def test_the_dashboard_behind_the_hosts_own_auth(app: durq.App, redis_url: str) -> None:
    def staff_only(request: Request) -> bool:
        if "authorization" not in request.headers:
            raise HTTPException(401, "who are you?", {"WWW-Authenticate": "Bearer"})
        return request.headers["authorization"] == "Bearer staff"

    async def async_staff_only(request: Request) -> bool:
        return request.cookies.get("role") == "staff"

    before = redis_connections(redis_url)
    web_app = Starlette(
        routes=[
            Mount("/ops/durq", dashboard(app, auth=staff_only, sample_interval=0.1)),
            Mount("/ops2", dashboard(app, auth=async_staff_only, read_only=True)),
        ],
        lifespan=lifespan(app),
    )
    with served(web_app) as client:
        refused = client.get("/ops/durq/")
        assert (refused.status_code, refused.text) == (401, "who are you?")
        assert refused.headers["www-authenticate"] == "Bearer"
        assert client.get("/ops/durq/", headers={"authorization": "Bearer nope"}).status_code == 403
        page = client.get("/ops/durq/", headers={"authorization": "Bearer staff"})
        assert page.status_code == 200
        assert 'href="/ops/durq/static/durq.css"' in page.text
        assert client.get("/ops2/").status_code == 403
        client.cookies.set("role", "staff")
        assert client.get("/ops2/").status_code == 200
    assert not redis_connections(redis_url) - before  # the dashboards' clients too


def test_the_dashboard_shows_jobs_through_the_apps_redact(redis_url: str) -> None:
    import asyncio

    app = durq.App(redis_url, redact=durq.Redact(keys=("iban",)))
    own = durq.Redact(defaults=False)
    for mounted, expected in ((dashboard(app), app.redact), (dashboard(app, redact=own), own)):
        assert mounted.state.durq.config.redact is expected
        asyncio.run(mounted.state.durq.aclose())
    app.close()
