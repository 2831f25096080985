"""F4: the Redis server frozen (SIGSTOP) for three times the lease, then resumed
(SIGCONT), three times, while producers and workers run.

While it is frozen the server's clock runs on, so every lease in hand expires; when it
resumes, the waiting dequeues reclaim those jobs and hand them out again while the
holders' releases and extensions are still queued. The holders must be refused (no
completion accepted twice), no process may crash, and all must carry on.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from faults.ledger import read_ledger
from faults.scene import Scene
from helpers import eventually

pytestmark = [pytest.mark.fault, pytest.mark.slow]

LEASE = 1.0
PAUSE = 3.0  # > LEASE
PAUSES = 3
WORKERS = 3
CONCURRENCY = 8


def test_f4_redis_paused_longer_than_the_lease_accepts_no_double_completion(
    scene: Callable[..., Scene],
) -> None:
    rng = random.Random()
    s = scene(concurrency=CONCURRENCY, lease=LEASE)
    server, fleet = s.server, s.fleet
    workers = s.workers(WORKERS)
    # jobs of 0-400 ms: when the server freezes, most workers hold running jobs that
    # finish during the pause, their releases waiting on the frozen server
    producer = s.producer(
        range(1_000_000),
        batch=5,
        pause=0.02,
        seconds=lambda seq: (seq % 5) / 10,
    )
    producer.start()
    pids = {w.pid for w in workers}

    resumes = []
    time.sleep(1.5)
    for _ in range(PAUSES):
        server.pause()
        time.sleep(PAUSE)
        server.resume()
        back = time.time()

        def everyone_resumed(since: float = back) -> bool:
            view = read_ledger(s.ledger)
            started = {r.pid for r in view.runs if r.kind == "START" and r.time > since}
            enqueued = any(e.kind == "ENQ_OK" and e.time > since for e in view.enqs)
            return started >= pids and enqueued

        eventually(everyone_resumed, 10, fleet.outputs)
        resumes.append(time.time() - back)
        time.sleep(rng.uniform(1.0, 2.0))
    producer.stop()
    producer.finish()
    s.drain()
    crashed = [w for w in workers if not w.alive()]
    fleet.stop()

    report = s.check("F4")
    report.refused_acks, false_alarms = fleet.fencing_alarms(read_ledger(s.ledger))
    report.figures.update(
        pauses=PAUSES,
        dup_bound=WORKERS * CONCURRENCY * PAUSES,
        pause_s=PAUSE,
        lease_s=LEASE,
        reclaimed=report.stats_reclaimed,
        refused_acks=report.refused_acks,
        resent_acks=fleet.grep("sent again after a lost reply"),
        resume_s=round(max(resumes), 2),
    )
    bound = WORKERS * CONCURRENCY * PAUSES
    s.verdict(
        report,
        # a refusal logged as a lost lease must be one: the job was handed out again
        f"false lease-lost warnings: {false_alarms[:3]}" if false_alarms else "",
        f"workers crashed: {crashed}" if crashed else "",
        f"dead-lettered: {report.dead}" if report.dead else "",
        # the pauses outlast the lease: the workers must have seen leases taken over
        "no lease was reclaimed" if report.stats_reclaimed == 0 else "",
        # only the jobs in hand when the server froze can run twice
        f"duplicates {report.duplicated} > {bound}" if report.duplicated > bound else "",
    )
