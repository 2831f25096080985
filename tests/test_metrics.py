"""Prometheus metrics: the worker's endpoint (``durq worker --metrics-port``) and the
dashboard's ``/metrics``, scraped over HTTP and checked against what ran."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import durq
from dashboard.apps import build
from dashboard.support import LiveServer
from durq.dashboard import create_app
from durq.dev.server import RedisServer, free_port
from durq.metrics import WorkerMetrics
from helpers import eventually

TESTS = Path(__file__).parent


def value(text: str, name: str, **labels: str) -> float | None:
    """The value of sample ``name`` with exactly ``labels`` in a scrape, or None."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def scrape(url: str, timeout: float = 2) -> str:
    """The text of a metrics endpoint, or '' while it is not up yet."""
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.TransportError:
        return ""
    return response.text if response.status_code == 200 else ""


def _serves_metrics(url: str) -> bool:
    return "durq_jobs_in_hand" in scrape(url)


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts ``durq worker dashboard.apps:app ARGS`` processes; drained at the end."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(TESTS)}
        with (tmp_path / f"worker-{len(procs)}.log").open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "durq", "worker", "dashboard.apps:app", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_worker_metrics_keep_running_totals_for_the_dashboard() -> None:
    metrics = WorkerMetrics()
    metrics.started("emails", "send", 0.5)
    metrics.started("emails", "send", 1.5)
    metrics.finished("emails", "send", "done", 0.25)
    metrics.finished("emails", "send", "retry", 0.75)
    metrics.finished("emails", "send", "lost", 9.0)  # cut short: no run time
    assert metrics.totals() == {"emails": [2, 2.0, 2, 1.0]}
    totals = metrics.totals()
    totals["emails"][0] = 99  # a copy
    assert metrics.totals()["emails"][0] == 2


def test_worker_endpoint_counts_jobs_by_queue_and_task(
    make_server: Callable[..., RedisServer],
    queue_name: str,
    start_worker: Callable[..., subprocess.Popen[bytes]],
) -> None:
    # a server of its own: the dashboard below reads every queue it holds, and the shared
    # one holds every test's (thousands, by the end of a run: tens of seconds to read)
    redis_url = make_server().url
    port = free_port()
    start_worker(
        "-q", queue_name, "--url", redis_url, "--heartbeat", "0.2",
        "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
    )  # fmt: skip
    app = build(redis_url)
    try:
        echo = app.tasks["echo"].options(queue=queue_name)
        for i in range(5):
            echo.enqueue(f"hello {i}")
        app.tasks["crash"].options(queue=queue_name).enqueue("once")
        url = f"http://127.0.0.1:{port}/metrics"
        labels = {"queue": queue_name}

        def settled() -> bool:
            text = scrape(url)
            return bool(text) and (
                value(text, "durq_jobs_completed_total", **labels, task="echo") == 5
                and value(text, "durq_jobs_dead_lettered_total", **labels, task="crash") == 1
            )

        eventually(settled, 20, what=f"the worker's metrics at {url}")
        text = scrape(url)
        assert value(text, "durq_jobs_started_total", **labels, task="echo") == 5
        assert value(text, "durq_jobs_started_total", **labels, task="crash") == 2
        assert value(text, "durq_jobs_failed_total", **labels, task="crash") == 2
        assert value(text, "durq_jobs_retried_total", **labels, task="crash") == 1
        assert value(text, "durq_job_run_seconds_count", **labels, task="echo") == 5
        assert value(text, "durq_job_pickup_seconds_count", **labels) == 7
        assert value(text, "durq_jobs_in_hand") == 0
        assert "python_gc_objects_collected_total" not in text  # its own registry only

        dashboard = LiveServer(create_app(redis_url, sample_interval=0.2)).start()
        try:
            text = scrape(dashboard.url + "/metrics", timeout=30)
            queues = value(text, "durq_queues")
            assert queues is not None and queues >= 1
            assert value(text, "durq_queue_jobs", **labels, state="dead") == 1
            assert value(text, "durq_queue_jobs", **labels, state="pending") == 0
            assert value(text, "durq_queue_enqueued_total", **labels) == 6
            assert value(text, "durq_queue_completed_total", **labels) == 5
            assert value(text, "durq_queue_failed_total", **labels) == 2
            assert value(text, "durq_queue_retried_total", **labels) == 1
            assert value(text, "durq_queue_dead_lettered_total", **labels) == 1
            assert value(text, "durq_queue_reclaimed_total", **labels) == 0
            assert value(text, "durq_queue_workers", **labels) == 1
            live = value(text, "durq_workers_live")
            assert live is not None and live >= 1
            assert value(text, "durq_workers_jobs_in_hand") is not None
        finally:
            dashboard.stop()
    finally:
        app.close()


