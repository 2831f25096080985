"""The dashboard mounted inside another ASGI app (what a FastAPI user does): links,
static files, the CSRF cookie and redirects stay under the mount point, and the charts'
sampler starts without the parent running the dashboard's lifespan."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

import durq
from dashboard.support import LiveServer
from durq.dashboard import create_app
from helpers import eventually


def test_mounted_under_a_prefix(redis_url: str, queue_name: str) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        queue.enqueue({"n": 1})
        job = queue.dequeue()
        assert job is not None
        queue.requeue(job, reason="boom", dead=True)

    # the shared server holds every test's queues: list them all, not the first 200
    dashboard = create_app(redis_url, sample_interval=0.1, max_queues=10_000)

    async def home(_request: object) -> PlainTextResponse:
        return PlainTextResponse("the host application")

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        # a parent does not run a mounted app's lifespan: close its connections here
        await dashboard.state.durq.aclose()

    parent = Starlette(
        routes=[Route("/", home), Mount("/ops/durq", app=dashboard)], lifespan=lifespan
    )
    server = LiveServer(parent).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/").text == "the host application"
            overview = client.get("/ops/durq/")
            assert overview.status_code == 200
            assert "path=/ops/durq" in overview.headers["set-cookie"].lower()
            assert 'href="/ops/durq/static/durq.css"' in overview.text
            assert f'href="/ops/durq/queue?q={queue_name}"' in overview.text
            assert client.get("/ops/durq/static/durq.js").status_code == 200

            dead = client.get(f"/ops/durq/queue/dead?q={queue_name}")
            assert 'action="/ops/durq/queue/dead/replay"' in dead.text
            token = re.search(r'name="csrf" value="([^"]+)"', dead.text)
            assert token is not None
            replayed = client.post(
                "/ops/durq/queue/dead/replay",
                data={"q": queue_name, "id": job.id, "csrf": token.group(1)},
            )
            assert replayed.status_code == 303
            assert replayed.headers["location"].startswith("/ops/durq/queue/dead?")

        # no lifespan reached the mounted app: the first request started the sampler
        history = dashboard.state.durq.history
        eventually(lambda: len(history.samples) >= 2, what="samples without a lifespan")
        assert queue_name in history.samples[-1].queues
    finally:
        server.stop()


def test_mounted_behind_the_host_applications_own_auth(redis_url: str, queue_name: str) -> None:
    """A FastAPI app's own login guards everything under the mount (pages, static files,
    metrics, actions); a signed-in user gets the dashboard, CSRF-checked actions work."""
    fastapi = pytest.importorskip("fastapi")
    from durq.contrib.fastapi import dashboard, lifespan

    app = durq.App(redis_url)
    with app.queue(queue_name) as queue:
        queue.enqueue({"n": 1}, id="dead-one")
        job = queue.dequeue()
        assert job is not None
        queue.requeue(job, reason="boom", dead=True)

    sessions = {"s3cret-session": "ada"}

    def signed_in(request: Request) -> bool:  # the host's own rule, not a dashboard token
        return sessions.get(request.cookies.get("session", "")) == "ada"

    host = fastapi.FastAPI(lifespan=lifespan(app))

    @host.post("/login")  # type: ignore[untyped-decorator]  # FastAPI's decorators are untyped
    def login() -> PlainTextResponse:
        response = PlainTextResponse("hello")
        response.set_cookie("session", "s3cret-session")
        return response

    host.mount("/admin/durq", dashboard(app, auth=signed_in, max_queues=10_000))
    server = LiveServer(host).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            for path in ("/admin/durq/", "/admin/durq/static/durq.css", "/admin/durq/metrics"):
                assert client.get(path).status_code == 403, path
            assert client.post("/admin/durq/queue/dead/purge").status_code == 403

            client.post("/login")
            dead = client.get(f"/admin/durq/queue/dead?q={queue_name}")
            assert dead.status_code == 200
            assert 'href="/admin/durq/static/durq.css"' in dead.text
            token = re.search(r'name="csrf" value="([^"]+)"', dead.text)
            assert token is not None
            replayed = client.post(
                "/admin/durq/queue/dead/replay",
                data={"q": queue_name, "id": "dead-one", "csrf": token.group(1)},
            )
            assert replayed.status_code == 303
            assert replayed.headers["location"].startswith("/admin/durq/queue/dead?")
    finally:
        server.stop()
    assert getattr(app.queue(queue_name).job("dead-one"), "state", None) is durq.JobState.PENDING
    app.close()
