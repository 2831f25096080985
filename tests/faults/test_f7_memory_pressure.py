"""F7: Redis at ``maxmemory`` (``noeviction``) under load, with a short lease.

``maxmemory`` is set 1 MB above the server's use, and two producers enqueue far faster
than three workers (lease 2 s) drain, so the server reaches its limit within seconds and
stays there while the producers' enqueues are refused. The jobs store no result (the
first write of their release then grows memory), and one in a hundred outlives the
lease, so it needs its extensions. Two workers are killed with
SIGKILL meanwhile. Then the limit is lifted and the queue drained.

At the limit, the acknowledgements and lease extensions of the jobs in hand must still
be applied (they free memory), and the workers must stop fetching jobs they could not
acknowledge. So every job runs once, except those a kill interrupted; nothing is lost.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from faults.checker import kill_recovery
from faults.harness import Fleet
from faults.ledger import read_ledger
from faults.scene import Scene
from helpers import FLAVOR_IDS, eventually, flavor_params

pytestmark = [pytest.mark.fault, pytest.mark.slow]

PRODUCERS = 2
WORKERS = 3
CONCURRENCY = 10
LEASE = 2.0
# bytes of maxmemory above the server's use at the start: a backlog of a few thousand
# jobs (3 MB took over 60 s to fill on a loaded machine, and as long to drain)
HEADROOM = 1024 * 1024
AT_LIMIT = 8.0  # seconds the producers keep pressing once the limit is reached
LONG = 2.5  # seconds of one job in a hundred: more than the lease
KILL_AT = (2.0, 5.0)  # seconds into that time, one worker killed (and replaced) at each


_ACK_LINE = re.compile(r"durq\.worker: (?:release|requeue|defer|rate_limited) of |could not extend")


def _refused_enqueues(ledger: Path) -> int:
    return sum(1 for e in read_ledger(ledger).enqs if e.kind == "ENQ_FAIL")


def _refused_acks(fleet: Fleet) -> int:
    """Worker log lines of acknowledgements or lease extensions that the server refused
    for want of memory."""
    return sum(
        1
        for proc in fleet.procs
        for line in proc.output().splitlines()
        if "maxmemory" in line and _ACK_LINE.search(line)
    )


@pytest.mark.parametrize("flavor", flavor_params())
def test_f7_at_maxmemory_every_job_runs_once_except_those_a_kill_interrupts(
    flavor: str,
    scene: Callable[..., Scene],
) -> None:
    s = scene(flavor, concurrency=CONCURRENCY, lease=LEASE)
    server, client, fleet, ledger = s.server, s.client, s.fleet, s.ledger
    workers = s.workers(WORKERS)
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used + HEADROOM)
    # jobs of 0-40 ms, one in a hundred of 2.5 s (longer than the lease: it lives by its
    # extensions), enqueued 50 at a time, so the backlog grows by thousands a second; a
    # task that stores no result, as most do
    producers = [
        s.producer(
            range(i * 1_000_000, (i + 1) * 1_000_000),
            name=f"p{i}",
            batch=50,
            pause=0.01,
            seconds=lambda seq: LONG if seq % 100 == 0 else (seq % 5) / 100,
            task="mark_plain",
        )
        for i in range(PRODUCERS)
    ]
    for p in producers:
        p.start()
    eventually(lambda: _refused_enqueues(ledger) > 0, 60, fleet.outputs)
    limit_reached = time.monotonic()
    kills = 0
    for at in KILL_AT:
        time.sleep(max(limit_reached + at - time.monotonic(), 0))
        fleet.kill(workers[kills])
        workers[kills] = fleet.spawn()
        kills += 1
    time.sleep(max(limit_reached + AT_LIMIT - time.monotonic(), 0))
    for p in producers:
        p.stop()
    for p in producers:
        p.finish()
    at_limit_info = client.info("memory")
    client.config_set("maxmemory", 0)
    s.drain(60)
    fleet.stop()

    report = s.check(f"F7-{FLAVOR_IDS[flavor]}", results=False)
    view = read_ledger(ledger)
    done = view.of("DONE")
    _, unexplained = kill_recovery(view.runs, fleet.killed_pids())
    report.figures.update(
        kills=kills,
        runs=len(done),
        distinct_run=len({r.id for r in done}),
        unexplained_dup=unexplained,
        refused_enqueues=report.failed_enqueues,
        refused_acks=_refused_acks(fleet),
        oom_backoffs=fleet.grep("backing off"),
        lease_lost_lines=fleet.grep("lease lost") + fleet.grep("its lease had expired"),
        maxmemory_mb=round((used + HEADROOM) / 2**20, 1),
        peak_mb=round(int(at_limit_info["used_memory_peak"]) / 2**20, 1),
        lease_s=LEASE,
        server=f"{server.flavor} {'.'.join(map(str, server.version))}",
    )
    s.verdict(
        report,
        "the server never refused an enqueue" if not report.failed_enqueues else "",
        # at the limit, acknowledgements and extensions are applied, fetches refused
        f"{report.figures['refused_acks']} refused acknowledgements or extensions"
        if report.figures["refused_acks"]
        else "",
        "no worker backed off" if not report.figures["oom_backoffs"] else "",
        f"duplicates {report.duplicated} > {CONCURRENCY * kills}"
        if report.duplicated > CONCURRENCY * kills
        else "",
        f"dead-lettered: {report.dead}" if report.dead else "",
        # a job runs twice only when a kill interrupted it (its DONE was not acknowledged)
        f"{unexplained} jobs ran twice with no kill to explain it" if unexplained else "",
    )
