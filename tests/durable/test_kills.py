"""Durable steps under SIGKILL (issue 37): 500 jobs of 5 steps, ``durq worker``
processes killed at random while they run. Every job completes, and every (job, step)
effect appears once, except a step whose attempt lost its lease between the effect and
its record, which may appear once more per lease lost: a killed worker's leases run
out, and so may a live worker's on a loaded machine (its heartbeat late, another worker
takes the job over). Recording a step is fenced by the lease, so an attempt that lost
its lease writes at most the one effect it was inside; the queue counts every lease it
took back (``stats.reclaimed``). An attempt that fails (its step raised: not recorded,
docs/durable.md) may likewise repeat the one effect it was inside (``stats.failed``).
The two bound the extra effects exactly. About 30 s;
``DURQ_DURABLE_KILL_JOBS=5000`` for a longer run."""

from __future__ import annotations

import collections
import os
import random
import time
from pathlib import Path

import pytest

import durq
from durable.kill_app import five_steps
from worker.support import Durq

pytestmark = [pytest.mark.fault, pytest.mark.slow]

JOBS = int(os.environ.get("DURQ_DURABLE_KILL_JOBS", "500"))
WORKERS = 2
CONCURRENCY = 8
KILL_EVERY = 0.7
QUEUE = "durable-kill"


def test_workers_killed_at_random_complete_every_job_with_each_step_once_but_for_kills(
    make_server: object, tmp_path: Path, durq_cli: Durq
) -> None:
    server = make_server()  # type: ignore[operator]
    rng = random.Random(int(os.environ.get("DURQ_FAULT_SEED", time.time_ns() % 1_000_000)))
    log = str(tmp_path / "effects.log")
    argv = ("worker", "durable.kill_app:app", "-q", QUEUE, "--url", server.url)
    args = (*argv, "-c", str(CONCURRENCY), "--lease", "1", "--heartbeat", "0.2")
    procs = [durq_cli.start(*args, url=server.url) for _ in range(WORKERS)]
    with durq.Queue(QUEUE, server.url) as queue:
        app = durq.App(server.url)
        try:
            app.task(queue=QUEUE)(five_steps).enqueue_many([(log, f"j{i}") for i in range(JOBS)])
        finally:
            app.close()
        kills = 0
        deadline = time.monotonic() + 120
        while queue.stats().completed < JOBS:
            assert time.monotonic() < deadline, f"{queue.stats()}\n{durq_cli.outputs()[-4000:]}"
            time.sleep(KILL_EVERY * (0.5 + rng.random()))
            if queue.stats().completed >= JOBS:
                break
            slot = rng.randrange(WORKERS)
            procs[slot].kill()
            kills += 1
            procs[slot] = durq_cli.start(*args, url=server.url)
        stats = queue.stats()
    for proc in procs:
        proc.kill()
    counts = collections.Counter(
        tuple(line.split()[:2]) for line in Path(log).read_text().splitlines()
    )
    missing = {(f"j{i}", str(s)) for i in range(JOBS) for s in range(5)} - set(counts)
    extra = sum(n - 1 for n in counts.values())
    print(f"jobs={JOBS} kills={kills} extra effects={extra} leases taken back={stats.reclaimed}")
    assert not missing, sorted(missing)[:10]
    assert (stats.completed, stats.dead) == (JOBS, 0)
    assert kills >= 5, "too few kills to mean anything"
    assert extra <= stats.reclaimed + stats.failed
