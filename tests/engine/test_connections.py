"""Connections that a server restart closed are replaced without an error reaching the
caller, when they sat idle long enough for durq to check them before reuse."""

from __future__ import annotations

import time
from collections.abc import Callable

from durq import Queue
from durq.server import RedisServer


def test_a_queue_idle_across_a_server_restart_carries_on(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    server = make_server()
    with Queue(queue_name, server.url) as queue:
        queue.enqueue("before")
        server.restart()  # no persistence: the job is gone, the queue's socket too
        time.sleep(1.2)  # longer than durq keeps a connection without checking it
        assert queue.stats().pending == 0
        queue.enqueue("after")
        assert queue.dequeue().payload == "after"
