"""The README's "no polling" and docs/workflows.md's idle couriers: an idle worker, with
its queue's workflow outbox to deliver too, blocks on wake markers and sends a handful
of commands per wait (the promise -> test table is in docs/guarantees.md)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

import durq
from durq.dev.server import RedisServer
from helpers import eventually
from worker.support import running_worker

#: what a worker's loops send (commandstats also counts the commands scripts call)
_SENT = ("fcall", "fcall_ro", "evalsha", "eval", "bzpopmin", "blpop", "brpop")


def _calls(client: redis.Redis) -> int:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in _SENT)


def test_an_idle_worker_and_its_outbox_courier_do_not_poll(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    url = make_server().url  # its own server: commandstats counts every client
    app = durq.App(url, default_queue=queue_name)

    @app.task
    def noop() -> None: ...

    client = redis.Redis.from_url(url)
    try:
        with running_worker(app, queues=[queue_name], heartbeat=30):
            noop.enqueue()
            eventually(lambda: app.queue(queue_name).stats().completed == 1, 5, "the job")
            time.sleep(0.3)  # settled: every loop blocks
            before = _calls(client)
            seconds = 2.0
            time.sleep(seconds)
            sent = _calls(client) - before
    finally:
        client.close()
        app.close()
    # the fetch loop and the courier each block up to 5 s, then look again: a blocking
    # wait and a script call per wait each (4 here); polling would be hundreds
    assert sent <= 8, f"{sent} commands in {seconds} s"
