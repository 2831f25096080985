"""Job control with real workers: cancel (pending, backing off, running; with the cancel
channel cut; racing completion), progress, expiry behind a backlog, debounce, keep-last.

The workers run with a lease of 1.5 s, so their lease keeper talks to Redis every 0.5 s:
"within a third of the lease" is measured against that.
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import durq
from durq.worker.control import CancelListener
from helpers import eventually
from worker.apps import awork, record
from worker.support import ExecLog, running_worker

LEASE = 1.5
THIRD = LEASE / 3


def sync_hold(log: str, key: str, seconds: float) -> str:
    """A sync task that looks at ``current_job().cancelled`` and returns early."""
    record(log, "start", key)
    job = durq.current_job()
    assert job is not None
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        if job.cancelled:
            record(log, "noticed", key)
            return key
        time.sleep(0.01)
    record(log, "finish", key)
    return key


def stubborn(log: str, key: str, seconds: float) -> str:
    """A sync task that ignores a cancel."""
    record(log, "start", key)
    time.sleep(seconds)
    record(log, "finish", key)
    return key


def fails_first(log: str, key: str) -> str:
    """Fail the first attempt (backoff 1 s), succeed later."""
    record(log, "start", key)
    job = durq.current_job()
    if job is not None and job.attempt == 1:
        raise RuntimeError("first attempt fails")
    record(log, "finish", key)
    return key


RACE: queue.SimpleQueue[str | None] = queue.SimpleQueue()


async def quick(n: int) -> int:
    """Ask for its own cancel (``RACE``), then return ``n`` 0 to 20 ms later: the
    cancel and the completion race (a cancel takes a few ms on a quiet machine, tens on
    a busy one: each side wins some)."""
    job = durq.current_job()
    assert job is not None
    RACE.put(job.id)
    await asyncio.sleep(random.random() * 0.02)
    return n


def reports(log: str, key: str, n: int) -> str:
    """Report progress ``n`` times in a tight loop, then a last time, then wait."""
    for i in range(n):
        durq.current_job().progress(i / n)  # type: ignore[union-attr]
    durq.current_job().progress(1.0, {"done": n})  # type: ignore[union-attr]
    time.sleep(0.4)
    record(log, "finish", key)
    return key


def echo(log: str, key: str, value: int) -> int:
    """Record ``value`` and take a moment."""
    record(log, "start", key, value=value)
    time.sleep(0.05)
    return value


async def ahold_value(log: str, key: str, value: int, seconds: float) -> int:
    """Record ``value``, hold ``seconds``."""
    record(log, "start", key, value=value)
    await asyncio.sleep(seconds)
    return value


def _state(handle: durq.JobHandle[Any]) -> durq.JobState | None:
    """The state of ``handle``'s job, None once it is gone."""
    info = handle.info()
    return info.state if info is not None else None


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    test_app = durq.App(
        redis_url, default_queue=queue_name, lease=LEASE, max_attempts=3, backoff=durq.fixed(0.05)
    )
    for fn, options in [
        (awork, {"result": True}),
        (sync_hold, {"result": True}),
        (stubborn, {}),
        (fails_first, {"backoff": durq.fixed(1.0), "result": True}),
        (quick, {"result": True}),
        (reports, {}),
        (echo, {"result": True}),
        (ahold_value, {}),
    ]:
        test_app.task(**options)(fn)  # type: ignore[arg-type]  # a list of mixed signatures
    yield test_app
    test_app.close()


def _stats(app: durq.App, queue: str) -> durq.QueueStats:
    return app.queue(queue).stats()


# -- cancel ---------------------------------------------------------------------------


