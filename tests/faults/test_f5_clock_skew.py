"""F5: clients whose clocks are 300 s behind or ahead change nothing.

Workers and producers run under libfaketime, half at -300 s and half at +300 s (every
clock of the process, wall and monotonic). durq computes leases, delays and retention
from the server's TIME inside its scripts, so:

- jobs that run longer than the 5 s lease (extended by their workers) are never
  reclaimed early: no reclaim and no duplicate without faults;
- delayed jobs fire on the server's clock, neither at once (+300 s) nor 5 min late
  (-300 s), and on time: they are enqueued just after the long jobs, when the workers'
  waits were planned while those jobs finished (a stale plan blocked for MAX_BLOCK,
  5 s, before the fix in durq.worker.pump).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from faults.harness import run_producer, skewed
from faults.ledger import Run, read_ledger
from faults.scene import Scene

pytestmark = [pytest.mark.fault, pytest.mark.slow]

OFFSETS = (-300, 300)
LEASE = 5.0
LONG_JOBS = 30  # per producer, each 1 to 7 s (some beyond the lease: extended)
DELAYED_JOBS = 20  # per producer
DELAY = 2.0
LATE_BOUND = 1.0  # seconds after its due time (server clock) a delayed job may start


def test_f5_client_clocks_300s_off_change_nothing(
    scene: Callable[..., Scene],
) -> None:
    envs = {offset: skewed(offset) for offset in OFFSETS}  # skips without libfaketime
    s = scene(concurrency=20, lease=LEASE)
    fleet = s.fleet
    workers = {fleet.spawn(env=envs[o], label=f"{o:+d}s/{i}"): o for o in OFFSETS for i in (0, 1)}
    fleet.wait_ready(workers)

    # phase 1: long jobs, enqueued by skewed producers, run by skewed workers
    for i, offset in enumerate(OFFSETS):
        first = str(i * 10_000)
        run_producer(s.url, s.name, s.ledger, "--name", f"p{offset:+d}", "--first",
                     first, "--count", str(LONG_JOBS), "--batch", "10", "--seconds", "1,7",
                     env=envs[offset])  # fmt: skip
    s.drain()
    # phase 2: delayed jobs, due DELAY s after their enqueue on the server's clock
    for i, offset in enumerate(OFFSETS):
        first = str(100_000 + i * 10_000)
        run_producer(s.url, s.name, s.ledger, "--name", f"d{offset:+d}", "--first",
                     first, "--count", str(DELAYED_JOBS), "--batch", "5", "--seconds", "0",
                     "--delay", str(DELAY), env=envs[offset])  # fmt: skip
    s.drain()
    fleet.stop()

    report = s.check("F5")
    view = read_ledger(s.ledger)
    starts = view.of("START")
    first_start: dict[str, Run] = {}
    for r in starts:
        if r.id not in first_start or r.delivery < first_start[r.id].delivery:
            first_start[r.id] = r
    # the skew took effect: each process's wall clock vs. the server's, at the moments
    # it wrote a ledger line (a worker: just after the dequeue; a producer: just after
    # the enqueue returned)
    skews: dict[str, float] = {}
    ran: set[int] = set()  # the offsets with a worker that ran a job
    for w, offset in workers.items():
        seen = [r.time - r.dequeued_at for r in starts if r.pid == w.pid]
        if seen:  # a worker the others left no job to (a loaded machine) tells nothing
            skews[f"worker {w.label}"] = min(seen) - offset
            ran.add(offset)
    for e in view.enqs:
        if e.kind == "ENQ_OK" and e.id in first_start:
            offset = int(e.producer[1:])
            seen_skew = e.time - first_start[e.id].enqueued_at - offset
            key = f"producer {e.producer}"
            skews[key] = min(skews.get(key, seen_skew), seen_skew)
    off_by = {k: round(v, 2) for k, v in skews.items() if abs(v) > 2.0}
    producers = sum(k.startswith("producer") for k in skews)
    late = [
        first_start[e.id].dequeued_at - (first_start[e.id].enqueued_at + e.delay)
        for e in view.enqs
        if e.kind == "ENQ_OK" and e.delay and e.id in first_start
    ]
    report.figures.update(
        offsets_s=list(OFFSETS),
        reclaimed=report.stats_reclaimed,
        delayed=len(late),
        late_min_s=round(min(late), 3),
        late_max_s=round(max(late), 3),
        clients=len(skews),
    )
    s.verdict(
        report,
        f"dead-lettered: {report.dead}" if report.dead else "",
        f"duplicates without faults: {report.duplicated}" if report.duplicated else "",
        f"leases reclaimed early: {report.stats_reclaimed}" if report.stats_reclaimed else "",
        f"delayed jobs fired early: {min(late):.3f} s" if min(late) < -0.002 else "",
        f"delayed jobs fired late: {max(late):.3f} s" if max(late) > LATE_BOUND else "",
        f"the skew did not take (seconds off the intended offset): {off_by}" if off_by else "",
        f"no worker at {sorted(set(OFFSETS) - ran)} s ran a job" if ran != set(OFFSETS) else "",
        f"skew measured for {producers} producers, not 4" if producers != 4 else "",
        f"only {len(late)} delayed jobs ran" if len(late) != 2 * DELAYED_JOBS else "",
    )
