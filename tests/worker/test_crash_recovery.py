"""A worker killed with SIGKILL mid-job: its job comes back after the lease and finishes
on another worker."""

from __future__ import annotations

import signal

import pytest

import durq
from helpers import eventually
from worker.support import Durq, ExecLog

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_a_job_whose_worker_is_killed_mid_run_completes_on_another_worker_after_the_lease(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    first = durq_cli.worker(redis_url, queue_name, args=("--lease", "1"))
    app.tasks["work"].enqueue(str(exec_log), "report", 1.5)
    eventually(lambda: exec_log.count("start") == 1, 15, durq_cli.outputs)

    first.send(signal.SIGKILL)
    assert first.wait(5) == -signal.SIGKILL
    second = durq_cli.worker(redis_url, queue_name, args=("--lease", "1"))
    eventually(lambda: exec_log.count("finish") == 1, 15, durq_cli.outputs)

    starts = exec_log.events("start")
    assert [(s["pid"], s["attempt"]) for s in starts] == [(first.pid, 1), (second.pid, 2)]
    assert [f["pid"] for f in exec_log.events("finish")] == [second.pid]
    # handed out again only once the lease (1 s from the first fetch, then extended
    # while the first worker lived) had run out
    assert starts[1]["time"] - starts[0]["time"] >= 0.9
    queue = app.queue(queue_name)
    eventually(lambda: queue.stats().completed == 1, 5, "the acknowledgement")  # sent after
    stats = queue.stats()
    assert (stats.reclaimed, stats.completed, stats.size, stats.dead) == (1, 1, 0, 0)


def test_the_jobs_of_a_killed_worker_come_back_while_other_workers_keep_running(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    doomed = durq_cli.worker(redis_url, queue_name, args=("--lease", "1", "-c", "3"))
    eventually(lambda: "consuming" in doomed.output(), 15, durq_cli.outputs)
    app.tasks["work"].enqueue_many([(str(exec_log), f"slow-{i}", 2.0) for i in range(3)])
    eventually(lambda: exec_log.count("start") == 3, 15, durq_cli.outputs)
    # frozen in the middle of its jobs while the survivor starts (seconds on a loaded
    # machine, when the 2 s jobs finished first on the doomed worker), then killed
    doomed.send(signal.SIGSTOP)
    survivor = durq_cli.worker(redis_url, queue_name, args=("--lease", "1", "-c", "3"))
    eventually(lambda: "consuming" in survivor.output(), 15, durq_cli.outputs)

    doomed.send(signal.SIGKILL)
    doomed.wait(5)
    eventually(lambda: exec_log.count("finish") == 3, 20, durq_cli.outputs)

    finished = exec_log.events("finish")
    assert sorted(f["key"] for f in finished) == ["slow-0", "slow-1", "slow-2"]
    assert {f["pid"] for f in finished} == {survivor.pid}
    assert {f["attempt"] for f in finished} == {2}
    queue = app.queue(queue_name)
    eventually(lambda: queue.stats().size == 0, 5, "the acknowledgements")
    assert (queue.stats().reclaimed, queue.stats().completed) == (3, 3)