def test_cancelled_pending_and_backing_off_jobs_are_never_delivered(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    handles = app.tasks["awork"].enqueue_many([(str(exec_log), f"p{i}", 0.0) for i in range(6)])
    cancelled = handles[::2]
    assert all(h.cancel().status is durq.CancelStatus.CANCELLED for h in cancelled)
    with running_worker(app, concurrency=4):
        retried = app.tasks["fails_first"].enqueue(str(exec_log), "backoff")
        eventually(lambda: exec_log.count("start", "backoff") == 1, 5)
        eventually(lambda: _state(retried) is durq.JobState.DELAYED, 5)
        assert retried.cancel().status is durq.CancelStatus.CANCELLED
        eventually(lambda: exec_log.count("finish") == 3, 5)
        time.sleep(1.2)  # past the backoff
    assert sorted(exec_log.keys("start")) == ["backoff", "p1", "p3", "p5"]
    for h in [*cancelled, retried]:
        with pytest.raises(durq.Cancelled):
            h.result(timeout=1)
    stats = _stats(app, queue_name)
    assert (stats.cancelled, stats.completed, stats.retried) == (4, 3, 1)


@pytest.mark.parametrize("cut", [False, True], ids=["channel", "channel-cut"])
def test_a_running_async_job_stops_within_a_third_of_its_lease_and_is_not_retried(
    app: durq.App,
    exec_log: ExecLog,
    queue_name: str,
    redis_url: str,
    cut: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if cut:  # the cancel channel stays down: only the durable flag can stop the job
        monkeypatch.setattr(CancelListener, "RETRY", 60.0)
    channel = app.queue(queue_name).keys.prefix + "cancel"
    client = redis.Redis.from_url(redis_url)
    try:
        with running_worker(app):
            eventually(lambda: client.pubsub_numsub(channel)[0][1] == 1, 5, "the listener")
            handle = app.tasks["awork"].enqueue(str(exec_log), "long", 30.0)
            eventually(lambda: exec_log.count("start") == 1, 5)
            if cut:
                client.client_kill_filter(_type="pubsub")
                eventually(lambda: client.pubsub_numsub(channel)[0][1] == 0, 5)
            asked = time.time()
            assert handle.cancel().status is durq.CancelStatus.CANCELLING
            eventually(lambda: exec_log.count("cancelled") == 1, 5)
            took = exec_log.events("cancelled")[0]["time"] - asked
            limit = THIRD + 0.35 if cut else 0.3
            assert took < limit, f"stopped {took:.2f} s after the cancel"
            eventually(lambda: _state(handle) is durq.JobState.CANCELLED, 5)
            time.sleep(0.3)
            if cut:
                assert client.pubsub_numsub(channel)[0][1] == 0, "the channel came back"
    finally:
        client.close()
    with pytest.raises(durq.Cancelled):
        handle.result(timeout=1)
    assert exec_log.count("start") == 1 and exec_log.count("finish") == 0
    stats = _stats(app, queue_name)
    assert (stats.cancelled, stats.retried, stats.failed) == (1, 0, 0)


def test_a_sync_task_sees_the_cancel_and_one_that_ignores_it_is_abandoned(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, concurrency=2, cancel_grace=0.3) as worker:
        polite = app.tasks["sync_hold"].enqueue(str(exec_log), "polite", 30.0)
        rude = app.tasks["stubborn"].enqueue(str(exec_log), "rude", 3.0)
        eventually(lambda: exec_log.count("start") == 2, 5)
        app.queue(queue_name).cancel([polite.id, rude.id])
        eventually(lambda: exec_log.count("noticed", "polite") == 1, 2)
        eventually(lambda: _stats(app, queue_name).cancelled == 2, 3)
        assert worker._executor.threads.abandoned == 1
        # the abandoned thread was replaced: both slots still run jobs
        later = app.tasks["awork"].enqueue_many([(str(exec_log), f"n{i}", 0.0) for i in range(2)])
        eventually(lambda: exec_log.count("finish") == 2, 5)
    assert _state(polite) is _state(rude) is durq.JobState.CANCELLED
    assert all(_state(h) in (None, durq.JobState.COMPLETED) for h in later)


def test_cancel_racing_completion_ends_every_job_in_exactly_one_terminal_state(
    app: durq.App, queue_name: str
) -> None:
    q = app.queue(queue_name)
    n = 1000
    answers: dict[str, durq.CancelResult] = {}

    def canceller() -> None:  # cancels each job the moment it starts running
        while (job_id := RACE.get()) is not None:
            answers[job_id] = q.cancel(job_id)[0]

    cancellers = [threading.Thread(target=canceller) for _ in range(4)]
    for thread in cancellers:
        thread.start()
    try:
        with running_worker(app, concurrency=20):
            handles = app.tasks["quick"].enqueue_many([(i,) for i in range(n)])
            eventually(lambda: (s := q.stats()).completed + s.cancelled == n, 30)
    finally:
        for _ in cancellers:
            RACE.put(None)
        for thread in cancellers:
            thread.join(10)
    stats = q.stats()
    assert (stats.retried, stats.failed, stats.dead, stats.size) == (0, 0, 0, 0)
    kinds: dict[str, int] = {}
    for i, h in enumerate(handles):
        answer = answers[h.id]
        kinds[answer.status.value] = kinds.get(answer.status.value, 0) + 1
        if answer.status is durq.CancelStatus.FINISHED:
            assert h.result(timeout=1) == i, answer
            assert answer.state is durq.JobState.COMPLETED
        else:
            with pytest.raises(durq.Cancelled):
                h.result(timeout=1)
            assert _state(h) is durq.JobState.CANCELLED
    assert stats.cancelled == kinds.get("cancelled", 0) + kinds.get("cancelling", 0)
    assert stats.completed == kinds.get("finished", 0)
    assert len(kinds) >= 2, kinds  # the race was run: the jobs ended in several ways


# -- progress -------------------------------------------------------------------------


def test_progress_is_coalesced_the_last_value_written_and_readable(
    app: durq.App, exec_log: ExecLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    from durq.worker import control

    writes: list[bytes] = []
    real = control._Reporter.write

    async def counted(self: Any, data: bytes) -> None:
        writes.append(data)
        await real(self, data)

    monkeypatch.setattr(control._Reporter, "write", counted)
    with running_worker(app):
        handle = app.tasks["reports"].enqueue(str(exec_log), "r", 20_000)
        eventually(lambda: (p := handle.progress()) is not None and p.fraction == 1.0, 5)
        progress = handle.progress()
        assert progress is not None and progress.info == {"done": 20_000}
        eventually(lambda: exec_log.count("finish") == 1, 5)
    assert 1 <= len(writes) <= 6, f"{len(writes)} writes for 20,001 reports"


def test_a_stale_holder_gets_lease_lost_from_its_progress(
    app: durq.App, queue_name: str, redis_url: str
) -> None:
    queue = app.queue(queue_name)
    errors: list[BaseException] = []

    def stale_report() -> None:
        job = durq.current_job()
        assert job is not None
        # another consumer takes the job over: its lease ran out
        client = redis.Redis.from_url(redis_url)
        client.zadd(queue.keys.prefix + "active", {job.id: 0}, xx=True)
        client.close()
        other = queue.dequeue(lease=30)
        assert other is not None and other.id == job.id
        try:
            job.progress(0.5)
        except durq.LeaseLost as exc:
            errors.append(exc)

    app.task(name="stale_report")(stale_report)
    with running_worker(app):
        app.tasks["stale_report"].enqueue()
        eventually(lambda: errors, 5)
    assert isinstance(errors[0], durq.LeaseLost)


# -- expiry ---------------------------------------------------------------------------


def test_a_job_expired_behind_a_backlog_is_never_delivered_and_its_key_is_reusable(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    echo_task = app.tasks["echo"]
    echo_task.enqueue_many([(str(exec_log), f"b{i}", i) for i in range(20)])  # ~1 s
    late = echo_task.options(expires=0.3, key="report").enqueue(str(exec_log), "late", -1)
    with running_worker(app, concurrency=1):
        eventually(lambda: exec_log.count("start") == 20, 10)
        eventually(lambda: _stats(app, queue_name).expired == 1, 5)
        again = echo_task.options(key="report").enqueue(str(exec_log), "again", -2)
        assert again.status is durq.EnqueueStatus.CREATED
        eventually(lambda: exec_log.count("start", "again") == 1, 5)
    assert exec_log.count("start", "late") == 0
    info = late.info()
    assert info is not None and info.state is durq.JobState.EXPIRED
    with pytest.raises(durq.Expired):
        late.result(timeout=1)
    assert info.reason is not None and info.reason["reason"] == "expired"


# -- debounce and keep-last -------------------------------------------------------------


def test_debounce_runs_a_burst_once_with_the_last_arguments(
    app: durq.App, exec_log: ExecLog
) -> None:
    caller = app.tasks["echo"].options(key="burst", debounce=0.3, max_wait=5)
    with running_worker(app):
        for i in range(10):
            caller.enqueue(str(exec_log), "burst", i)
            time.sleep(0.1)
        eventually(lambda: exec_log.count("start") == 1, 5)
        time.sleep(0.5)
    assert [e["value"] for e in exec_log.events("start")] == [9]


def test_a_steady_stream_with_max_wait_still_runs_every_max_wait(
    app: durq.App, exec_log: ExecLog
) -> None:
    caller = app.tasks["echo"].options(key="stream", debounce=1.0, max_wait=3.0)
    with running_worker(app):
        start = time.time()
        i = 0
        while time.time() - start < 7.0:
            caller.enqueue(str(exec_log), "stream", i)
            i += 1
            time.sleep(0.2)
        runs = [e["time"] for e in exec_log.events("start")]
    assert len(runs) >= 2, runs
    gaps = [runs[0] - start] + [b - a for a, b in itertools.pairwise(runs)]
    assert max(gaps) <= 3.0 + 0.5, gaps


def test_keep_last_gives_exactly_one_follow_up_with_the_newest_arguments(
    app: durq.App, exec_log: ExecLog
) -> None:
    caller = app.tasks["ahold_value"].options(key="sync", keep_last=True)
    with running_worker(app):
        first = caller.enqueue(str(exec_log), "sync", 0, 0.6)
        eventually(lambda: exec_log.count("start") == 1, 5)
        results = [caller.enqueue(str(exec_log), "sync", i, 0.0) for i in range(1, 6)]
        assert results[0].status is durq.EnqueueStatus.CREATED
        assert {r.status for r in results[1:]} == {durq.EnqueueStatus.UPDATED}
        eventually(lambda: exec_log.count("start") == 2, 5)
        time.sleep(0.5)
    assert [e["value"] for e in exec_log.events("start")] == [0, 5]
    assert first.id != results[0].id
