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
from pathlib import Path

import pytest
import redis

import durq
from durq.dev.server import RedisServer
from faults.harness import (
    Fleet,
    Producer,
    assert_clean,
    check,
    drain,
    read_ledger,
    record_results,
)
from helpers import eventually

pytestmark = [pytest.mark.fault, pytest.mark.slow]

LEASE = 1.0
PAUSE = 3.0  # > LEASE
PAUSES = 3
WORKERS = 3
CONCURRENCY = 8


def test_f4_redis_paused_longer_than_the_lease_accepts_no_double_completion(
    make_server: Callable[..., RedisServer],
    fleet_factory: Callable[..., Fleet],
    observe: Callable[[RedisServer], tuple[durq.Queue, redis.Redis]],
    ledger: Path,
    fault_queue: str,
    tmp_path: Path,
    results_file: Path,
) -> None:
    rng = random.Random()
    server = make_server()
    queue, client = observe(server)
    fleet = fleet_factory(server.url, concurrency=CONCURRENCY, lease=LEASE)
    workers = [fleet.spawn() for _ in range(WORKERS)]
    fleet.wait_ready(workers)
    # jobs of 0-400 ms: when the server freezes, most workers hold running jobs that
    # finish during the pause, their releases waiting on the frozen server
    producer = Producer(
        server.url,
        fault_queue,
        ledger,
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
            view = read_ledger(ledger)
            started = {r.pid for r in view.runs if r.kind == "START" and r.time > since}
            enqueued = any(e.kind == "ENQ_OK" and e.time > since for e in view.enqs)
            return started >= pids and enqueued

        eventually(everyone_resumed, 10, fleet.outputs)
        resumes.append(time.time() - back)
        time.sleep(rng.uniform(1.0, 2.0))
    producer.stop()
    producer.finish()
    drain(queue, 30, fleet.outputs)
    crashed = [w for w in workers if not w.alive()]
    fleet.stop()

    report = check("F4", ledger, queue, client)
    report.refused_acks, false_alarms = fleet.fencing_alarms(read_ledger(ledger))
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
    record_results(tmp_path, report, results_file)
    bound = WORKERS * CONCURRENCY * PAUSES
    assert_clean(
        report,
        fleet.outputs,
        # a refusal logged as a lost lease must be one: the job was handed out again
        f"false lease-lost warnings: {false_alarms[:3]}" if false_alarms else "",
        f"workers crashed: {crashed}" if crashed else "",
        f"dead-lettered: {report.dead}" if report.dead else "",
        # the pauses outlast the lease: the workers must have seen leases taken over
        "no lease was reclaimed" if report.stats_reclaimed == 0 else "",
        # only the jobs in hand when the server froze can run twice
        f"duplicates {report.duplicated} > {bound}" if report.duplicated > bound else "",
    )
