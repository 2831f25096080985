"""Schedules in the engine: ticks fired by dequeue under the watermark, upserts that
never re-fire, runtime control, overlap, cron refills and catch-up, sharded pinning."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import pytest
import redis

import durq
from durq.app.schedule_spec import pinned_queue, schedule_job_id
from durq.protocol import schedules as ops
from schedules.apps import build


def drain(q: durq.Queue, seconds: float) -> list[durq.Job]:
    """Dequeue (and release) for ``seconds``, as an idle worker would."""
    jobs: list[durq.Job] = []
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        job = q.dequeue(wait=left)
        if job is not None:
            jobs.append(job)
            q.release(job)
    return jobs


def tick_of(job: durq.Job) -> int:
    return int(job.payload[3]["tick"])


def test_ticks_fire_once_each_with_deterministic_ids(app: durq.App) -> None:
    app.schedule("hb", "tick", every=0.2, args=("log",))
    assert app.sync_schedules().created == ["hb"]
    q = app.queue(app.default_queue)
    jobs = drain(q, 1.3)
    ticks = [tick_of(j) for j in jobs]
    assert len(ticks) >= 5
    assert all(b - a == 200 for a, b in itertools.pairwise(ticks))
    for job, tick in zip(jobs, ticks, strict=True):
        assert job.id == schedule_job_id("hb", tick / 1000)
        assert job.payload[:3] == ["tick", ["log"], {}]
        assert job.payload[3]["schedule"] == "hb"
    info = app.schedules.get("hb")
    assert info is not None and info.fired == len(jobs) and info.missed == 0
    assert info.last_tick == ticks[-1] / 1000
    assert info.next_due == pytest.approx(info.last_tick + 0.2)


def test_upserts_never_refire_and_apply_from_the_next_tick(app: durq.App) -> None:
    q = app.queue(app.default_queue)
    app.schedule("hb", "tick", every=0.2, args=("a",))
    app.sync_schedules()
    first = drain(q, 0.7)
    # new arguments: same timing, same watermark, the next ticks carry them
    app.schedules.declared.clear()
    app.schedule("hb", "tick", every=0.2, args=("b",))
    assert app.sync_schedules().updated == ["hb"]
    second = drain(q, 0.7)
    assert {j.payload[1][0] for j in second} == {"b"}
    assert tick_of(second[0]) == tick_of(first[-1]) + 200
    # new timing: the watermark moves to the change, nothing before it fires again
    app.schedules.declared.clear()
    app.schedule("hb", "tick", every=0.3, args=("c",))
    changed_at = time.time()
    assert app.sync_schedules().changed == ["hb"]
    third = drain(q, 1.0)
    assert third and all(tick_of(j) / 1000 > changed_at - 0.05 for j in third)
    ids = [j.id for j in first + second + third]
    assert len(ids) == len(set(ids))
    # the same declaration again (every worker start): nothing changes
    assert app.sync_schedules().unchanged == ["hb"]


def test_a_finished_ticks_free_id_does_not_let_it_fire_again(app: durq.App, redis_url: str) -> None:
    """arq #196: the guard is the watermark, not whether the tick's job still exists."""
    app.schedule("hb", "tick", every=0.3, args=("log",))
    app.sync_schedules()
    q = app.queue(app.default_queue)
    job = q.dequeue(wait=1.0)
    assert job is not None
    q.release(job)  # completed, record deleted: the id is free
    r = redis.Redis.from_url(redis_url)
    # a lagging view of the schedule: due again at the tick that already fired
    r.zadd(q.keys.prefix + "sched", {"hb": tick_of(job)})
    again = q.dequeue()
    assert again is None or tick_of(again) > tick_of(job)
    info = app.schedules.get("hb")
    assert info is not None and info.fired == 1 + (again is not None)


def test_pause_resume_trigger_remove(app: durq.App) -> None:
    app.schedule("hb", "tick", every=0.2, args=("log",))
    app.sync_schedules()
    q = app.queue(app.default_queue)
    app.schedules.pause("hb")
    assert drain(q, 0.5) == []
    info = app.schedules.get("hb")
    assert info is not None and info.state == "paused" and info.next_due is None
    # a worker start upserts the declaration again: the pause holds
    assert app.sync_schedules().unchanged == ["hb"]
    job_id = app.schedules.trigger("hb")
    (job,) = drain(q, 0.3)
    assert job.id == job_id and job_id.endswith(":run")
    resumed_at = time.time()
    next_due = app.schedules.resume("hb")
    assert next_due is not None and next_due > resumed_at - 0.05
    jobs = drain(q, 0.7)
    assert jobs and all(tick_of(j) / 1000 > resumed_at - 0.05 for j in jobs)  # pause skipped
    app.schedules.remove("hb")
    assert app.schedules.get("hb") is None
    assert drain(q, 0.5) == []
    with pytest.raises(KeyError):
        app.schedules.pause("hb")


