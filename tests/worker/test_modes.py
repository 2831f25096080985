"""How a worker is asked to run: burst mode, and the queues it consumes."""

from __future__ import annotations

import time

import durq
from worker.support import Durq, ExecLog


def test_burst_mode_runs_every_job_then_exits(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    work = app.tasks["work"]
    work.enqueue_many([(str(exec_log), f"now-{i}") for i in range(5)])
    enqueued = time.time()
    work.options(delay=1.0).enqueue(str(exec_log), "later")
    app.tasks["flaky_fixed"].enqueue(str(exec_log), "flaky", 1)

    worker = durq_cli.worker(redis_url, queue_name, args=("--burst",))
    assert worker.wait(20) == 0, worker.output()

    finished = exec_log.keys("finish")
    assert sorted(finished) == sorted([*(f"now-{i}" for i in range(5)), "later", "flaky"])
    # it waited for the delayed job and for the retry before calling the queue drained
    assert exec_log.events("finish", "later")[0]["time"] >= enqueued + 1.0
    assert [e["attempt"] for e in exec_log.events("start", "flaky")] == [1, 2]
    stats = app.queue(queue_name).stats()
    assert (stats.size, stats.completed) == (0, 7)
    # its last line counts runs by outcome: flaky ran twice (issue 35: "ran 3 jobs,
    # logged 'stopped after 6 jobs'")
    assert "stopped after 8 runs of jobs (7 completed, 1 to be retried)" in worker.output() or (
        "stopped after 8 runs of jobs (1 to be retried, 7 completed)" in worker.output()
    ), worker.output()


def test_burst_mode_on_an_empty_queue_exits_at_once(
    queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    started = time.monotonic()
    worker = durq_cli.worker(redis_url, queue_name, args=("--burst",))
    assert worker.wait(15) == 0, worker.output()
    assert time.monotonic() - started < 8.0
    assert "stopped after 0 runs of jobs" in worker.output()


def test_a_worker_consumes_exactly_the_queues_given_with_q(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    work = app.tasks["work"]
    names = {q: f"{queue_name}-{q}" for q in "abc"}
    for q, name in names.items():
        work.options(queue=name).enqueue(str(exec_log), q)

    worker = durq_cli.worker(redis_url, names["a"], names["b"], args=("--burst",))
    assert worker.wait(20) == 0, worker.output()

    assert sorted(exec_log.keys("finish")) == ["a", "b"]
    assert f"consuming {names['a']}, {names['b']} " in worker.output()
    # the app declares none of these queues (its tasks send there with .options): said
    assert f"queue {names['a']}: no task, schedule or topic of the app uses it" in (worker.output())
    assert app.queue(names["c"]).stats().pending == 1
