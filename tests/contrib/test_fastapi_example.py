"""The FastAPI example (examples/fastapi_app): enqueue from an endpoint, a real worker
runs the job, the result comes back through the API, the dashboard answers staff only,
and no connection to Redis is left open after shutdown."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import pytest

from contrib.connections import redis_connections
from helpers import eventually
from worker.support import running_worker

pytest.importorskip("fastapi")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.fastapi_app import main, tasks

from contrib.test_fastapi import served


def test_the_example_app(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHBOARD_PASSWORD", "correct horse")
    monkeypatch.setattr(tasks.app, "url", redis_url)
    monkeypatch.setattr(tasks.app, "namespace", f"example-{secrets.token_hex(4)}")
    before = redis_connections(redis_url)

    with served(main.create_api(tasks.app)) as client:
        job_id = client.post("/signup", json={"email": "ada@example.com"}).json()["job_id"]
        assert client.get(f"/jobs/{job_id}").json() == {"state": "pending", "result": None}
        assert client.get("/stats").json() == {"emails": 1}

        with running_worker(tasks.app, queues=["emails"]):
            done = eventually(
                lambda: client.get(f"/jobs/{job_id}").json()["result"], what="the job's result"
            )
        assert done == "welcome mail sent to ada@example.com"
        assert client.get("/stats").json() == {"emails": 0}
        assert client.get("/jobs/nope").status_code == 404

        assert client.get("/ops/durq/").status_code == 401
        assert client.get("/ops/durq/", auth=("staff", "wrong")).status_code == 401
        page = client.get("/ops/durq/", auth=("staff", "correct horse"))
        assert page.status_code == 200 and "emails" in page.text
        assert redis_connections(redis_url) - before

    assert not redis_connections(redis_url) - before
