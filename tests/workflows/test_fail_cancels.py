"""Policy "fail", driven by hand (no worker): the steps that did not start end
``cancelled``, as ``Queue.cancel`` ends a job that did not start (state, reason,
``stats().cancelled``), in the home's slot and in another one (through the outbox); the
parked callback shows ``cancelled`` in ``status()``; the death and the cancel entry
applied twice count once."""

from __future__ import annotations

import durq
from durq.codec import PayloadCodec
from durq.keys import OutboxKeys
from durq.payloads import encode_result
from durq.protocol import lifecycle
from durq.protocol import workflows as wf
from durq.protocol.calls import Op


def _outbox(queue: durq.Queue) -> OutboxKeys:
    return OutboxKeys(queue.keys.name, queue.keys.namespace)


def _apply(entry: bytes) -> Op[object]:
    reply = yield wf.deliver_call(entry)
    return reply


def _entries(queue: durq.Queue) -> list[bytes]:
    """Take every entry of ``queue``'s outbox, apply each twice (a courier that died
    after its apply, then the redelivery), release them; their texts."""
    jobs, _, _ = queue._run(lifecycle.fetch(_outbox(queue), PayloadCodec(), 100, 30.0))
    for job in jobs:
        for _ in range(2):
            assert queue._run(_apply(job.data)) == b"OK"
    queue._run(lifecycle.release(_outbox(queue), jobs))
    return [job.data for job in jobs]


def test_fail_ends_the_unstarted_steps_cancelled(wapp: durq.App, log: str) -> None:
    t = wapp.tasks
    other = f"{wapp.default_queue}-b"  # another slot
    members = [
        t["square"].s(log, 1),  # dies
        t["square"].s(log, 2),  # pending, listed
        t["square"].options(priority=-1).s(log, 3),  # pending, in the priority zset
        t["square"].options(delay=60).s(log, 4),  # delayed
        t["square"].options(queue=other).s(log, 5),  # pending in the other slot
        t["square"].options(queue=other, delay=60).s(log, 6),  # delayed there
    ]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue()
    home, far = wapp.queue(wapp.default_queue), wapp.queue(other)
    assert handle.queue == home.name
    assert [e[:2] for e in _entries(home)] == [b"S\0"]  # the other slot's starts
    info = handle.status()
    assert info is not None
    *steps, callback = info.steps
    job = home.dequeue()
    assert job is not None and job.id == steps[0].job_id
    assert home.requeue(job, reason="broken", dead=True) is durq.Outcome.DEAD

    # the death reaches the home (an outbox entry, applied twice): the workflow fails,
    # its home-slot steps end cancelled now, the other slot's through a cancel entry
    # (and the start entry sent there is consumed, applied already as it was)
    assert [e[:2] for e in _entries(home)] == [b"D\0"]
    assert sorted(e[:2] for e in _entries(home)) == [b"Q\0", b"X\0"]
    assert _entries(home) == []
    for step in steps[1:]:
        queue = home if step.queue == home.name else far
        got = queue.job(step.job_id)
        assert got is not None and got.state is durq.JobState.CANCELLED, step
        assert got.reason is not None and got.reason["reason"] == "cancelled"
        assert got.reason["by"] == f"workflow {handle.id}"
    info = handle.status()
    assert info is not None and info.state == "failed"
    assert [s.state for s in info.steps] == ["dead"] + ["cancelled"] * 5 + ["cancelled"]
    assert callback.state == "waiting"  # before: parked
    # counted once each, as a job cancel counts, and as steps of a failed workflow
    home_stats, far_stats = home.stats(), far.stats()
    assert (home_stats.cancelled, far_stats.cancelled) == (3, 2)
    assert (home_stats.superseded, far_stats.superseded) == (0, 0)
    assert (home_stats.pending, home_stats.delayed) == (0, 0)
    assert (far_stats.pending, far_stats.delayed) == (0, 0)
    assert home._run(wf.counters(home.keys))["steps_cancelled"] == 3
    assert far._run(wf.counters(far.keys))["steps_cancelled"] == 2
    assert home._run(wf.counters(home.keys))["failed"] == 1
    # nothing runs; the listed ids are passed
    assert home.dequeue() is None and far.dequeue() is None
    assert home.stats().cancelled == 3
    assert _entries(home) == [] and _entries(far) == []


def test_a_start_racing_the_failure_starts_nothing(wapp: durq.App, log: str) -> None:
    """A step's start to another slot waits in the outbox when the workflow fails; the
    entries of the failure are applied first (another courier): they consume the start,
    which then starts nothing, and the step shows ``cancelled``."""
    t = wapp.tasks
    other = f"{wapp.default_queue}-b"
    first = durq.chain(t["square"].s(log, 1), t["echo"].options(queue=other).s())
    handle = durq.group([first, t["square"].s(log, 3)]).then(t["collect"].s(log)).enqueue()
    home, far = wapp.queue(wapp.default_queue), wapp.queue(other)
    info = handle.status()
    assert info is not None
    one, far_step, three, _callback = info.steps
    jobs: dict[str, durq.Job] = {}
    for _ in range(2):
        job = home.dequeue()
        assert job is not None
        jobs[job.id] = job
    home.release_many([jobs[one.job_id]], results=[encode_result(1)])  # starts far_step
    home.requeue(jobs[three.job_id], reason="broken", dead=True)
    taken, _, _ = home._run(lifecycle.fetch(_outbox(home), PayloadCodec(), 100, 30.0))
    by_kind = {job.data[:1]: job for job in taken}
    assert sorted(by_kind) == [b"D", b"S"]
    assert home._run(_apply(by_kind[b"D"].data)) == b"OK"  # the workflow fails
    # applied before the start: its consumption, and the stop of the step (not linked)
    assert sorted(e[:2] for e in _entries(home)) == [b"Q\0", b"X\0"]
    assert home._run(_apply(by_kind[b"S"].data)) == b"OK"
    home._run(lifecycle.release(_outbox(home), taken))
    assert far.dequeue() is None
    stats = far.stats()
    assert (stats.enqueued, stats.pending, stats.cancelled) == (0, 0, 0)
    assert far.job(far_step.job_id) is None  # it never existed
    info = handle.status()
    assert info is not None and info.state == "failed"
    assert [s.state for s in info.steps] == ["done", "cancelled", "dead", "cancelled"]
