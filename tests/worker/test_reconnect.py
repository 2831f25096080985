"""A worker rides out a Redis restart: it reconnects by itself, and nothing the server
acknowledged before the restart is lost."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from durq.dev.server import RedisServer
from helpers import eventually
from worker.apps import build
from worker.support import Durq, ExecLog

pytestmark = [pytest.mark.fault, pytest.mark.slow]


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_worker_resumes_by_itself_after_redis_restarts_and_nothing_acknowledged_is_lost(
    how: str,
    make_server: Callable[..., RedisServer],
    exec_log: ExecLog,
    queue_name: str,
    durq_cli: Durq,
) -> None:
    # appendfsync always: whatever the server acknowledged is on disk when it is killed
    server = make_server(appendonly=True, appendfsync="always")
    app = build(server.url, default_queue=queue_name)
    queue = app.queue(queue_name)
    work = app.tasks["work"]
    worker = durq_cli.worker(server.url, queue_name, args=("--lease", "2", "-c", "4"))
    worker.expect_output("consuming", 15)

    work.enqueue_many([(str(exec_log), f"before-{i}") for i in range(5)])
    eventually(lambda: queue.stats().completed == 5, 10, durq_cli.outputs)
    # acknowledged by the server but not due yet when it goes down
    work.enqueue_many(
        [work.call(str(exec_log), f"delayed-{i}").with_options(delay=1.5) for i in range(3)]
    )
    # running when it goes down: its acknowledgement has to wait for the restart
    work.enqueue(str(exec_log), "across", 1.0)
    eventually(lambda: exec_log.count("start", "across") == 1, 10, durq_cli.outputs)

    if how == "kill":
        server.kill()
    else:
        server.stop()
    time.sleep(2)  # down for a while: the worker retries meanwhile
    server.start()
    restarted = time.monotonic()

    work.enqueue(str(exec_log), "canary")
    eventually(lambda: exec_log.count("finish", "canary") == 1, 10, durq_cli.outputs)
    assert time.monotonic() - restarted < 10
    eventually(lambda: queue.stats().size == 0, 15, durq_cli.outputs)
    assert worker.alive()

    finished = exec_log.keys("finish")
    # completed before the restart: not run again
    for i in range(5):
        assert finished.count(f"before-{i}") == 1
    # enqueued before the restart: run once each
    for i in range(3):
        assert finished.count(f"delayed-{i}") == 1
    # at least once: its release may have been refused after its lease ran out
    assert finished.count("across") >= 1
    assert queue.stats().dead == 0
    assert "working again" in worker.output()
    app.close()
