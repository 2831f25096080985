"""The process pool (docs/process-pool.md): sync tasks in child processes forked from a
template, stopped for good at their timeout, replaced when they crash, recycled by jobs,
memory or age, and the worker's memory limit.

These run the worker in the test process (``running_worker``), so that a test can look
at its pool; the faults that need a worker of its own (a SIGKILL of its main process, a
SIGTERM drain) are in test_process_pool_faults.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from prometheus_client import generate_latest

import durq
from cli.support import durq as run
from durq.metrics import WorkerMetrics
from durq.worker import Worker, WorkerConfig, WorkerState
from durq.worker.capacity import Capacity
from durq.worker.leases import LeaseKeeper
from durq.worker.memory_limit import MemoryLimit
from durq.worker.pool import PoolBroken, ProcessPoolConfig
from durq.worker.pool.pool import ProcessPool
from helpers import eventually
from worker import pool_app
from worker.apps import explodes
from worker.support import ExecLog, running_worker


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    """The process pool's test App (worker.pool_app) on the shared server."""
    test_app = pool_app.build(redis_url, default_queue=queue_name)
    yield test_app
    test_app.close()


def _pool(worker: Worker) -> Any:
    pool = worker._pool
    assert pool is not None
    return pool


def _full(worker: Worker, size: int) -> bool:
    """True when the pool has ``size`` children ready for work again."""
    pool = _pool(worker)
    ready = [c for c in pool.children if c.state.value in ("idle", "busy")]
    return len(ready) == size and len(pool.children) == size


def _stats(app: durq.App, queue_name: str) -> durq.QueueStats:
    return app.queue(queue_name).stats()


def _reason(app: durq.App, queue_name: str, job_id: str) -> dict[str, Any]:
    info = app.queue(queue_name).job(job_id)
    assert info is not None and info.reason is not None
    return info.reason


def _process_pool(**limits: Any) -> dict[str, Any]:
    return {"pool": "process", "process_pool": ProcessPoolConfig(**limits)}


# -- where tasks run ---------------------------------------------------------------------


def test_a_sync_task_runs_in_a_child_process_that_sees_its_current_job(
    app: durq.App, exec_log: ExecLog
) -> None:
    with running_worker(app, concurrency=2, **_process_pool()):
        handle = app.tasks["whoami"].enqueue(str(exec_log), "a")
        seen = handle.result(timeout=10)
        added = app.tasks["add"].enqueue(2, 3).result(timeout=10)
    assert seen["pid"] != os.getpid()
    assert seen["id"] == handle.id and seen["attempt"] == 1
    assert added == 5


def test_a_task_that_asks_for_the_process_pool_runs_there_and_the_others_in_threads(
    app: durq.App, exec_log: ExecLog
) -> None:
    with running_worker(app, concurrency=2) as worker:
        assert not _pool(worker).default  # only the tasks that ask for it run there
        child = app.tasks["in_process"].enqueue(str(exec_log), "p").result(timeout=10)
        thread = app.tasks["in_threads"].enqueue(str(exec_log), "t").result(timeout=10)
        plain = app.tasks["add"].enqueue(1, 1).result(timeout=10)
    assert child != os.getpid()
    assert thread == os.getpid()
    assert plain == 2


def test_retry_fail_errors_and_rate_limits_from_a_child_follow_the_tasks_policy(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, concurrency=2, **_process_pool()):
        exploded = app.tasks["explodes"].enqueue(str(exec_log), "x", "bad input")
        refused = app.tasks["refuses"].enqueue(str(exec_log), "f", "never")
        retried = app.tasks["asks_retry"].enqueue(str(exec_log), "r", 0.0, 2)
        limited = app.tasks["limited"].enqueue(str(exec_log), "l")
        assert limited.result(timeout=10) == "l"
        eventually(lambda: _stats(app, queue_name).dead == 3, 10)
    assert _reason(app, queue_name, exploded.id)["reason"] == "exception"
    assert "bad input" in _reason(app, queue_name, exploded.id)["message"]
    assert _reason(app, queue_name, refused.id)["reason"] == "failed"
    assert _reason(app, queue_name, retried.id)["reason"] == "retry_requested"
    assert exec_log.count("start", "x") == 2  # its two attempts
    assert exec_log.count("start", "f") == 1  # Fail: dead at once
    assert exec_log.count("start", "r") == 2  # Retry, once, then its attempts are spent
    assert exec_log.count("start", "l") == 2  # RateLimited: given back, no attempt counted


