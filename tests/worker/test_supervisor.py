"""``durq worker -p N``: a supervisor keeps N worker processes running."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

import durq
from helpers import eventually
from worker.support import Durq, DurqProcess, ExecLog, running

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_a_killed_worker_process_is_restarted_and_the_queue_keeps_draining(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    queue = app.queue(queue_name)
    supervisor = durq_cli.worker(redis_url, queue_name, args=("-p", "2", "-c", "2", "--lease", "1"))
    eventually(lambda: supervisor.output().count("consuming") == 2, 20, durq_cli.outputs)
    original = {p.pid for p in supervisor.children()}
    assert len(original) == 2

    app.tasks["work"].enqueue_many([(str(exec_log), f"job-{i}", 0.3) for i in range(16)])
    eventually(lambda: exec_log.count("start") >= 4, 10, durq_cli.outputs)
    victim = exec_log.events("start")[0]["pid"]
    assert victim in original
    os.kill(victim, signal.SIGKILL)

    def replaced() -> bool:
        pids = {p.pid for p in supervisor.children()}
        return len(pids) == 2 and victim not in pids and len(pids - original) == 1

    eventually(replaced, 10, durq_cli.outputs)
    eventually(lambda: queue.stats().size == 0, 20, durq_cli.outputs)

    assert f"exited with -{signal.SIGKILL.value}; restarting" in supervisor.output()
    finished = exec_log.keys("finish")
    assert sorted(set(finished)) == sorted(f"job-{i}" for i in range(16))
    assert queue.stats().completed == 16
    # the replacement is a full worker too
    eventually(lambda: supervisor.output().count("consuming") == 3, 10, durq_cli.outputs)

    _stop(supervisor)


def test_each_worker_process_is_forked_from_the_supervisor_which_imported_the_app(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    # a fast start (issue 33): no new interpreter and no second import of the app per
    # process; a forked child runs the supervisor's command line, an exec'd one its own
    supervisor = durq_cli.worker(redis_url, queue_name, args=("-p", "2", "--lease", "1"))
    eventually(lambda: supervisor.output().count("consuming") == 2, 20, durq_cli.outputs)
    parent = psutil.Process(supervisor.pid)
    children = parent.children()
    assert len(children) == 2
    for child in children:
        assert child.cmdline() == parent.cmdline()
    # a forked process is a full worker: it runs jobs, and drains on SIGTERM
    app.tasks["work"].enqueue_many([(str(exec_log), f"job-{i}", 0.1) for i in range(4)])
    eventually(lambda: exec_log.count("finish") == 4, 10, durq_cli.outputs)
    assert {e["pid"] for e in exec_log.events("finish")} <= {c.pid for c in children}
    _stop(supervisor)


def test_forked_worker_processes_each_run_a_process_pool_of_their_own(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    # the pool's template is forked from each worker process, which started no thread
    # before it: a worker forked from the supervisor is such a process too
    args = ("-p", "2", "--pool", "process", "-c", "1")
    supervisor = durq_cli.worker(redis_url, queue_name, args=args)
    eventually(lambda: supervisor.output().count("consuming") == 2, 30, durq_cli.outputs)
    workers = {c.pid for c in psutil.Process(supervisor.pid).children()}
    app.tasks["work"].enqueue_many([(str(exec_log), f"job-{i}", 0.1) for i in range(4)])
    eventually(lambda: exec_log.count("finish") == 4, 20, durq_cli.outputs)
    ran_in = {e["pid"] for e in exec_log.events("finish")}
    assert not ran_in & workers  # in the pools' children, not in the worker processes
    for pid in ran_in:  # each under one of the worker processes (its pool's template)
        assert {p.pid for p in psutil.Process(pid).parents()} & workers
    _stop(supervisor)


def _stop(supervisor: DurqProcess) -> None:
    """SIGTERM to the supervisor: it exits 0, and every process under it exits too."""
    everyone = supervisor.children()
    supervisor.send(signal.SIGTERM)
    assert supervisor.wait(30) == 0
    eventually(lambda: not any(running(c) for c in everyone), 5, "every process to exit")


def test_sigterm_to_the_supervisor_drains_every_worker_process(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    supervisor = durq_cli.worker(redis_url, queue_name, args=("-p", "2", "--grace", "10"))
    eventually(lambda: supervisor.output().count("consuming") == 2, 20, durq_cli.outputs)
    app.tasks["work"].enqueue_many([(str(exec_log), f"job-{i}", 1.0) for i in range(2)])
    eventually(lambda: exec_log.count("start") == 2, 10, durq_cli.outputs)

    supervisor.send(signal.SIGTERM)
    assert supervisor.wait(20) == 0
    # the running jobs were allowed to finish, and acknowledged
    assert sorted(exec_log.keys("finish")) == ["job-0", "job-1"]
    assert app.queue(queue_name).stats().completed == 2
    assert "restarting" not in supervisor.output()


def test_burst_mode_with_several_processes_exits_once_the_queue_is_drained(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    # Regressions: the supervisor restarted children that had exited because the queue
    # was drained, so `durq worker --burst -p N` never ended; and a child with nothing
    # to do while the other held the last jobs noticed the end up to 5 s late.
    app.tasks["work"].enqueue_many([(str(exec_log), f"job-{i}", 0.1) for i in range(8)])
    supervisor = durq_cli.worker(redis_url, queue_name, args=("-p", "2", "--burst"))
    assert supervisor.wait(30) == 0, supervisor.output()
    assert time.time() - max(e["time"] for e in exec_log.events("finish")) < 3.0
    assert sorted(exec_log.keys("finish")) == sorted(f"job-{i}" for i in range(8))
    assert "restarting" not in supervisor.output()
