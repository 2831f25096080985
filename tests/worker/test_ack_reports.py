"""What a worker does and says about acknowledgements it could not confirm: it counts
those a cut connection left without a reply, does not call a job lost with Redis's data
"most likely applied" (issue 31, item 8), and does not send again those that were
answered in a round trip whose fetch failed."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable

import pytest
import redis

import durq
from durq.dev.server import RedisServer
from faults.proxy import ChaosProxy
from helpers import eventually
from worker.support import request_stop, running_worker

pytestmark = [pytest.mark.fault, pytest.mark.slow]

JOBS = 10


def _app(url: str, queue: str, gate: threading.Event) -> durq.App:
    app = durq.App(url, default_queue=queue)

    @app.task()
    async def held(i: int) -> int:
        while not gate.is_set():
            await asyncio.sleep(0.02)
        return i

    return app


def test_a_drain_that_cannot_send_counts_the_acknowledgements_sent_without_a_reply(
    make_server: Callable[..., RedisServer], queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_server()
    proxy = ChaosProxy(server.host, server.port).start()
    gate = threading.Event()
    app = _app(proxy.url, queue_name, gate)
    queue = durq.Queue(queue_name, server.url)
    caplog.set_level(logging.INFO, logger="durq.worker")
    try:
        app.tasks["held"].enqueue_many([(i,) for i in range(JOBS)])
        with running_worker(app, queues=[queue_name], concurrency=JOBS, lease=60) as worker:
            eventually(lambda: queue.stats().active == JOBS, 10)
            proxy.blackhole(60)  # the acknowledgements' round trip gets no reply
            gate.set()
            eventually(lambda: worker.processed == JOBS, 10)
            request_stop(worker)
            found = eventually(lambda: re.search(r"could not send (\d+) acknowledgements, and "
                                                 r"(\d+) more were sent without a reply",
                                                 caplog.text), 30)  # fmt: skip
            proxy.heal()  # the worker can unregister and stop
        assert int(found.group(1)) + int(found.group(2)) == JOBS, found.group(0)
    finally:
        proxy.close()
        queue.close()
        app.close()


def test_after_an_empty_restart_a_resent_acknowledgement_is_not_called_most_likely_applied(
    make_server: Callable[..., RedisServer], queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_server()  # no persistence: a restart comes back empty
    gate = threading.Event()
    app = _app(server.url, queue_name, gate)
    queue = durq.Queue(queue_name, server.url)
    caplog.set_level(logging.INFO, logger="durq.worker")
    try:
        app.tasks["held"].enqueue_many([(i,) for i in range(2)])
        with running_worker(app, queues=[queue_name], concurrency=2, lease=60) as worker:
            eventually(lambda: queue.stats().active == 2, 10)
            server.kill()
            gate.set()  # the releases fail: no reply, so maybe applied; sent again later
            eventually(lambda: worker.processed == 2, 10)
            server.start()
            eventually(lambda: "no longer in Redis" in caplog.text, 20, lambda: caplog.text)
        assert "most likely applied" not in caplog.text
        assert "Redis lost the job" in caplog.text
    finally:
        queue.close()
        app.close()


def test_acknowledgements_answered_in_a_round_trip_whose_fetch_failed_are_not_sent_again(
    make_server: Callable[..., RedisServer], queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A fetch that fails (here a key of the wrong type: the dequeue refuses to run)
    says nothing about the acknowledgements answered in its round trip: they were
    applied. Sent again, they were refused and logged as repeats of a lost reply."""
    server = make_server()
    gate = threading.Event()
    app = _app(server.url, queue_name, gate)
    queue = durq.Queue(queue_name, server.url)
    admin = redis.Redis.from_url(server.url)
    caplog.set_level(logging.INFO, logger="durq.worker")
    try:
        app.tasks["held"].enqueue_many([(i,) for i in range(3)])
        with running_worker(app, queues=[queue_name], concurrency=3, lease=60) as worker:
            eventually(lambda: queue.stats().active == 3, 10)
            admin.set(queue.keys.prefix + "rr", "not a list")  # every dequeue now fails
            gate.set()
            eventually(lambda: worker.processed == 3, 10)
            eventually(lambda: "holds a string where durq keeps a list" in caplog.text, 10)
            # (stats reads the damaged key too: the leases, read directly, are gone)
            active = queue.keys.prefix + "active"
            eventually(lambda: admin.zcard(active) == 0, 10, lambda: caplog.text)
            admin.delete(queue.keys.prefix + "rr")
        assert "sent again" not in caplog.text
    finally:
        admin.close()
        queue.close()
        app.close()