def test_a_durable_step_in_a_child_dead_letters_its_job_with_step_error_and_says_why(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, concurrency=1, **_process_pool()):
        handle = app.tasks["durable_in_child"].enqueue(str(exec_log), "d")
        eventually(lambda: _stats(app, queue_name).dead == 1, 10)
    reason = _reason(app, queue_name, handle.id)
    assert reason["reason"] == "step_error", reason
    assert "process pool's child" in reason["message"]
    assert exec_log.count("start", "d") == 1  # dead at once: another run would do the same


def test_progress_and_cancel_reach_a_task_in_a_child(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, concurrency=2, cancel_grace=0.5, **_process_pool()):
        reporter = app.tasks["reports"].enqueue(str(exec_log), "p", 5, 30.0)
        eventually(lambda: (p := reporter.progress()) is not None and p.fraction == 1.0, 10)
        progress = reporter.progress()
        assert progress is not None and progress.info == {"step": 5}
        reporter.cancel()  # (a task that never looks: its child is killed after the grace)
        polite = app.tasks["waits_for_cancel"].enqueue(str(exec_log), "c", 30.0)
        eventually(lambda: exec_log.count("start", "c") == 1, 10)
        polite.cancel()
        eventually(lambda: exec_log.count("cancelled", "c") == 1, 5)
        eventually(lambda: _stats(app, queue_name).cancelled == 2, 5)
    assert exec_log.count("finish") == 0


def test_a_cancelled_job_whose_task_ignores_it_has_its_child_killed_and_replaced(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, concurrency=1, cancel_grace=0.3, **_process_pool()) as worker:
        stuck = app.tasks["hangs_hard"].enqueue(str(exec_log), "s")
        eventually(lambda: exec_log.count("start", "s") == 1, 10)
        stuck.cancel()
        eventually(lambda: _stats(app, queue_name).cancelled == 1, 5)
        eventually(lambda: _full(worker, 1), 5, "a replacement child")
        assert app.tasks["add"].enqueue(1, 2).result(timeout=10) == 3
        assert _pool(worker).metrics.kills.get("cancelled") == 1
    assert _stats(app, queue_name).failed == 0


# -- time limits and deaths -------------------------------------------------------------


@pytest.mark.parametrize("task", ["hangs", "hangs_hard", "blocks_in_c"])
def test_a_task_past_its_timeout_is_stopped_retried_then_dead_lettered_and_the_pool_refills(
    app: durq.App, exec_log: ExecLog, queue_name: str, task: str
) -> None:
    """``hangs`` sleeps (TimeLimitExceeded stops it); ``hangs_hard`` catches that and
    ``blocks_in_c`` never returns to Python: SIGKILL, ``kill_grace`` later, stops them."""
    grace = 0.5
    with running_worker(app, concurrency=2, **_process_pool(kill_grace=grace)) as worker:
        handle = app.tasks[task].enqueue(str(exec_log), "t")
        eventually(lambda: _stats(app, queue_name).dead == 1, 20)
        eventually(lambda: _full(worker, 2), 5, "the pool back to two children")
        # both children run jobs again
        done = app.tasks["whoami"].enqueue_many([(str(exec_log), f"n{i}") for i in range(6)])
        pids = {h.result(timeout=10)["pid"] for h in done}
        assert pids <= {c.pid for c in _pool(worker).children}
        kills = dict(_pool(worker).metrics.kills)
        text = generate_latest(worker.metrics.registry).decode()
    starts = [e["time"] for e in exec_log.events("start", "t")]
    assert len(starts) == 2
    # the second attempt began once the first was stopped: within timeout + grace + 1 s
    assert starts[1] - starts[0] < 1.0 + grace + 1.0 + 1.0  # (+1 s: a loaded machine)
    reason = _reason(app, queue_name, handle.id)
    assert reason["reason"] == "timeout" and reason["attempt"] == 2
    if task == "hangs":
        assert "stopped by durq.TimeLimitExceeded" in reason["message"]
        assert exec_log.count("time_limit", "t") == 2
        assert kills == {}
        assert 'durq_pool_recycles_total{cause="timeout"} 2.0' in text
    else:
        assert "killed with SIGKILL" in reason["message"]
        assert kills == {"timeout": 2}
        assert 'durq_pool_kills_total{reason="timeout"} 2.0' in text


