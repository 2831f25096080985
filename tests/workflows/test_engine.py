"""The fan-in engine driven by hand (no worker): fenced releases, a step run twice,
outbox entries applied twice or left unacknowledged, a replay after "ignore". Each time
the parent counts once and its callback is enqueued once."""

from __future__ import annotations

import time

import orjson
import redis

import durq
from durq.codec import PayloadCodec
from durq.keys import OutboxKeys
from durq.payloads import encode_result
from durq.protocol import lifecycle
from durq.protocol import workflows as wf
from durq.protocol.calls import Op
from helpers import eventually
from worker.support import running_worker
from workflows.support import courier, leftovers, runs


def _take(queue: durq.Queue, lease: float = 30.0) -> durq.Job:
    job = queue.dequeue(lease=lease)
    assert job is not None
    return job


def _callback_input(queue: durq.Queue) -> list[object]:
    """The results the (one) pending callback will receive: its first argument."""
    job = _take(queue)
    name, args, _kwargs, meta = job.payload
    assert name == "collect" and "wf" in meta
    queue.release(job)
    assert queue.dequeue() is None  # one callback, enqueued once
    return list(args[0])


def _outbox(queue: durq.Queue) -> OutboxKeys:
    return OutboxKeys(queue.keys.name, queue.keys.namespace)


def _forward(queue: durq.Queue) -> int:
    """Be the courier of ``queue``'s outbox once: apply every entry, release it."""
    jobs, _, _ = queue._run(lifecycle.fetch(_outbox(queue), PayloadCodec(), 100, 30.0))
    for job in jobs:
        assert queue._run(_apply(job.data)) == b"OK"
    queue._run(lifecycle.release(_outbox(queue), jobs))
    return len(jobs)


def test_a_step_whose_lease_expired_counts_once(wapp: durq.App, log: str) -> None:
    t = wapp.tasks
    handle = (
        durq.group([t["square"].s(log, 1), t["square"].s(log, 2)])
        .then(t["collect"].s(log))
        .enqueue()
    )
    queue = wapp.queue(wapp.default_queue)
    first = _take(queue, lease=0.1)  # step 1, by a holder that stalls
    second = _take(queue)  # step 2
    time.sleep(0.15)
    again = _take(queue)  # step 1 again: its lease ran out
    assert again.id == first.id and again.token != first.token
    # both holders finish: the stale one is fenced, the step counts once
    statuses = queue.release_many([again], results=[encode_result(1)])
    assert statuses == [durq.Outcome.OK]
    statuses = queue.release_many([first], results=[encode_result(111)])
    assert statuses == [durq.Outcome.LEASE_LOST]
    queue.release_many([second], results=[encode_result(4)])
    assert _callback_input(queue) == [1, 4]
    info = handle.status()
    assert info is not None and info.waiting_on == {}


def test_an_outbox_entry_applied_twice_counts_once(wapp: durq.App, log: str) -> None:
    t = wapp.tasks
    home_queue = wapp.default_queue
    other = f"{home_queue}-b"
    members = [
        t["square"].s(log, 1),
        t["square"].s(log, 2),
        t["square"].options(queue=other).s(log, 3),
    ]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue()
    home, far = wapp.queue(home_queue), wapp.queue(other)
    assert handle.queue == home_queue
    assert _forward(home) == 1  # the far step's start
    for job, value in ((_take(home), 1), (_take(home), 4)):
        home.release_many([job], results=[encode_result(value)])
    step = _take(far)
    far.release_many([step], results=[encode_result(9)])
    # the completion waits in the far queue's outbox: take it, apply it twice
    jobs, _, _ = far._run(lifecycle.fetch(_outbox(far), PayloadCodec(), 10, 30.0))
    [entry] = jobs
    assert wf.entry_target(entry.data) == home.keys.prefix
    for _ in range(2):
        assert far._run(_apply(entry.data)) == b"OK"
    assert _callback_input(home) == [1, 4, 9]


def _apply(entry: bytes) -> Op[object]:
    reply = yield wf.deliver_call(entry)
    return reply


