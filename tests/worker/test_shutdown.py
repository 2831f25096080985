"""SIGTERM drains a worker: running jobs finish within the grace period or are given
back (a defer, which does not count an attempt), unstarted jobs are given back at once,
a second signal stops at once, and nothing is lost."""

from __future__ import annotations

import signal
import threading
import time

import pytest

import durq
from durq.models import JobState
from durq.worker.runner import WorkerState
from helpers import eventually
from worker.support import Durq, ExecLog, request_stop, running_worker

pytestmark = [pytest.mark.fault]


def _finish_the_rest(durq_cli: Durq, redis_url: str, queue_name: str) -> None:
    """Run a second worker until the queue is drained."""
    second = durq_cli.worker(redis_url, queue_name, args=("--burst",))
    assert second.wait(20) == 0, second.output()


@pytest.mark.slow
def test_sigterm_lets_running_jobs_finish_and_gives_back_prefetched_jobs_at_once(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    queue = app.queue(queue_name)
    worker = durq_cli.worker(
        redis_url, queue_name, args=("-c", "2", "--prefetch", "2", "--grace", "10")
    )
    worker.expect_output("consuming", 15)
    # 2 run, 2 wait in the worker's hand, 2 stay in the queue
    app.tasks["work"].enqueue_many([(str(exec_log), f"job-{i}", 2.0) for i in range(4)])
    eventually(lambda: exec_log.count("start") == 2 and queue.stats().active == 4, 10)
    app.tasks["work"].enqueue_many([(str(exec_log), f"job-{i}", 0.0) for i in range(4, 6)])

    worker.send(signal.SIGTERM)
    eventually(lambda: queue.stats().pending == 4, 1.5, "the prefetched jobs to be given back")
    assert exec_log.count("finish") == 0, "given back before the running jobs finished"
    assert worker.wait(10) == 0
    assert "draining" in worker.output()
    assert sorted(exec_log.keys("finish")) == sorted(exec_log.keys("start"))
    assert len(exec_log.keys("finish")) == 2
    stats = queue.stats()
    assert (stats.completed, stats.deferred, stats.pending, stats.active) == (2, 2, 4, 0)

    _finish_the_rest(durq_cli, redis_url, queue_name)
    assert sorted(exec_log.keys("finish")) == [f"job-{i}" for i in range(6)]
    # given back without counting an attempt: every job ran once, as its first attempt
    assert sorted(exec_log.keys("start")) == [f"job-{i}" for i in range(6)]
    assert {e["attempt"] for e in exec_log.events("start")} == {1}


@pytest.mark.parametrize("task", ["stalls_first", "astalls_first"], ids=["sync", "async"])
def test_sigterm_gives_back_jobs_still_running_when_the_grace_period_ends(
    task: str, app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    worker = durq_cli.worker(redis_url, queue_name, args=("--grace", "0.5"))
    handle = app.tasks[task].enqueue(str(exec_log), "long", 30.0)
    eventually(lambda: exec_log.count("start") == 1, 15, durq_cli.outputs)

    sent = time.monotonic()
    worker.send(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert time.monotonic() - sent < 5.0
    assert "gave back 1 unfinished jobs" in worker.output()
    if task == "astalls_first":  # a coroutine is cancelled; a thread cannot be
        assert exec_log.count("cancelled") == 1
    assert exec_log.count("finish") == 0
    info = handle.info()
    assert info is not None
    assert (info.state, info.attempts) == (JobState.PENDING, 0)

    _finish_the_rest(durq_cli, redis_url, queue_name)
    assert [(e["key"], e["attempt"]) for e in exec_log.events("finish")] == [("long", 1)]


def test_a_second_sigterm_stops_the_worker_at_once_and_gives_back_its_jobs(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    worker = durq_cli.worker(redis_url, queue_name, args=("--grace", "60"))
    handle = app.tasks["stalls_first"].enqueue(str(exec_log), "long", 60.0)
    eventually(lambda: exec_log.count("start") == 1, 15, durq_cli.outputs)

    worker.send(signal.SIGTERM)
    worker.expect_output("draining")
    assert worker.alive(), "the first SIGTERM must wait for the running job"
    sent = time.monotonic()
    worker.send(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert time.monotonic() - sent < 3.0
    assert "stopping now" in worker.output()
    info = handle.info()
    assert info is not None
    assert (info.state, info.attempts) == (JobState.PENDING, 0)

    _finish_the_rest(durq_cli, redis_url, queue_name)
    assert [(e["key"], e["attempt"]) for e in exec_log.events("finish")] == [("long", 1)]


def test_sigint_drains_like_sigterm(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    worker = durq_cli.worker(redis_url, queue_name, args=("--grace", "10"))
    app.tasks["work"].enqueue(str(exec_log), "short", 0.5)
    eventually(lambda: exec_log.count("start") == 1, 15, durq_cli.outputs)
    worker.send(signal.SIGINT)
    assert worker.wait(10) == 0
    assert [e["pid"] for e in exec_log.events("finish")] == [worker.pid]
    assert app.queue(queue_name).stats().completed == 1


def test_an_idle_worker_stops_at_once_though_another_consumer_blocked_before_it(
    app: durq.App, queue_name: str
) -> None:
    # a stopping worker ends its own blocked wait through its own marker: the queue's
    # wake marker would wake the consumer blocked first (here a plain dequeue), and the
    # worker would wait for its idle wait's end (minutes)
    queue = app.queue(queue_name)
    other = threading.Thread(target=lambda: queue.dequeue(wait=4), daemon=True)
    other.start()
    time.sleep(0.3)  # blocked first: Redis serves blocked clients in order
    with running_worker(app, queues=[queue_name], heartbeat=0.2) as worker:
        time.sleep(1.0)  # idle: blocked behind the other consumer
        started = time.monotonic()
        request_stop(worker)
        eventually(lambda: worker.state is WorkerState.STOPPED, 10, "the worker to stop")
        assert time.monotonic() - started < 3.0
    other.join(10)