def test_dashboard_metrics_cover_max_queues_and_count_them_all(
    make_server: Callable[..., RedisServer],
) -> None:
    server = make_server()
    for name in ("a", "b", "c"):
        with durq.Queue(name, server.url) as queue:
            queue.enqueue("x")
    dashboard = LiveServer(create_app(server.url, sample_interval=0.2, max_queues=2)).start()
    try:
        text = scrape(dashboard.url + "/metrics")
    finally:
        dashboard.stop()
    assert value(text, "durq_queues") == 3
    assert value(text, "durq_queue_jobs", queue="a", state="pending") == 1
    assert value(text, "durq_queue_jobs", queue="b", state="pending") == 1
    assert 'queue="c"' not in text


def test_each_supervised_process_serves_metrics_on_its_own_port(
    redis_url: str, queue_name: str, start_worker: Callable[..., subprocess.Popen[bytes]]
) -> None:
    port = free_port()
    while not _free(port + 1):
        port = free_port()
    start_worker(
        "-q", queue_name, "--url", redis_url, "-p", "2",
        "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
    )  # fmt: skip
    for p in (port, port + 1):
        eventually(functools.partial(_serves_metrics, f"http://127.0.0.1:{p}/metrics"), 20)


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_job_metrics_row_records_what_the_label_calls_do() -> None:
    # the worker records each job through a row kept per (queue, task); a scrape shows
    # the same series and values as with the per-call methods, and no series a job did
    # not touch
    by_row, by_call = WorkerMetrics(), WorkerMetrics()
    row = by_row.job_metrics("emails", "send")
    assert by_row.job_metrics("emails", "send") is row
    row.finished("defer", 0.0)  # given back before it started: no start, no pickup
    by_call.finished("emails", "send", "defer", 0.0)
    for pickup, kind, seconds in [(0.5, "done", 0.25), (None, "retry", 0.75), (2.0, "done", 1)]:
        row.started(pickup)
        row.finished(kind, seconds)
        by_call.started("emails", "send", pickup)
        by_call.finished("emails", "send", kind, seconds)
    assert generate_latest(by_row.registry) == generate_latest(by_call.registry)
    text = generate_latest(by_row.registry).decode()
    assert value(text, "durq_jobs_completed_total", queue="emails", task="send") == 2
    assert value(text, "durq_jobs_retried_total", queue="emails", task="send") == 1
    assert value(text, "durq_jobs_deferred_total", queue="emails", task="send") == 1
    assert value(text, "durq_job_pickup_seconds_count", queue="emails") == 2
    assert value(text, "durq_jobs_cancelled_total", queue="emails", task="send") is None
    assert by_row.totals() == {"emails": [2, 2.5, 3, 2.0]}


def test_a_batchs_items_finished_at_once_count_as_each_finished_alone() -> None:
    at_once, one_by_one = WorkerMetrics(), WorkerMetrics()
    row, each = at_once.job_metrics("events", "store"), one_by_one.job_metrics("events", "store")
    for kind, n in [("done", 100), ("retry", 2), ("lost", 3)]:
        row.finished(kind, 0.125, n)
        for _ in range(n):
            each.finished(kind, 0.125)
    assert generate_latest(at_once.registry) == generate_latest(one_by_one.registry)
    assert at_once.totals() == one_by_one.totals()


def test_a_batchs_items_started_at_once_count_as_each_started_alone() -> None:
    at_once, one_by_one = WorkerMetrics(), WorkerMetrics()
    row, each = at_once.job_metrics("events", "store"), one_by_one.job_metrics("events", "store")
    pickups = [0.0, 0.001, 0.02, 0.5, 3.0, 120.0] * 20
    row.started_many(pickups)
    row.started_many([])
    for pickup in pickups:
        each.started(pickup)
    assert generate_latest(at_once.registry) == generate_latest(one_by_one.registry)
    assert at_once.totals() == one_by_one.totals()


def test_the_worker_endpoint_listens_on_loopback_unless_told_otherwise(
    redis_url: str, queue_name: str, start_worker: Callable[..., subprocess.Popen[bytes]]
) -> None:
    port = free_port()
    proc = start_worker("-q", queue_name, "--url", redis_url, "--metrics-port", str(port))
    eventually(functools.partial(_serves_metrics, f"http://127.0.0.1:{port}/metrics"), 20)
    listening = [
        c.laddr.ip
        for c in psutil.Process(proc.pid).net_connections("inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]
    assert listening == ["127.0.0.1"]