def test_a_child_that_aborts_fails_its_job_with_the_signal_and_the_worker_runs_on(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, concurrency=1, **_process_pool()) as worker:
        crashed = app.tasks["segfaults"].enqueue(str(exec_log), "s")
        eventually(lambda: _stats(app, queue_name).dead == 1, 10)
        app.tasks["aborts"].enqueue(str(exec_log), "a")
        eventually(lambda: exec_log.count("finish", "a") == 1, 10)
        kills = dict(_pool(worker).metrics.kills)
        eventually(lambda: _full(worker, 1), 5)
    reason = _reason(app, queue_name, crashed.id)
    assert reason["reason"] == "killed:SIGSEGV"
    assert "died of SIGSEGV" in reason["message"]
    starts = exec_log.events("start", "a")
    assert [e["attempt"] for e in starts] == [1, 2]  # the abort cost its attempt
    assert starts[0]["pid"] != starts[1]["pid"]
    assert kills == {"killed:SIGSEGV": 1, "killed:SIGABRT": 1}
    assert _stats(app, queue_name).completed == 1


# -- recycling --------------------------------------------------------------------------


def test_children_over_their_memory_limit_are_recycled_and_no_job_is_lost(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    limits = _process_pool(max_memory_per_child=200)
    with running_worker(app, concurrency=2, **limits) as worker:
        handles = app.tasks["leaks"].enqueue_many([(str(exec_log), f"m{i}") for i in range(12)])
        pids = [h.result(timeout=30) for h in handles]
        recycles = dict(_pool(worker).metrics.recycles)
        eventually(lambda: _full(worker, 2), 5)
    stats = _stats(app, queue_name)
    assert (stats.completed, stats.failed, stats.dead) == (12, 0, 0)
    # a child's resident memory: ~45 MB of app and 50 MB a call; over 200 MB it is
    # replaced after that job, so no child kept more than 4 blocks
    assert max(e["kept"] for e in exec_log.events("finish")) <= 4
    # a child's own memory bounded: at most the limit plus one call's 50 MB (and slack);
    # its resident set also counts the pages it shares with the process it was forked
    # from (here the test run's: 535 MB under coverage)
    assert max(e["uss"] for e in exec_log.events("finish")) < (200 + 2 * 50) * 1024 * 1024
    assert len(set(pids)) >= 3
    assert recycles.get("max_memory", 0) >= 2


def test_children_are_replaced_after_their_jobs_without_costing_an_attempt(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, concurrency=2, **_process_pool(max_jobs_per_child=3)) as worker:
        handles = app.tasks["whoami"].enqueue_many([(str(exec_log), f"j{i}") for i in range(18)])
        seen = [h.result(timeout=30) for h in handles]
        recycles = dict(_pool(worker).metrics.recycles)
        eventually(lambda: _full(worker, 2), 5)
        starts = list(_pool(worker).start_times)
    assert all(s["attempt"] == 1 for s in seen)
    per_child: dict[int, int] = {}
    for s in seen:
        per_child[s["pid"]] = per_child.get(s["pid"], 0) + 1
    assert max(per_child.values()) <= 3
    assert len(per_child) >= 6
    assert recycles["max_jobs"] >= 5
    assert _stats(app, queue_name).failed == 0
    # forked from the template: ready in well under a second even on a loaded machine
    assert max(starts) < 1.0


def test_children_older_than_their_age_limit_are_replaced_between_jobs(
    app: durq.App, exec_log: ExecLog
) -> None:
    with running_worker(app, concurrency=1, **_process_pool(max_child_age=0.5)) as worker:
        first = app.tasks["whoami"].enqueue(str(exec_log), "a").result(timeout=10)["pid"]
        eventually(lambda: _pool(worker).metrics.recycles.get("max_age", 0) >= 1, 5)
        second = app.tasks["whoami"].enqueue(str(exec_log), "b").result(timeout=10)["pid"]
    assert first != second


# -- the worker's memory limit -------------------------------------------------------------


def test_the_memory_limit_holds_fetching_above_it_and_lets_go_under_ninety_percent() -> None:
    capacity = Capacity(4)
    metrics = WorkerMetrics()
    limit = MemoryLimit(1, capacity, metrics)
    limit.check()
    assert capacity.held and capacity.free() == 0 and limit.holds == 1
    limit.limit = 10 * limit.used
    limit.check()
    assert not capacity.held and capacity.free() == 4
    limit.limit = 1
    limit.check()
    text = generate_latest(metrics.registry).decode()
    assert "durq_worker_fetching_held 1.0" in text
    assert "durq_worker_resident_bytes" in text


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_over_its_memory_limit_fetches_nothing_until_it_is_under_it(
    app: durq.App, exec_log: ExecLog, queue_name: str, pool: str, caplog: pytest.LogCaptureFixture
) -> None:
    with running_worker(app, concurrency=2, memory_limit=1.0, pool=pool) as worker:
        eventually(lambda: worker.capacity.held, 5, "the limit to hold fetching")
        assert "over its limit of 1 MB: fetching stops" in caplog.text
        app.tasks["work"].enqueue(str(exec_log), "w")
        time.sleep(0.5)
        assert exec_log.count("start") == 0
        assert _stats(app, queue_name).pending == 1
    # the job waits for a worker with room, and is not lost
    with running_worker(app, concurrency=2, pool=pool):
        eventually(lambda: exec_log.count("finish", "w") == 1, 10)


# -- configuration ----------------------------------------------------------------------


def test_bad_pool_settings_are_refused_when_declared(app: durq.App) -> None:
    with pytest.raises(durq.InvalidArgument):
        app.task(pool="fork")(lambda: None)  # type: ignore[call-overload]

    async def coro() -> None: ...

    with pytest.raises(durq.InvalidArgument, match="async"):
        app.task(name="coro", pool="process")(coro)
    with pytest.raises(durq.InvalidArgument):
        WorkerConfig(pool="fork")  # type: ignore[arg-type]
    with pytest.raises(durq.InvalidArgument):
        ProcessPoolConfig(max_jobs_per_child=0)
    with pytest.raises(durq.InvalidArgument):
        ProcessPoolConfig(kill_grace=-1)
    with pytest.raises(durq.InvalidArgument):
        WorkerConfig(memory_limit=0)


# -- observability ----------------------------------------------------------------------


def test_durq_workers_lists_each_child_of_the_pool(
    app: durq.App, exec_log: ExecLog, redis_url: str
) -> None:
    with running_worker(app, concurrency=2, **_process_pool()) as worker:
        app.tasks["whoami"].enqueue(str(exec_log), "a").result(timeout=10)
        pids = {c.pid for c in _pool(worker).children}

        def listed() -> str:
            out = run("workers", "--url", redis_url).output
            return out if all(str(pid) in out for pid in pids) else ""

        shown = eventually(listed, 5, "the children in `durq workers`")
    assert "process pool children" in shown
    assert worker.id in shown
    text = generate_latest(worker.metrics.registry).decode()
    assert "durq_pool_children 2.0" in text


# -- queues and front ends --------------------------------------------------------------


def test_jobs_of_a_sharded_queue_sent_through_both_front_ends_run_in_the_pool(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    sharded = app.task(
        name="sharded_whoami", queue=f"{queue_name}-s", shards=2, result=True, pool="process"
    )(pool_app.whoami)

    async def through_asyncio() -> list[Any]:
        try:
            handles = await sharded.aenqueue_many([(str(exec_log), f"a{i}") for i in range(4)])
            return [await h.aresult(timeout=10) for h in handles]
        finally:
            await app.aclose()  # its asyncio clients belong to this loop

    with running_worker(app, concurrency=2):
        plain = [
            h.result(timeout=10)
            for h in sharded.enqueue_many([(str(exec_log), f"s{i}") for i in range(4)])
        ]
        awaited = asyncio.run(through_asyncio())
    assert {s["pid"] for s in plain + awaited}.isdisjoint({os.getpid()})
    assert exec_log.count("finish") == 8


def test_pool_limits_for_an_app_without_a_task_in_the_pool_are_a_usage_error(
    redis_url: str,
) -> None:
    result = run("worker", "worker.apps:app", "--url", redis_url, "--max-jobs-per-child", "5")
    assert result.exit_code == 2, result.output
    assert "no task of this app is" in result.output


def test_a_dead_template_stops_the_worker_and_gives_its_jobs_back_unspent(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    """No child can be forked any more: the worker stops (``durq worker`` exits 1, for
    its supervisor to start it afresh) rather than run on with a shrinking pool."""
    with pytest.raises(PoolBroken), running_worker(app, concurrency=1, **_process_pool()) as worker:
        handle = app.tasks["work"].enqueue(str(exec_log), "w", 30.0)
        eventually(lambda: exec_log.count("start") == 1, 10)
        children = [c.pid for c in _pool(worker).children]
        os.kill(_pool(worker).template.pid, signal.SIGKILL)
        eventually(lambda: worker.state is WorkerState.STOPPED, 10, "the worker to stop")
    assert exec_log.count("finish") == 0
    info = app.queue(queue_name).job(handle.id)
    # given back (after a second), no attempt counted
    assert info is not None and info.state is durq.JobState.DELAYED and info.attempts == 0
    eventually(lambda: not any(_exists(pid) for pid in children), 5, "the children to die")


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_job_whose_lease_was_taken_over_has_its_child_killed_and_nothing_acknowledged(
    app: durq.App, exec_log: ExecLog, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fencing makes the kill safe: once another consumer holds the job, the worker
    kills the child running it, and nothing the old run did reaches the job."""
    extend = [False]  # the worker's extensions held back until the lease has lapsed
    real_due = LeaseKeeper._due
    monkeypatch.setattr(
        LeaseKeeper, "_due", lambda self, d, now: extend[0] and real_due(self, d, now)
    )
    with running_worker(app, concurrency=1, lease=1.0, **_process_pool()) as worker:
        handle = app.tasks["work"].enqueue(str(exec_log), "w", 3.0)
        eventually(lambda: exec_log.count("start") == 1, 10)
        queue = app.queue(queue_name)
        taken = eventually(lambda: queue.dequeue(lease=30), 5, "the lapsed lease")
        assert taken.id == handle.id
        extend[0] = True  # the next extension is refused: the lease is lost
        eventually(lambda: _pool(worker).metrics.kills.get("lease_lost") == 1, 5)
        eventually(lambda: _full(worker, 1), 5)
        started = exec_log.events("start")[0]["time"]
        time.sleep(max(0.0, started + 3.5 - time.time()))  # past the killed run's end
    assert exec_log.count("finish") == 0
    info = queue.job(handle.id)
    assert info is not None and info.state is durq.JobState.ACTIVE  # still the taker's
    queue.release(taken)
    assert queue.stats().completed == 1


def test_a_job_handed_to_a_child_that_just_died_goes_back_without_an_attempt(
    app: durq.App, exec_log: ExecLog, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle child killed (the OOM killer's favourite) in the instant before the worker
    learns of it: the job it was handed never reached it, so it costs nothing."""
    real_acquire = ProcessPool._acquire
    killed: list[int] = []

    async def acquire_a_dead_child(self: ProcessPool) -> Any:
        child = await real_acquire(self)
        if child is not None and not killed:
            killed.append(child.pid)
            os.kill(child.pid, signal.SIGKILL)
            eventually(lambda: not _exists(child.pid) or _zombie(child.pid), 5, interval=0.001)
        return child

    monkeypatch.setattr(ProcessPool, "_acquire", acquire_a_dead_child)
    with running_worker(app, concurrency=1, **_process_pool()) as worker:
        seen = app.tasks["whoami"].enqueue(str(exec_log), "w").result(timeout=10)
        eventually(lambda: _full(worker, 1), 5)
        kills = dict(_pool(worker).metrics.kills)
    assert killed and seen["pid"] != killed[0]
    assert seen["attempt"] == 1  # given back unspent, then run by the replacement
    assert kills == {}
    assert _stats(app, queue_name).failed == 0


def _zombie(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def test_retry_on_and_dont_retry_on_hold_for_a_task_in_a_child(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    task = app.task(name="bad_input", dont_retry_on=ValueError, max_attempts=3, pool="process")(
        explodes
    )
    with running_worker(app, concurrency=1):
        handle = task.enqueue(str(exec_log), "v", "not a number")
        eventually(lambda: _stats(app, queue_name).dead == 1, 10)
    assert exec_log.count("start", "v") == 1  # dead-lettered at its first attempt
    reason = _reason(app, queue_name, handle.id)
    assert reason["retried"] is False and "not a number" in reason["message"]
    assert exec_log.events("start", "v")[0]["pid"] != os.getpid()