def test_a_courier_dying_after_the_apply_delivers_again_harmlessly(
    wapp: durq.App, log: str, raw: redis.Redis
) -> None:
    """The entry is applied, its courier dies before releasing it: its lease runs out,
    a worker delivers it again, and the callback still runs once."""
    t = wapp.tasks
    home_queue = wapp.default_queue
    other = f"{home_queue}-b"
    members = [t["square"].s(log, 1)] * 2 + [t["square"].options(queue=other).s(log, 2)]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue()
    home, far = wapp.queue(home_queue), wapp.queue(other)
    assert _forward(home) == 1
    for job in (_take(home), _take(home)):
        home.release_many([job], results=[encode_result(1)])
    far.release_many([_take(far)], results=[encode_result(4)])
    jobs, _, _ = far._run(lifecycle.fetch(_outbox(far), PayloadCodec(), 10, 0.3))
    [entry] = jobs
    far._run(_apply(entry.data))  # ... and the courier dies here
    with running_worker(wapp, queues=[home_queue, other]):
        assert handle.result(10) == 3
        # the entry comes back after its lease and is delivered (again)
        stats = f"{_outbox(far).prefix}stats"
        eventually(lambda: raw.hget(stats, "completed") == b"1", 10, "the redelivery")
        assert raw.hget(stats, "reclaimed") == b"1"
    [callback] = runs(log, "callback")
    assert callback["results"] == [1, 1, 4]
    assert leftovers(raw, [home_queue, other], [handle.id]) == []


def test_a_start_delivered_twice_enqueues_once(wapp: durq.App, log: str) -> None:
    t = wapp.tasks
    other = f"{wapp.default_queue}-b"
    handle = durq.chain(
        t["square"].s(log, 1), t["echo"].s(), t["echo"].options(queue=other).si(5)
    ).enqueue()
    home, far = wapp.queue(wapp.default_queue), wapp.queue(other)
    home.release_many([_take(home)], results=[encode_result(1)])
    home.release_many([_take(home)], results=[encode_result(4)])
    jobs, _, _ = home._run(lifecycle.fetch(_outbox(home), PayloadCodec(), 10, 30.0))
    [entry] = jobs
    assert entry.data.startswith(b"S\0")
    home._run(_apply(entry.data))
    home._run(_apply(entry.data))
    step = _take(far)
    assert step.id == handle.step_id(4) and step.payload[1] == [5]
    assert far.dequeue() is None
    far.release_many([step], results=[encode_result(5)])
    assert _forward(far) == 1  # its completion, to the home's slot
    assert handle.result(5) == 5


def test_a_replay_after_ignore_counts_nothing_twice(wapp: durq.App, log: str) -> None:
    t = wapp.tasks
    handle = (
        durq.group([t["dies"].s(log, "x"), t["square"].s(log, 1)])
        .then(t["collect"].s(log))
        .enqueue(on_failure="ignore")
    )
    queue = wapp.queue(wapp.default_queue)
    with running_worker(wapp, queues=[wapp.default_queue]):
        assert handle.result(10) == 2
        assert queue.replay(handle.step_id(3)) == 1  # it dies again: nothing to count
        time.sleep(0.3)
    assert len(runs(log, "callback")) == 1
    assert orjson.loads(orjson.dumps(runs(log, "callback")[0]["results"]))[1] == 1


def test_large_payloads_start_and_gather_over_several_calls(wapp: durq.App, log: str) -> None:
    """A call starts at most 256 KB of payload and gathers at most 256 KB of results
    (lua/lib/workflows/fan_in.lua CHUNK_BYTES): a group of 40 steps of 20 KB each starts over
    several calls, and its 40 results of 20 KB each are gathered over several calls."""
    t = wapp.tasks
    blob = "x" * 20_000
    handle = (
        durq.group([t["echo"].s(f"{i}:{blob}") for i in range(40)])
        .then(t["collect"].s(log))
        .enqueue()
    )
    queue = wapp.queue(wapp.default_queue)
    started = courier(queue)  # the starts the commit did not get to
    assert started and all(e.startswith(b"R\0") for e in started)
    steps = queue.dequeue_many(100)
    assert len(steps) == 40
    queue.release_many(steps, results=[encode_result(s.payload[1][0]) for s in steps])
    gathered = courier(queue)
    assert len(gathered) >= 2 and all(e.startswith(b"F\0") for e in gathered)
    assert _callback_input(queue) == [f"{i}:{blob}" for i in range(40)]
    info = handle.status()
    assert info is not None and info.waiting_on == {}
