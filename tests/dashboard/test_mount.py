"""The dashboard mounted inside another ASGI app (what a FastAPI user does): links,
static files, the CSRF cookie and redirects stay under the mount point, and the charts'
sampler starts without the parent running the dashboard's lifespan."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
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
