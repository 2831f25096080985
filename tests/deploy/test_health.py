"""A worker's health and scaling endpoint (``durq worker --health-port``,
``durq.worker.health``; docs/deployment.md, "Kubernetes")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import durq
from durq.dev.server import RedisServer
from durq.worker.health import suggested_workers
from helpers import eventually
from worker.support import running_worker


def _get(worker: Any, path: str) -> httpx.Response:
    assert worker.health is not None
    return httpx.get(f"http://127.0.0.1:{worker.health.port}{path}", timeout=10)


def _status(worker: Any, path: str) -> int:
    return _get(worker, path).status_code


def test_scale_json_counts_the_leased_jobs_and_never_suggests_zero_workers_while_one_runs(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(redis_url, default_queue=queue_name)
    gate = threading.Event()

    @app.task
    def slow(i: int) -> None:
        gate.wait(20)

    try:
        with running_worker(app, concurrency=3, health_port=0) as worker:
            slow.enqueue_many([(i,) for i in range(5)])
            eventually(lambda: _get(worker, "/scale.json").json()["leased"] == 3, 10)
            doc = _get(worker, "/scale.json").json()
            assert (doc["ready"], doc["leased"], doc["concurrency"]) == (2, 3, 3)
            assert doc["queues"][queue_name]["ready"] == 2
            assert doc["oldest_age"] >= 0 and doc["workers"] >= 2
            metrics = _get(worker, "/metrics").text
            assert f'durq_scale_leased{{queue="{queue_name}"}} 3' in metrics
            gate.set()  # every job runs to its end: nothing left, no worker needed
            eventually(lambda: _get(worker, "/scale.json").json()["leased"] == 0, 10)
            assert _get(worker, "/scale.json").json()["ready"] == 0
            assert _get(worker, "/scale.json").json()["workers"] == 0
    finally:
        gate.set()
        app.close()


def test_the_suggested_worker_count_is_never_zero_while_a_job_is_leased() -> None:
    assert suggested_workers(0, 0, 1, 100, 60.0, 10.0) == 1
    assert suggested_workers(0, 0, 0, 10, 1.0, 10.0) == 0
    # 1000 ready jobs of 2 s each to start within 10 s, 10 per worker: 20 workers
    assert suggested_workers(1000, 0, 0, 10, 2.0, 10.0) == 20
    assert suggested_workers(0, 5, 20, 10, 1.0, 10.0) == 3


def test_readiness_goes_false_during_a_drain_while_liveness_stays_true(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(redis_url, default_queue=queue_name)
    started = threading.Event()

    @app.task
    def busy() -> None:
        started.set()
        time.sleep(1.5)

    try:
        with running_worker(app, health_port=0, grace=5.0) as worker:
            eventually(lambda: _status(worker, "/readyz") == 200, 10)
            assert _status(worker, "/livez") == 200
            busy.enqueue()
            assert started.wait(10)
            worker.stop()  # a drain: the running job gets its grace
            eventually(lambda: _status(worker, "/readyz") == 503, 5)
            assert "draining" in _get(worker, "/readyz").text
            assert _status(worker, "/livez") == 200
    finally:
        app.close()


@pytest.mark.fault
def test_liveness_survives_a_redis_outage_that_readiness_reports(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    server = make_server()
    app = durq.App(server.url, default_queue=queue_name)

    @app.task
    def noop() -> None:
        pass

    try:
        with running_worker(app, health_port=0, heartbeat=0.2, grace=0.5) as worker:
            eventually(lambda: _status(worker, "/readyz") == 200, 10)
            server.pause()
            try:
                eventually(lambda: _status(worker, "/readyz") == 503, 10)
                assert "redis unreachable" in _get(worker, "/readyz").text
                assert _status(worker, "/livez") == 200
            finally:
                server.resume()
            eventually(lambda: _status(worker, "/readyz") == 200, 10)
    finally:
        app.close()
