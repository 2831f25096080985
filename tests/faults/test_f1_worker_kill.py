"""F1: worker processes killed with SIGKILL at random moments while they work.

20,000 jobs, 4 ``durq worker`` processes (10 jobs at once each, lease 1 s); every
~0.5 s a random one is killed and a fresh one started in its place. Every job must
complete at least once, nothing may be left pending, active or stuck, the duplicate
runs must not exceed the jobs the killed workers could have had in hand (10 per kill),
and no completion may be accepted from a holder whose lease was taken over.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable

import pytest

from faults.checker import kill_recovery
from faults.harness import jitter
from faults.ledger import read_ledger
from faults.scene import Scene

pytestmark = [pytest.mark.fault, pytest.mark.slow]

JOBS = 20_000
WORKERS = 4
CONCURRENCY = 10
LEASE = 1.0
KILL_EVERY = 0.5
TIME_LIMIT = 100.0  # under the suite's per-test timeout (120 s)


def test_f1_workers_killed_at_random_moments_lose_nothing(
    scene: Callable[..., Scene],
) -> None:
    seed = int(os.environ.get("DURQ_FAULT_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    s = scene(concurrency=CONCURRENCY, lease=LEASE)
    queue, fleet = s.queue, s.fleet
    slots = s.workers(WORKERS)

    began = time.monotonic()
    # 20,000 jobs over ~12 s (the workers keep up), each a few ms of asyncio sleep, so
    # that kills find jobs in every stage: fetched, running, finished but not acked
    producer = s.producer(
        range(JOBS),
        batch=100,
        pause=0.06,
        seconds=lambda seq: (seq * 7919 % 10) / 1000,
    )
    producer.start()
    kills = 0
    while producer.is_alive() or queue.stats().size > 0:
        time.sleep(jitter(KILL_EVERY, KILL_EVERY / 2, rng))
        if time.monotonic() - began > TIME_LIMIT:
            pytest.fail(f"not drained after {TIME_LIMIT} s: {queue.stats()}\n{fleet.outputs()}")
        slot = rng.randrange(WORKERS)
        fleet.kill(slots[slot])
        kills += 1
        slots[slot] = fleet.spawn()
    producer.finish()
    s.drain()
    elapsed = time.monotonic() - began
    fleet.stop()

    report = s.check("F1")
    delays, unexplained = kill_recovery(read_ledger(s.ledger).runs, fleet.killed_pids())
    bound = CONCURRENCY * kills
    report.refused_acks = fleet.grep("refused") + fleet.grep("lease lost")
    report.figures.update(
        kills=kills,
        dup_bound=bound,
        extra_runs=report.extra_runs,
        unexplained_dup=unexplained,
        reclaimed=report.stats_reclaimed,
        resume_s=round(max(delays), 2) if delays else 0.0,
        resume_p50_s=round(statistics.median(delays), 2) if delays else 0.0,
        run_s=round(elapsed, 1),
        jobs_per_s=round(JOBS / elapsed),
        seed=seed,
    )
    s.verdict(
        report,
        f"only {report.jobs} of {JOBS} enqueued" if report.jobs != JOBS else "",
        f"dead-lettered: {report.dead}" if report.dead else "",
        f"duplicates {report.duplicated} > {bound}" if report.duplicated > bound else "",
        f"kills={kills}: too few to mean anything" if kills < 5 else "",
    )
