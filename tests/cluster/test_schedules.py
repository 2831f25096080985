"""Periodic schedules on the local Redis Cluster (3 primaries): two ``durq worker``
processes fire each tick of a plain and of a sharded queue exactly once, a schedule's
state lives in its queue's (its pinned shard's) slot, and runtime control works through
the API and the CLI with a ``redis+cluster://`` URL.

The schedule suite's fixtures (``app``, ``workers``, ``log_path``) are reused: in this
directory ``redis_url`` is the cluster's URL (conftest.py)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import durq
from cli.support import durq_at
from durq.app.schedule_spec import pinned_queue
from durq.cron import timing_of
from durq.dev.topology import LocalCluster
from durq.keys import QueueKeys
from durq.protocol import schedules as ops
from helpers import SLACK, eventually
from schedules.apps import build, read_log
from schedules.conftest import log_path, workers
from worker.support import DurqProcess

__all__ = ["log_path", "workers"]

pytestmark = pytest.mark.slow

EVERY = 0.2
EVERY_MS = round(EVERY * 1000)
SHARDS = 3


@pytest.fixture(params=[0, SHARDS], ids=["plain", "sharded"])
def shards(request: pytest.FixtureRequest) -> int:
    count: int = request.param
    return count


@pytest.fixture
def app(redis_url: str, queue_name: str, shards: int) -> Iterator[durq.App]:
    """The schedule tests' App on the cluster; its queue sharded when ``shards``."""
    test_app = build(redis_url, queue_name, shards=shards)
    yield test_app
    test_app.close()


def home(app: durq.App, name: str) -> str:
    """The queue (or shard) that holds schedule ``name`` of the app's queue."""
    return pinned_queue(app.default_queue, name, app.shards.get(app.default_queue, 0))


def tick_of(job_id: str, name: str) -> int:
    """The tick (ms) of a tick's job id ``sched:<name>@<ms>``."""
    prefix = f"sched:{name}@"
    assert job_id.startswith(prefix), job_id
    return int(job_id[len(prefix) :])


def starts(log: str, name: str) -> list[dict[str, Any]]:
    return [e for e in read_log(log) if e["event"] == "start" and e["schedule"] == name]


def fired(app: durq.App, name: str) -> int:
    info = app.schedules.get(name, app.default_queue)
    return info.fired if info is not None else -1


def assert_state_in_the_queue_slot(cluster: LocalCluster, raw: Any, queue: str, name: str) -> None:
    """The schedule's hash exists under the queue's prefix, in the queue's slot."""
    keys = QueueKeys(queue, shard_count=SHARDS if "~" in queue else 0)
    state = f"{keys.prefix}sch:{name}"
    assert raw.exists(state) == 1
    slot = raw.keyslot(state)
    assert slot == raw.keyslot(keys.vector[1]) == raw.keyslot(keys.prefix + "sched")
    assert cluster.owner(state)["id"] == cluster.owner(keys.vector[1])["id"]


