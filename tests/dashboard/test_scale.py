"""The dashboard stays fast with a million jobs queued in ten thousand groups: every
page reads bounded slices (counters, the top of the groups index, a page of dead
letters), never a whole queue."""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import httpx
import pytest

import durq
from dashboard.support import LiveServer
from durq.dev.server import RedisServer
from durq.models import Message

JOBS = 1_000_000
GROUPS = 10_000
PER_GROUP = 20  # 200,000 jobs in groups, the rest in the default group
DEAD = 2_000
BATCH = 1_000
BUDGET = 0.5  # seconds a page may take at most (they take milliseconds)


def _fill_range(url: str, start: int, stop: int) -> None:
    """Enqueue jobs ``start..stop`` (run in a child process: the client's encoding, not
    the server, bounds the loading speed, so two processes load twice as fast)."""
    grouped = GROUPS * PER_GROUP
    with durq.Queue("big", url) as queue:
        for first in range(start, stop, BATCH):
            queue.enqueue_many(
                [
                    Message(b"%d" % i, group=f"tenant-{i % GROUPS:05d}" if i < grouped else None)
                    for i in range(first, min(first + BATCH, stop))
                ]
            )


def _fill(queue: durq.Queue, url: str) -> None:
    half = JOBS // 2
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        for done in [
            pool.submit(_fill_range, url, 0, half),
            pool.submit(_fill_range, url, half, JOBS),
        ]:
            done.result()
    for _ in range(DEAD // BATCH):
        jobs = queue.dequeue_many(BATCH)
        queue.requeue_many(jobs, reason={"message": "poison"}, dead=True)


def _time(client: httpx.Client, path: str) -> tuple[float, httpx.Response]:
    times = []
    response = None
    for _ in range(3):
        began = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - began)
        assert response.status_code == 200, path
    assert response is not None
    return statistics.median(times), response


@pytest.mark.slow
def test_pages_stay_fast_with_a_million_jobs_in_ten_thousand_groups(
    make_server: Callable[..., RedisServer], serve: Callable[..., LiveServer]
) -> None:
    server = make_server()
    with durq.Queue("big", server.url) as queue:
        began = time.monotonic()
        _fill(queue, server.url)
        filled_in = time.monotonic() - began
        stats = queue.stats()
        dead = queue.dead_letters(1)[0].id
        pending = queue.dequeue_many(1)  # a job in hand: its page shows a lease
        assert pending
    assert stats.pending + stats.active == JOBS - DEAD
    assert stats.dead == DEAD
    assert stats.groups == GROUPS

    dash = serve(server.url)
    pages = [
        "/",
        "/queue?q=big",
        "/queue?q=big&groups=100",
        "/queue?q=big&group=tenant-04242",
        "/queue/dead?q=big&limit=100",
        f"/queue/dead?q=big&offset={DEAD - 100}&limit=100",
        f"/queue/job?q=big&id={dead}",
        f"/queue/job?q=big&id={pending[0].id}",
        "/workers",
        "/api/overview",
        "/metrics",
    ]
    timings = {}
    with httpx.Client(base_url=dash.url, timeout=30) as client:
        for path in pages:
            timings[path], response = _time(client, path)
            if path == "/queue?q=big":
                assert f"{GROUPS:,}" in response.text
                assert response.text.count("tenant-") >= 20
    print(f"filled in {filled_in:.1f} s", {p: round(t * 1000, 1) for p, t in timings.items()})
    slow = {path: f"{t * 1000:.0f} ms" for path, t in timings.items() if t > BUDGET}
    assert not slow, (
        f"pages over {BUDGET} s with {JOBS:,} jobs (filled in {filled_in:.0f} s): {slow}"
    )


MANY_QUEUES = 600


def test_a_scrape_of_many_queues_takes_a_bounded_number_of_connections(
    make_server: Callable[..., RedisServer], serve: Callable[..., LiveServer]
) -> None:
    """Every per-queue read of the dashboard (stats, schedules, limits, workflow
    counters, parked jobs, the sampler's) goes through one gate: a scrape of 600 queues while the
    sampler runs flat out neither opens a connection per queue nor waits on the pool
    (which answered "No connection available" and a 500 page before)."""
    server = make_server()
    app = durq.App(server.url)

    @app.task
    def touch() -> None:
        """Only its jobs matter: one per queue."""

    for i in range(MANY_QUEUES):
        touch.options(queue=f"q{i:04d}").enqueue()
    app.close()
    dash = serve(server.url, sample_interval=0.05, max_queues=10_000)
    with httpx.Client(base_url=dash.url, timeout=120) as client:
        for _ in range(2):
            response = client.get("/metrics")
            assert response.status_code == 200
            assert f'durq_queue_jobs{{queue="q{MANY_QUEUES - 1:04d}",state="pending"}} 1.0' in (
                response.text
            )
    with server._client() as raw:
        clients = int(raw.info("clients")["connected_clients"])
    assert clients <= 40, f"{clients} connections for a scrape of {MANY_QUEUES} queues"
