"""F6: a worker that is alive but hung on a job. Its lease must not be extended once the
job is past its task's timeout, another worker must recover the job, and the hung
worker's late completion must be refused.

Three ways to hang, two workers each (lease 1 s):

- ``loop``: an async task blocks the event loop (``time.sleep`` in a coroutine): the
  whole worker stalls, its lease keeper with it, so its lease lapses;
- ``cancel``: an async task past its 1 s timeout ignores cancellation: the event loop
  runs on, so only the keeper's timeout rule (no extension past timeout + 1 s) lets the
  lease lapse;
- ``thread``: a sync task blocks its thread past its 1 s timeout: the thread is
  abandoned and the job is retried at once;
- ``cancel-alone``: ``cancel`` with a single worker, which recovers the job itself in
  its free slot while its first run still hangs: it then holds two deliveries of the
  same job, and must keep them apart (refuse the stale one, stop cleanly).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from faults.ledger import read_ledger
from faults.scene import Scene
from helpers import eventually

pytestmark = [pytest.mark.fault, pytest.mark.slow]

LEASE = 1.0
TIMEOUT = 1.0  # of the stubborn and hang_sync tasks (faults.app)

CANCEL_WINDOW = (TIMEOUT, TIMEOUT + 1 + LEASE + LEASE / 3 + 1.0)
# case -> (task, seconds it hangs, recovery window in seconds after the hung start,
#          whether the hung run ends, and its late release is refused, within the test,
#          workers)
CASES = {
    "loop": ("stall", 4.0, (0.9 * LEASE, LEASE + 1.5), True, 2),
    "cancel": ("stubborn", 6.0, CANCEL_WINDOW, True, 2),
    "thread": ("hang_sync", 60.0, (TIMEOUT, TIMEOUT + 2.0), False, 2),
    "cancel-alone": ("stubborn", 4.0, CANCEL_WINDOW, True, 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_f6_a_hung_worker_does_not_keep_its_job(
    case: str,
    scene: Callable[..., Scene],
) -> None:
    task, seconds, (low, high), ends, count = CASES[case]
    s = scene(concurrency=2, lease=LEASE)
    fleet, ledger = s.fleet, s.ledger
    workers = s.workers(count)

    hung = s.producer([0], seconds=lambda _: seconds, task=task)
    hung.start()
    hung.finish()

    def starts() -> list[float]:
        return sorted(r.time for r in read_ledger(ledger).of("START") if r.seq == 0)

    eventually(lambda: len(starts()) >= 2, high + 10, fleet.outputs)
    first = min(read_ledger(ledger).of("START"), key=lambda r: r.time)
    recovery = starts()[1] - starts()[0]

    if ends:  # the hung run ends: its late release must be refused (checked below)
        eventually(lambda: len([r for r in read_ledger(ledger).of("DONE") if r.seq == 0]) == 2,
                   seconds + 5, fleet.outputs)  # fmt: skip
    # the workers go on working, the hung one included
    after = s.producer(range(1, 41), batch=10, seconds=lambda _: 0.1)
    after.start()
    after.finish()
    pids = {w.pid for w in workers}
    eventually(
        lambda: {r.pid for r in read_ledger(ledger).of("START") if r.seq > 0} >= pids,
        10,
        fleet.outputs,
    )
    s.drain()
    crashed = [w for w in workers if not w.alive()]
    stop_s = fleet.stop()
    hung_worker = next(w for w in workers if w.pid == first.pid)
    refused = sum(
        1 for line in hung_worker.output().splitlines() if "refused" in line or "lease lost" in line
    )

    report = s.check(f"F6-{case}")
    report.refused_acks = refused
    report.figures.update(
        hung_task=task,
        hang_s=seconds,
        resume_s=round(recovery, 2),
        recovery_window_s=[round(low, 2), round(high, 2)],
        reclaimed=report.stats_reclaimed,
        refused_late_release=refused,
        stop_s=round(stop_s, 2),
    )
    s.verdict(
        report,
        f"workers crashed: {crashed}" if crashed else "",
        f"dead-lettered: {report.dead}" if report.dead else "",
        f"recovered after {recovery:.2f} s, outside [{low:.2f}, {high:.2f}]"
        if not low <= recovery <= high
        else "",
        "the hung worker's late release was not refused" if ends and not refused else "",
    )
