"""Promises of docs/schedules.md that no other schedule test showed (the promise -> test
table is in docs/guarantees.md)."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis

import durq
from durq import Rate
from durq.cron import CronTiming
from durq.protocol import schedules as ops
from durq.worker import WorkerState
from helpers import eventually
from schedules.apps import build
from schedules.test_engine import drain, tick_of
from worker.support import running_worker


def _info(app: durq.App, name: str) -> durq.ScheduleInfo:
    info = app.schedules.get(name)
    assert info is not None
    return info


def test_enabled_false_declares_it_paused_and_only_a_change_of_the_flag_overrides_a_pause(
    app: durq.App, redis_url: str, queue_name: str
) -> None:
    app.schedule("hb", "tick", every=0.2, args=("log",), enabled=False)
    app.sync_schedules()
    q = app.queue(app.default_queue)
    assert _info(app, "hb").state == "paused"
    assert drain(q, 0.5) == []
    app.schedules.resume("hb")  # a runtime resume survives the same declaration
    assert app.sync_schedules().unchanged == ["hb"]
    assert drain(q, 0.5)
    newer = build(redis_url, queue_name)  # the code now declares it enabled
    newer.schedule("hb", "tick", every=0.2, args=("log",))
    app.schedules.pause("hb")
    assert newer.sync_schedules().updated == ["hb"]
    assert _info(app, "hb").state == "active"  # the change of the flag wins
    assert drain(q, 0.5)
    newer.close()


def test_every_ticks_fall_on_the_grid_anchored_at_start_at(app: durq.App) -> None:
    start = time.time() + 0.137
    app.schedule("hb", "tick", every=0.2, args=("log",), start_at=start)
    app.sync_schedules()
    jobs = drain(app.queue(app.default_queue), 1.0)
    assert len(jobs) >= 3
    start_ms = round(start * 1000)
    assert all((tick_of(j) - start_ms) % 200 == 0 and tick_of(j) >= start_ms for j in jobs)


def test_a_ticks_job_has_its_tasks_options_and_a_change_of_them_applies_from_the_next_tick(
    redis_url: str, queue_name: str
) -> None:
    def declare(attempts: int) -> durq.App:
        app = build(redis_url, queue_name)

        @app.task(name="limited", max_attempts=attempts, queue=queue_name)
        def limited() -> None: ...

        app.schedule("hb", limited, every=0.2)
        return app

    first, second = declare(2), declare(4)
    try:
        first.sync_schedules()
        q = first.queue(queue_name)
        job = q.dequeue(wait=1.0)
        assert job is not None and (job.max_attempts, job.queue) == (2, queue_name)
        q.requeue(job, dead=True)
        assert q.dead_letters()[0].id == job.id  # an ordinary job: dead letters too
        assert second.sync_schedules().updated == ["hb"]
        later = q.dequeue(wait=1.0)
        assert later is not None and later.max_attempts == 4
        assert tick_of(later) > tick_of(job)
        q.release(later)
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("held", ["waiting", "retrying"])
def test_overlap_skip_counts_a_waiting_or_retrying_run_as_unfinished(
    app: durq.App, redis_url: str, held: str
) -> None:
    q = app.queue(app.default_queue)
    app.schedule("slow", "tick", every=0.2, args=("log",), overlap="skip")
    app.sync_schedules()
    if held == "waiting":  # the queue's rate holds the tick's job back: it waits
        q.configure(rate=Rate(1, per=60.0))
        q.enqueue("filler")
        assert q.dequeue(wait=0.1) is not None  # the start the rate allows
        outcome = "pending"
    else:  # the tick's job failed and waits for its next attempt
        job = q.dequeue(wait=1.0)
        assert job is not None
        q.requeue(job, delay=60)
        outcome = "delayed"
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        assert q.dequeue(wait=0.05) is None
    info = _info(app, "slow")
    assert info.fired == 1 and info.skipped >= 3 and info.last_outcome == outcome
    stats = redis.Redis.from_url(redis_url).hgetall(q.keys.prefix + "stats")
    assert int(stats[b"ticks_fired"]) == 1 and int(stats[b"ticks_skipped"]) == info.skipped


def test_the_stats_hash_counts_missed_ticks_and_the_list_shows_the_outcome(
    app: durq.App, redis_url: str
) -> None:
    q = app.queue(app.default_queue)
    app.schedule("hb", "tick", every=0.1, args=("log",))
    app.sync_schedules()
    time.sleep(0.55)  # no worker: ticks are missed
    (job,) = q.dequeue_many(10)  # catch_up="latest": the newest
    info = _info(app, "hb")
    assert info.missed >= 3 and info.last_outcome == "active" and info.last_job == job.id
    stats = redis.Redis.from_url(redis_url).hgetall(q.keys.prefix + "stats")
    assert int(stats[b"ticks_missed"]) == info.missed
    q.release(job)
    assert _info(app, "hb").last_outcome == "finished"  # its record is gone


def test_under_catch_up_none_a_tick_less_than_half_an_interval_late_still_fires(
    app: durq.App,
) -> None:
    app.schedule("hb", "tick", every=1.6, args=("log",), catch_up="none")
    app.sync_schedules()
    due = _info(app, "hb").next_due
    assert due is not None
    time.sleep(max(0.0, due + 0.2 - time.time()))  # 0.2 s late: within its grace of 0.8 s
    q = app.queue(app.default_queue)
    (job,) = q.dequeue_many(10)
    assert tick_of(job) == round(due * 1000)
    info = _info(app, "hb")
    assert (info.fired, info.missed) == (1, 0)


def test_the_grace_of_catch_up_none_is_half_an_interval_at_most_60_s_and_30_s_for_cron(
    app: durq.App,
) -> None:
    timings: list[tuple[str, dict[str, Any]]] = [
        ("fast", {"every": 0.2}),
        ("hourly", {"every": 3600}),
        ("cron", {"cron": "* * * * *"}),
    ]
    rows = {
        name: app.schedule(name, "tick", args=("log",), catch_up="none", **timing).row()
        for name, timing in timings
    }
    assert {name: row.grace_ms for name, row in rows.items()} == {
        "fast": 100, "hourly": 60_000, "cron": 30_000
    }  # fmt: skip


def test_a_stored_schedule_the_code_never_declared_is_never_reported_missing(
    app: durq.App,
) -> None:
    q = app.queue(app.default_queue)
    row = app.schedule("made-at-runtime", "tick", every=60, args=("log",)).row(origin="api")
    app.schedules.declared.clear()
    assert q._run(ops.upsert(q.keys, row, None)) == "created"
    app.schedule("declared", "tick", every=60, args=("log",))
    report = app.sync_schedules()
    assert report.created == ["declared"] and report.missing == []
    assert app.sync_schedules(remove_missing=True).removed == []
    assert app.schedules.get("made-at-runtime", app.default_queue) is not None


def test_a_worker_logs_a_warning_for_a_schedule_removed_from_the_code(
    app: durq.App, redis_url: str, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    app.schedule("old", "tick", every=60, args=("log",))
    app.schedule("kept", "tick", every=60, args=("log",))
    app.sync_schedules()
    newer = build(redis_url, queue_name)
    newer.schedule("kept", "tick", every=60, args=("log",))
    with (
        caplog.at_level(logging.WARNING, logger="durq.worker"),
        running_worker(newer, queues=[queue_name]),
    ):
        eventually(lambda: "'old'" in caplog.text, 5, "the warning")
    assert "no longer declared" in caplog.text
    assert app.schedules.get("old") is not None  # reported, not removed
    newer.close()


def test_a_burst_worker_does_not_stop_while_a_schedule_of_its_queue_is_active(
    app: durq.App, log_path: str
) -> None:
    app.schedule("hb", "tick", every=0.2, args=(log_path,))
    with running_worker(app, queues=[app.default_queue], burst=True) as worker:
        time.sleep(1.0)
        assert worker.state is WorkerState.RUNNING
        assert _info(app, "hb").fired >= 3
        app.schedules.pause("hb")
        eventually(lambda: worker.state is WorkerState.STOPPED, 10, "the burst worker to stop")


def _wall(t: int, tz: str) -> str:
    return datetime.fromtimestamp(t / 1000, ZoneInfo(tz)).strftime("%a %d")


def test_a_cron_restricting_day_of_month_and_day_of_week_fires_when_either_matches() -> None:
    tz = "Europe/Berlin"
    start = int(datetime(2026, 2, 1, tzinfo=ZoneInfo(tz)).timestamp() * 1000)
    ticks = CronTiming("0 12 10 * 1", tz).next_ticks(start, 4)  # the 10th, or a Monday
    assert [_wall(t, tz) for t in ticks] == ["Mon 02", "Mon 09", "Tue 10", "Mon 16"]


async def test_every_schedule_control_has_an_asyncio_twin(app: durq.App) -> None:
    app.schedule("hb", "tick", every=0.2, args=("log",))
    report = await app.schedules.aupsert()
    assert report.created == ["hb"]
    await app.schedules.apause("hb")
    info = await app.schedules.aget("hb")
    assert info is not None and info.state == "paused"
    assert await app.schedules.aresume("hb") is not None
    job_id = await app.schedules.atrigger("hb")
    assert job_id.startswith("sched:hb@") and job_id.endswith(":run")
    await app.schedules.aremove("hb")
    assert await app.schedules.aget("hb") is None
    await app.aclose()
