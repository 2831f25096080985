"""A worker or a producer whose Redis is away says so: the worker waits, saying where
and why, and starts working as soon as Redis answers; an enqueue gives up after
``enqueue_retry_for`` with durq's RedisUnavailable, which names the address."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

import durq
from durq.dev.server import RedisServer, free_port
from helpers import eventually
from worker.apps import build
from worker.support import Durq, ExecLog

pytestmark = [pytest.mark.fault]


@pytest.mark.parametrize("processes", [1, 2])
def test_a_worker_started_before_redis_waits_saying_where_and_works_once_redis_answers(
    processes: int, exec_log: ExecLog, queue_name: str, durq_cli: Durq
) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}"
    worker = durq_cli.worker(url, queue_name, args=("-p", str(processes)))
    waiting = f"waiting for Redis at {url} (attempt 2, next in 1 s): Error 111"
    eventually(lambda: worker.output().count(waiting) == processes, 20, durq_cli.outputs)
    children = {p.pid for p in worker.children()}
    with RedisServer(port=port) as _server:
        app = build(url, default_queue=queue_name)
        try:
            app.tasks["work"].enqueue(str(exec_log), "after-the-wait")
            eventually(lambda: exec_log.keys("finish") == ["after-the-wait"], 30, durq_cli.outputs)
        finally:
            app.close()
        output = worker.output()
        assert f"Redis at {url} answers" in output
        # no crash, no restart of a -p child, no traceback chained to a missing uvloop
        assert "Traceback" not in output and "uvloop" not in output
        assert {p.pid for p in worker.children()} == children


def test_an_enqueue_with_redis_away_raises_redis_unavailable_after_enqueue_retry_for() -> None:
    url = f"redis://127.0.0.1:{free_port()}"
    app = durq.App(url, enqueue_retry_for=1.0)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    began = time.monotonic()
    with pytest.raises(durq.RedisUnavailable) as raised:
        add.enqueue(1, 2)
    took = time.monotonic() - began
    assert 0.5 <= took < 8.0  # up to 1 s of retries, plus one connect attempt when busy
    message = str(raised.value)
    assert "Redis did not answer for 1 s" in message and url.removeprefix("redis://") in message
    assert "check that the server runs" in message
    assert isinstance(raised.value, redis.exceptions.ConnectionError)  # old handlers hold

    async def async_enqueue() -> None:
        await add.aenqueue(1, 2)

    with pytest.raises(durq.RedisUnavailable):
        asyncio.run(async_enqueue())
    app.close()
