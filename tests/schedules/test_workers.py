"""Schedules with real ``durq worker`` processes: many workers and concurrent upserts,
SIGKILLs during ticks, all workers down for several ticks. The figures (ticks expected,
fired, duplicated; the delay from a tick to its job's start) are printed."""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

import durq
from helpers import eventually
from schedules.apps import build, read_log
from worker.support import DurqProcess

EVERY = 0.2


def report(log_path: str, app: durq.App, name: str) -> dict[str, Any]:
    """Ticks expected (the grid from the first to the last tick fired), fired (jobs),
    duplicated (a tick with more than one job), runs, and start delays."""
    events = read_log(log_path)
    jobs_by_tick: dict[float, set[str]] = defaultdict(set)
    first_start: dict[str, float] = {}
    finished = {e["job"] for e in events if e["event"] == "finish"}
    for e in events:
        if e["event"] == "start":
            jobs_by_tick[e["tick"]].add(e["job"])
            first_start.setdefault(e["job"], e["time"] - e["tick"])
    ticks = sorted(jobs_by_tick)
    step = round((ticks[1] - ticks[0]) * 1000) if len(ticks) > 1 else 0
    expected = round((ticks[-1] - ticks[0]) * 1000 / step) + 1 if step else len(ticks)
    delays = sorted(first_start.values())
    info = app.schedules.get(name, app.default_queue)
    assert info is not None
    return {
        "expected": expected,
        "fired": info.fired,
        "ticks_with_a_job": len(ticks),
        "duplicated": sum(len(j) - 1 for j in jobs_by_tick.values()),
        "unfinished": len(set(first_start) - finished),
        "runs": sum(1 for e in events if e["event"] == "start"),
        "p50_ms": round(1000 * statistics.median(delays), 1),
        "p99_ms": round(1000 * delays[min(len(delays) - 1, int(0.99 * len(delays)))], 1),
        "max_ms": round(1000 * delays[-1], 1),
    }


def wait_all_finished(log_path: str, app: durq.App, name: str, timeout: float = 15) -> None:
    def done() -> bool:
        info = app.schedules.get(name, app.default_queue)
        events = read_log(log_path)
        finished = {e["job"] for e in events if e["event"] == "finish"}
        return info is not None and len(finished) >= info.fired

    eventually(done, timeout, "every fired tick's job finished")


def test_many_workers_and_concurrent_upserts_fire_each_tick_once(
    app: durq.App,
    workers: Callable[..., DurqProcess],
    log_path: str,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = [{"name": "hb", "every": EVERY, "args": [log_path], "catch_up": "all"}]
    fleet = [workers(spec) for _ in range(3)]
    stop = threading.Event()
    upserts = [0]

    def upsert_forever() -> None:
        other = build(redis_url, app.default_queue)
        while not stop.is_set():
            other.schedules.declared.clear()
            other.schedule("hb", "tick", every=EVERY, args=[log_path], catch_up="all",
                           kwargs={"tag": str(upserts[0] % 2)})  # fmt: skip
            other.sync_schedules()
            upserts[0] += 1
            time.sleep(0.01)
        other.close()

    threads = [threading.Thread(target=upsert_forever) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        time.sleep(2.5)
        fleet[0].kill()  # a restart upserts the declaration again
        fleet.append(workers(spec))
        time.sleep(2.5)
    finally:
        stop.set()
        for t in threads:
            t.join()
    app.schedules.pause("hb", app.default_queue)
    wait_all_finished(log_path, app, "hb")
    figures = report(log_path, app, "hb")
    with capsys.disabled():
        print(f"\nmulti-worker every={EVERY}: {figures}, upserts={upserts[0]}")
    assert figures["duplicated"] == 0
    assert figures["expected"] == figures["ticks_with_a_job"] == figures["fired"]
    assert figures["expected"] >= 15
    assert upserts[0] >= 20


def test_sigkills_during_ticks_lose_and_duplicate_no_tick(
    app: durq.App,
    workers: Callable[..., DurqProcess],
    log_path: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = [{"name": "hb", "every": EVERY, "args": [log_path], "catch_up": "all",
             "kwargs": {"sleep": 0.3}}]  # fmt: skip
    fleet = [workers(spec, 1.0) for _ in range(3)]
    rng = random.Random(14)
    kills = 6

    def in_a_job() -> set[tuple[int, str]]:
        """(pid, job) of the runs started and not finished: on a loaded machine a worker
        picked blindly may not have started yet."""
        events = read_log(log_path)
        started = {(e["pid"], e["job"]) for e in events if e["event"] == "start"}
        return started - {(e["pid"], e["job"]) for e in events if e["event"] == "finish"}

    killed: set[tuple[int, str]] = set()  # the runs the kills interrupted
    for _ in range(kills):
        time.sleep(0.5)
        busy = eventually(lambda: {w.pid for w in fleet} & {p for p, _ in in_a_job()}, 30)
        pid = rng.choice(sorted(busy))  # drawn once, not once per worker compared
        victim = next(w for w in fleet if w.pid == pid)
        fleet.remove(victim)
        victim.kill()  # SIGKILL in the middle of a tick's job (unless it just finished)
        killed |= {run for run in in_a_job() if run[0] == victim.pid}
        fleet.append(workers(spec, 1.0))
    app.schedules.pause("hb", app.default_queue)
    wait_all_finished(log_path, app, "hb", timeout=20)
    figures = report(log_path, app, "hb")
    with capsys.disabled():
        print(f"\nsigkill every={EVERY}: {figures}")
    assert figures["duplicated"] == 0
    assert figures["expected"] == figures["ticks_with_a_job"] == figures["fired"]
    assert figures["unfinished"] == 0
    # each interrupted run ran again: at-least-once
    assert killed and figures["runs"] >= figures["fired"] + len(killed)


@pytest.mark.parametrize(
    ("catch_up", "cap", "expect"),
    [
        ("latest", 100, lambda n: 1),
        ("all", 3, lambda n: min(n, 3)),
        ("all", 100, lambda n: n),
        ("none", 100, lambda n: 0),
    ],
    ids=["latest", "all-cap3", "all", "none"],
)
def test_all_workers_down_for_n_ticks(
    app: durq.App,
    workers: Callable[..., DurqProcess],
    log_path: str,
    catch_up: str,
    cap: int,
    expect: Callable[[int], int],
) -> None:
    every, down = 0.5, 5
    spec = [{"name": "d", "every": every, "args": [log_path], "catch_up": catch_up,
             "max_catch_up": cap}]  # fmt: skip
    worker = workers(spec)
    eventually(lambda: len(read_log(log_path)) >= 4, 10, worker.output)  # 2 ticks ran
    worker.kill()
    before = app.schedules.get("d", app.default_queue)
    assert before is not None
    # come back 0.7 of a period after the down-th missed tick: late beyond the grace of
    # catch_up="none" (half a period), early enough to miss no more. The first dequeue
    # is the test's own (the same script a worker runs first), for a precise moment.
    back = before.watermark + (down + 0.7) * every
    time.sleep(max(0.0, back - time.time()))
    q = app.queue(app.default_queue)
    for job in q.dequeue_many(200):
        q.release(job)
    after = app.schedules.get("d", app.default_queue)
    assert after is not None
    n = round((after.watermark - before.watermark) / every)
    assert n == down
    assert after.fired - before.fired == expect(n)
    assert after.missed - before.missed == n - expect(n)
