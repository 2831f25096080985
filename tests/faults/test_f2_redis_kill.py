"""F2: the Redis server killed with SIGKILL and restarted (same port and directory) while
producers enqueue and workers run, with ``appendonly yes`` and ``appendfsync always``.

No job whose enqueue returned may be lost, and every producer and worker must carry on
by itself (no restart, no intervention) within 10 s of the server being back.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from faults.ledger import read_ledger
from faults.scene import Scene
from helpers import FLAVOR_IDS, eventually, flavor_params

pytestmark = [pytest.mark.fault, pytest.mark.slow]

PRODUCERS = 2
WORKERS = 2
CONCURRENCY = 8
KILLS = 4
RESUME_BOUND = 10.0


def _resumed(ledger: Path, since: float, producers: list[str], pids: list[int]) -> dict[str, float]:
    """For each producer and worker that succeeded since ``since``: seconds until its
    first success (an enqueue that returned; a job handed out and started)."""
    view = read_ledger(ledger)
    first: dict[str, float] = {}
    for e in view.enqs:
        if e.kind == "ENQ_OK" and e.time >= since and e.producer in producers:
            first[e.producer] = min(first.get(e.producer, e.time), e.time)
    for r in view.runs:
        if r.kind == "START" and r.time >= since and r.pid in pids:
            key = f"worker-{r.pid}"
            first[key] = min(first.get(key, r.time), r.time)
    return {k: t - since for k, t in first.items()}


@pytest.mark.parametrize("flavor", flavor_params())
def test_f2_redis_killed_and_restarted_with_appendfsync_always_loses_no_acknowledged_job(
    flavor: str,
    scene: Callable[..., Scene],
) -> None:
    rng = random.Random()
    s = scene(flavor, concurrency=CONCURRENCY, lease=1.0, appendonly=True, appendfsync="always")
    server, fleet = s.server, s.fleet
    workers = s.workers(WORKERS)
    names = [f"p{i}" for i in range(PRODUCERS)]
    producers = [
        s.producer(
            range(i * 1_000_000, (i + 1) * 1_000_000),
            name=name,
            batch=5,
            pause=0.01,
            seconds=lambda seq: (seq % 5) / 100,
        )
        for i, name in enumerate(names)
    ]
    for p in producers:
        p.start()
    pids = [w.pid for w in workers]
    everyone = len(names) + len(pids)

    downtimes, resumes = [], []
    time.sleep(1.5)
    for _ in range(KILLS):
        killed_at = time.time()
        server.kill()
        time.sleep(rng.uniform(0.1, 1.0))
        server.start()
        back = time.time()
        downtimes.append(back - killed_at)

        def everyone_resumed(since: float = back) -> dict[str, float] | None:
            found = _resumed(s.ledger, since, names, pids)
            return found if len(found) == everyone else None

        resumed = eventually(
            everyone_resumed,
            RESUME_BOUND,
            lambda: f"{everyone_resumed() or 'not all resumed'}\n{fleet.outputs()}",
        )
        resumes.append(max(resumed.values()))
        time.sleep(rng.uniform(1.0, 2.0))
    for p in producers:
        p.stop()
    for p in producers:
        p.finish()
    s.drain()
    assert all(w.alive() for w in workers), fleet.outputs()
    fleet.stop()

    report = s.check(f"F2-{FLAVOR_IDS[flavor]}")
    report.refused_acks = fleet.grep("refused") + fleet.grep("lease lost")
    report.figures.update(
        kills=KILLS,
        dup_bound=WORKERS * CONCURRENCY * KILLS,
        resume_s=round(max(resumes), 2),
        resume_each_s=[round(r, 2) for r in resumes],
        down_s=[round(d, 2) for d in downtimes],
        enq_retried_exists=report.enq_exists,
        reclaimed=report.stats_reclaimed,
        appendfsync="always",
        server=f"{server.flavor} {'.'.join(map(str, server.version))}",
    )
    # a run is repeated only if its release was lost with the server: at most the jobs
    # each worker had in hand at each kill
    bound = WORKERS * CONCURRENCY * KILLS
    s.verdict(
        report,
        f"dead-lettered: {report.dead}" if report.dead else "",
        f"duplicates {report.duplicated} > {bound}" if report.duplicated > bound else "",
    )
