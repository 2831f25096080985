"""Catching up after downtime: the ticks a policy decides to fire are spread over dequeue
calls (none runs long), each fires once, and the decision holds however long the
catch-up takes (docs/schedules.md, "Downtime, slow runs")."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict

import redis

import durq
from durq.app.schedule_spec import schedule_job_id

EVERY_MS = 100


def declare_behind(app: durq.App, redis_url: str, backlogs: dict[str, int]) -> None:
    """Declare an ``every=0.1`` schedule per name, catch_up="all" up to 1,000 ticks, whose
    last handled tick lies ``backlogs[name]`` ticks back: as after that much downtime."""
    for name in backlogs:
        app.schedule(name, "add", every=EVERY_MS / 1000, args=(1,), catch_up="all",
                     max_catch_up=1000, start_at=time.time() - 200)  # fmt: skip
    app.sync_schedules()
    q = app.queue(app.default_queue)
    r = redis.Redis.from_url(redis_url)
    now = int(r.time()[0]) * 1000
    for name, behind in backlogs.items():
        wm = now - behind * EVERY_MS
        r.hset(q.keys.prefix + f"sch:{name}", "wm", wm)
        r.zadd(q.keys.prefix + "sched", {name: wm + 1})
    r.close()


def drain_ticks(q: durq.Queue) -> dict[str, list[int]]:
    """Dequeue and release until nothing is ready; the ticks of each schedule's jobs."""
    ticks: dict[str, list[int]] = defaultdict(list)
    while jobs := q.dequeue_many(500):
        q.release_many(jobs)
        for job in jobs:
            meta = job.payload[3]
            assert job.id == schedule_job_id(meta["schedule"], meta["tick"] / 1000)
            ticks[meta["schedule"]].append(meta["tick"])
    return ticks


def test_a_catch_up_is_spread_over_calls_and_fires_each_newest_tick_once(
    app: durq.App, redis_url: str
) -> None:
    """Issue 30 bug 10: one dequeue fired every due tick of every schedule (100
    schedules with 1,000 ticks each ran 1.7 s of server time in one call)."""
    names = [f"s{i}" for i in range(20)]
    declare_behind(app, redis_url, {name: 1200 for name in names})
    q = app.queue(app.default_queue)
    first = q.dequeue_many(1)
    assert len(first) == 1
    assert 0 < q.stats().ticks_fired < 2000  # of about 20,000 to fire
    q.release_many(first)
    ticks = drain_ticks(q)
    first_meta = first[0].payload[3]
    ticks[first_meta["schedule"]].append(first_meta["tick"])
    for name in names:
        fired = sorted(ticks[name])
        assert len(fired) == len(set(fired)) >= 1000  # each tick once
        # the newest 1,000 of the backlog, then the ticks due meanwhile: no gap
        assert all(b - a == EVERY_MS for a, b in itertools.pairwise(fired))
        info = app.schedules.get(name)
        assert info is not None and info.fired == len(fired)
        assert 200 <= info.missed <= 210  # the backlog's oldest ticks beyond 1,000


def test_every_due_schedule_is_decided_when_first_read_so_none_loses_ticks_waiting(
    app: durq.App, redis_url: str
) -> None:
    """Each schedule's decision (which ticks fire, which are missed) is made when a call
    first reads it, not when its turn to fire comes: ticks that fall due while the
    others catch up do not push a backlog under max_catch_up past it."""
    backlogs = {**{f"over{i}": 1100 for i in range(15)}, "under": 950}
    declare_behind(app, redis_url, backlogs)
    q = app.queue(app.default_queue)
    first = q.dequeue_many(1)
    q.release_many(first)
    assert q.stats().ticks_fired < 2000  # of about 16,000
    for i in range(15):  # all decided already: their oldest 100 ticks are missed
        info = app.schedules.get(f"over{i}")
        assert info is not None and 100 <= info.missed <= 110
    ticks = drain_ticks(q)
    ticks[first[0].payload[3]["schedule"]].append(first[0].payload[3]["tick"])
    under = app.schedules.get("under")
    assert under is not None and under.missed == 0  # a backlog under max_catch_up: all fire
    for name, behind in backlogs.items():
        assert len(ticks[name]) == len(set(ticks[name])) >= min(behind, 1000)
