"""The process pool in ``durq worker --pool process`` processes: no child outlives a
SIGKILLed worker, and a SIGTERM drains the pool as it drains threads."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

import durq
from helpers import eventually
from worker import pool_app
from worker.support import Durq, ExecLog, running

pytestmark = [pytest.mark.fault, pytest.mark.slow]

POOL_APP = "worker.pool_app:app"


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    """The process pool's test App (worker.pool_app) on the shared server."""
    test_app = pool_app.build(redis_url, default_queue=queue_name)
    yield test_app
    test_app.close()


def _pool_worker(durq_cli: Durq, url: str, queue: str, *args: str) -> Any:
    argv = ["worker", POOL_APP, "--url", url, "--heartbeat", "0.2", "-q", queue]
    return durq_cli.start(*argv, "--pool", "process", *args, url=url)


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if running(psutil.Process(pid)):
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def test_no_child_outlives_a_sigkilled_worker_and_its_jobs_complete_after_a_restart(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    first = _pool_worker(durq_cli, redis_url, queue_name, "-c", "2", "--lease", "1")
    app.tasks["work"].enqueue_many([(str(exec_log), f"k{i}", 1.0) for i in range(4)])
    eventually(lambda: exec_log.count("start") == 2, 15, durq_cli.outputs)
    # the template and its two children, each job's process one of them
    family = [p.pid for p in first.children()]
    assert len(family) == 3, family
    assert {e["pid"] for e in exec_log.events("start")} <= set(family)

    first.send(signal.SIGKILL)
    assert first.wait(5) == -signal.SIGKILL
    killed = time.monotonic()
    eventually(lambda: not _alive(family), 2.0, lambda: f"still alive: {_alive(family)}")
    gone_after = time.monotonic() - killed

    _pool_worker(durq_cli, redis_url, queue_name, "-c", "2", "--lease", "1")
    eventually(lambda: len(set(exec_log.keys("finish"))) == 4, 20, durq_cli.outputs)
    queue = app.queue(queue_name)
    eventually(lambda: queue.stats().completed == 4, 5, "the acknowledgements")
    stats = queue.stats()
    assert (stats.size, stats.dead, stats.completed) == (0, 0, 4)
    assert stats.reclaimed == 2  # the two that ran when the worker died
    assert gone_after < 2.0


def test_sigterm_lets_running_children_finish_and_gives_unstarted_jobs_back_unspent(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    worker = _pool_worker(durq_cli, redis_url, queue_name, "-c", "2", "--grace", "10")
    handles = app.tasks["work"].enqueue_many([(str(exec_log), f"k{i}", 1.0) for i in range(5)])
    eventually(lambda: exec_log.count("start") == 2, 15, durq_cli.outputs)
    family = [p.pid for p in worker.children()]

    worker.send(signal.SIGTERM)
    assert worker.wait(15) == 0, worker.output()
    assert exec_log.count("finish") == 2  # the running ones finished within --grace
    assert exec_log.count("start") == 2  # and nothing else started
    assert not _alive(family)
    stats = app.queue(queue_name).stats()
    assert (stats.completed, stats.pending, stats.failed, stats.dead) == (2, 3, 0, 0)
    # unstarted jobs went back with no attempt counted
    started = {e["job"] for e in exec_log.events("start")}
    infos = [app.queue(queue_name).job(h.id) for h in handles if h.id not in started]
    assert [info.attempts if info else None for info in infos] == [0, 0, 0]


def test_sigterm_past_the_grace_kills_the_running_child_and_its_job_comes_back(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    worker = _pool_worker(durq_cli, redis_url, queue_name, "-c", "1", "--grace", "0.5")
    handle = app.tasks["work"].enqueue(str(exec_log), "long", 30.0)
    eventually(lambda: exec_log.count("start") == 1, 15, durq_cli.outputs)
    family = [p.pid for p in worker.children()]

    worker.send(signal.SIGTERM)
    assert worker.wait(10) == 0, worker.output()
    assert not _alive(family)
    stats = app.queue(queue_name).stats()
    assert (stats.pending, stats.failed, stats.dead) == (1, 0, 0)
    info = app.queue(queue_name).job(handle.id)
    assert info is not None and info.attempts == 0  # given back: no attempt counted