def test_two_workers_fire_each_tick_exactly_once(
    app: durq.App,
    workers: Callable[..., DurqProcess],
    log_path: str,
    shards: int,
    cluster: LocalCluster,
    raw: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = [{"name": "hb", "every": EVERY, "args": [log_path], "catch_up": "all"}]
    fleet = [workers(spec, shards=shards) for _ in range(2)]

    def output() -> str:
        return "\n".join(w.output() for w in fleet)

    # about 2.5 s of ticks once the first ran, however slow the workers were to start
    eventually(lambda: starts(log_path, "hb"), 20 + SLACK, output)
    eventually(lambda: fired(app, "hb") >= 12, 2.4 + 10 * SLACK, output)
    app.schedules.pause("hb", app.default_queue)
    total = fired(app, "hb")
    eventually(lambda: len({e["job"] for e in starts(log_path, "hb")}) >= total, 10, output)
    assert all(w.alive() for w in fleet), output()

    events = starts(log_path, "hb")
    per_job = Counter(e["job"] for e in events)
    ticks = sorted(tick_of(job, "hb") for job in per_job)
    with capsys.disabled():
        pids = Counter(e["pid"] for e in events)
        print(f"\ncluster {'sharded' if shards else 'plain'}: {len(ticks)} ticks, "
              f"{len(events)} runs, runs per worker {sorted(pids.values())}")  # fmt: skip
    assert [job for job, n in per_job.items() if n > 1] == []  # no job ran twice
    assert len(ticks) == total  # one job per tick fired: none duplicated
    assert ticks == list(range(ticks[0], ticks[-1] + EVERY_MS, EVERY_MS))  # none missing
    for e in events:
        assert e["job"] == f"sched:hb@{round(e['tick'] * 1000)}"
        assert e["queue"] == home(app, "hb")
    info = app.schedules.get("hb", app.default_queue)
    assert info is not None and info.queue == home(app, "hb")
    assert (info.skipped, info.missed) == (0, 0)
    assert_state_in_the_queue_slot(cluster, raw, home(app, "hb"), "hb")


def test_runtime_control_through_the_api(
    app: durq.App,
    workers: Callable[..., DurqProcess],
    log_path: str,
    shards: int,
) -> None:
    name = "ctl"
    spec = [{"name": name, "every": EVERY, "args": [log_path]}]
    worker = workers(spec, shards=shards)
    q = app.default_queue
    eventually(lambda: fired(app, name) >= 2, 20 + SLACK, worker.output)

    listed = {(i.queue, i.name): i for i in app.schedules.all()}
    assert (home(app, name), name) in listed
    assert listed[home(app, name), name].every == EVERY

    app.schedules.pause(name, q)
    paused = app.schedules.get(name, q)
    assert paused is not None and paused.paused and paused.next_due is None
    time.sleep(5 * EVERY)  # five ticks' time: none of them fires
    again = app.schedules.get(name, q)
    assert again is not None and again.fired == paused.fired
    assert again.watermark == paused.watermark

    job_id = app.schedules.trigger(name, q)
    assert job_id.startswith(f"sched:{name}@") and job_id.endswith(":run")
    eventually(lambda: job_id in {e["job"] for e in starts(log_path, name)}, 5 + SLACK,
               worker.output)  # fmt: skip
    ran = [e for e in starts(log_path, name) if e["job"] == job_id]
    assert ran[0]["queue"] == home(app, name)

    due = app.schedules.resume(name, q)
    assert due is not None and due > paused.server_time + 5 * EVERY
    after_trigger = fired(app, name)
    eventually(lambda: fired(app, name) >= after_trigger + 2, 3 * EVERY + 2 * SLACK,
               worker.output)  # fmt: skip

    app.schedules.remove(name, q)
    assert app.schedules.get(name, q) is None
    assert name not in {i.name for i in app.schedules.all()}
    with pytest.raises(KeyError, match=name):
        app.schedules.pause(name, q)


def test_cron_ticks_are_refilled_in_the_queue_slot(
    app: durq.App, cluster: LocalCluster, raw: Any
) -> None:
    """The refill a worker runs each heartbeat (a list, then the refills pipelined in
    the queue's slot) stores the next ticks of the cron schedules that ask for them."""
    names = ["c1", "c2"]
    for name in names:
        app.schedule(name, "add", cron="*/5 * * * *", args=(1,))
    app.sync_schedules()
    for name in names:
        queue = home(app, name)
        q = app.queue(queue)
        assert_state_in_the_queue_slot(cluster, raw, queue, name)
        before = app.schedules.get(name, app.default_queue)
        assert before is not None and before.stored_ticks > 0
        raw.zadd(q.keys.prefix + "srefill", {name: 0})  # ask for a refill now
        assert q._run(ops.refill(q.keys, timing_of)) >= 1
        after = app.schedules.get(name, app.default_queue)
        assert after is not None and after.stored_ticks > before.stored_ticks
        assert after.next_due == before.next_due


def test_cli_lists_and_controls_schedules(app: durq.App, redis_url: str, shards: int) -> None:
    q = app.default_queue
    app.schedule("hb", "tick", every=30, args=("log",))
    app.schedule("nightly", "add", cron="0 3 * * *", tz="Europe/Berlin", args=(1,))
    app.sync_schedules()

    listed = durq_at(redis_url, "schedules", "list", "-q", q)
    assert listed.code == 0, listed
    rows = {line.split()[1]: line.split()[0] for line in listed.stdout.splitlines()
            if line.strip().startswith(q)}  # fmt: skip
    assert rows == {"hb": home(app, "hb"), "nightly": home(app, "nightly")}
    everything = durq_at(redis_url, "schedules", "list")  # every known queue
    assert everything.code == 0, everything
    assert home(app, "nightly") in everything.stdout

    paused = durq_at(redis_url, "schedules", "pause", "hb", "-q", q)
    assert paused.code == 0, paused
    info = app.schedules.get("hb", q)
    assert info is not None and info.paused
    triggered = durq_at(redis_url, "schedules", "trigger", "nightly", "-q", q)
    assert triggered.code == 0 and "sched:nightly@" in triggered.stdout, triggered
    assert durq_at(redis_url, "schedules", "remove", "hb", "-q", q).code == 0
    assert app.schedules.get("hb", q) is None