def test_overlap_skip_skips_ticks_while_the_last_run_is_unfinished(app: durq.App) -> None:
    app.schedule("slow", "tick", every=0.2, args=("log",), overlap="skip")
    app.sync_schedules()
    q = app.queue(app.default_queue)
    held = q.dequeue(wait=1.0, lease=5)
    assert held is not None
    assert drain(q, 0.9) == []  # ticks come while `held` runs: skipped
    info = app.schedules.get("slow")
    assert info is not None and info.skipped >= 3 and info.last_outcome == "active"
    q.release(held)
    after = drain(q, 0.5)
    assert after and tick_of(after[0]) > tick_of(held)


class FakeCron:
    """A TickSource with a tick every ``step`` ms (cron granularity is a minute; the
    engine does not care how ticks were computed)."""

    def __init__(self, step: int, count: int) -> None:
        self.step = step
        self.count = count

    def ticks(self, after_ms: int, now_ms: int, keep_past: int) -> tuple[list[int], int, int]:
        first = (after_ms // self.step + 1) * self.step
        past = list(range(first, now_ms + 1, self.step))
        kept = past[-keep_past:] if keep_past else []
        start = max(first, (now_ms // self.step + 1) * self.step)
        future = [start + i * self.step for i in range(self.count)]
        return kept + future, future[-1], len(past) - len(kept)


def test_cron_schedules_wait_for_a_refill_past_their_horizon(app: durq.App, redis_url: str) -> None:
    q = app.queue(app.default_queue)
    q.stats()  # connected, library loaded: the row is upserted at once after it is made
    schedule = app.schedule("c", "tick", cron="* * * * *", args=("log",))
    row = replace(schedule.row(), spec="fake-every-200")
    source = FakeCron(200, 3)
    assert q._run(ops.upsert(q.keys, row, source)) == "created"
    # the stored ticks but the last: once it is due, later ticks may be due too (the
    # horizon is passed) and only a refill can tell. Each of the two fires, or, when the
    # process stalled past the next one (seen once in a full suite), catch_up="latest"
    # fires the newer and counts the older missed. The last fires too when a dequeue
    # looks at the very millisecond of it (no later tick can be due then), as a consumer
    # that sleeps until the next due time may
    fired = drain(q, 1.0)
    info = app.schedules.get("c")
    assert info is not None and len(fired) >= 1 and len(fired) + info.missed in (2, 3)
    time.sleep(0.7)  # past the horizon, as after downtime with the ticks used up
    assert q.dequeue() is None  # the newest tick is unknown: nothing fires
    source.count = 64
    assert q._run(ops.refill(q.keys, lambda info: source)) == 1
    caught = q.dequeue_many(10)
    assert len(caught) == 1  # catch_up="latest": the newest missed tick
    q.release(caught[0])
    info = app.schedules.get("c")
    assert info is not None and info.missed >= 2 and info.stored_ticks > 30
    assert len(drain(q, 0.5)) >= 2  # and on it goes
    # a refill with a stale spec is ignored
    assert q._run(ops.refill(q.keys, lambda info: None)) == 0


def test_sharded_queue_pins_a_schedule_to_one_shard(redis_url: str, queue_name: str) -> None:
    app = build(redis_url, queue_name)
    app.shard(queue_name, 4)
    app.schedule("pinned", "tick", every=0.2, args=("log",))
    app.sync_schedules()
    home = pinned_queue(queue_name, "pinned", 4)
    for shard in app.shard_names(queue_name):
        q = app.queue(shard)
        found = q._run(ops.get(q.keys, ["pinned"]))
        assert bool(found) == (shard == home)
    assert app.schedules.get("pinned") is not None
    assert drain(app.queue(home), 0.5)
    app.close()


def test_end_at_and_code_removals(app: durq.App, redis_url: str, queue_name: str) -> None:
    app.schedule("brief", "tick", every=0.2, args=("log",), end_at=time.time() + 0.5)
    app.schedule("kept", "tick", every=60, args=("log",))
    app.sync_schedules()
    q = app.queue(app.default_queue)
    assert 1 <= len(drain(q, 0.9)) <= 3
    info = app.schedules.get("brief")
    assert info is not None and info.state == "ended"
    # a new version of the code without "brief": reported, removed only when asked
    newer = build(redis_url, queue_name)
    newer.schedule("kept", "tick", every=60, args=("log",))
    assert newer.sync_schedules().missing == [(queue_name, "brief")]
    report = newer.sync_schedules(remove_missing=True)
    assert report.removed == [(queue_name, "brief")]
    assert [i.name for i in newer.schedules.all()] == ["kept"]
    newer.close()
