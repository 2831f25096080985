"""Starts of steps in another slot ('S' outbox entries) are applied once, whenever they
come back (issue 30, bug 4): a courier applies an entry and dies before releasing it;
the step runs and finishes, its record and tombstone go (the dedup window lapses);
the entry comes back after its lease and is applied again. Before, the step (here the
callback) was enqueued and ran a second time. Its number (lua/lib/workflows/seq.lua) says it
was applied, however late it comes. The same for a start that a failure consumed."""

from __future__ import annotations

import time

import pytest
from redis.exceptions import ResponseError

import durq
from durq.codec import PayloadCodec
from durq.keys import OutboxKeys
from durq.payloads import encode_result
from durq.protocol import lifecycle
from durq.protocol import workflows as wf
from durq.protocol.calls import Op
from workflows.support import Front, courier


def _apply(entry: bytes) -> Op[object]:
    reply = yield wf.deliver_call(entry)
    return reply


async def test_a_start_delivered_again_after_the_dedup_window_starts_nothing(
    wapp: durq.App, log: str, front: Front
) -> None:
    t = wapp.tasks
    home_name, far_name = wapp.default_queue, f"{wapp.default_queue}-b"  # two slots
    home, far = wapp.queue(home_name), wapp.queue(far_name)
    far.configure(dedup_window=0.2)
    flow = durq.group([t["square"].s(log, 1), t["square"].s(log, 2)])
    handle = await front.enqueue(flow.then(t["collect"].options(queue=far_name).s(log)))
    assert handle.queue == home_name
    for _ in range(2):
        job = home.dequeue()
        assert job is not None
        home.release_many([job], results=[encode_result(1)])
    # the callback's start waits in the home's outbox: a courier takes it (a short
    # lease), applies it, and dies before releasing it
    [entry], _, _ = home._run(lifecycle.fetch(OutboxKeys(home_name), PayloadCodec(), 10, 0.3))
    assert entry.data.startswith(b"S\0")
    assert home._run(_apply(entry.data)) == b"OK"
    callback = far.dequeue()
    assert callback is not None
    far.release_many([callback], results=[encode_result(2)])
    courier(far)  # its completion reaches the workflow
    assert await front.result(handle, 5) == 2
    time.sleep(0.6)  # the callback's tombstone lapsed, and the courier's lease
    # the entry comes back, to another courier
    assert courier(home) == [entry.data]
    assert far.dequeue() is None, "the callback was enqueued a second time"
    assert far.stats().enqueued == 1


async def test_a_start_consumed_by_a_failure_starts_nothing_however_late(
    wapp: durq.App, log: str, front: Front
) -> None:
    """A start still on its way when the workflow fails is consumed: applied long after
    (the failure's own entries gone, tombstones lapsed), it starts nothing."""
    t = wapp.tasks
    home_name, far_name = wapp.default_queue, f"{wapp.default_queue}-b"
    home, far = wapp.queue(home_name), wapp.queue(far_name)
    far.configure(dedup_window=0.2)
    members = [t["square"].s(log, 1), t["square"].s(log, 2), t["square"].s(log, 3)]
    flow = durq.chain(durq.group(members), t["echo"].options(queue=far_name).s())
    handle = await front.enqueue(durq.group([flow, t["square"].s(log, 4)]))
    jobs = [job for _ in range(4) if (job := home.dequeue()) is not None]
    assert len(jobs) == 4
    home.release_many(jobs[:3], results=[encode_result(1)] * 3)  # starts echo, far
    [start], _, _ = home._run(lifecycle.fetch(OutboxKeys(home_name), PayloadCodec(), 10, 0.3))
    assert start.data.startswith(b"S\0")
    assert home.requeue(jobs[3], reason="broken", dead=True) is durq.Outcome.DEAD
    courier(home)  # the death, and what the failure sends
    info = await front.status(handle)
    assert info is not None and info.state == "failed"
    time.sleep(0.6)
    assert courier(home) == [start.data]  # its courier died: it comes back
    assert far.dequeue() is None and far.stats().enqueued == 0
    info = await front.status(handle)
    assert info is not None
    assert [s.state for s in info.steps] == ["done"] * 3 + ["cancelled", "dead"]


async def test_a_start_that_comes_after_the_stop_of_its_steps_starts_nothing(
    wapp: durq.App, log: str, front: Front
) -> None:
    """Found by the model test: a cancel sends, through the home's outbox, the consume of
    the starts on their way ('Q') and the stop of the steps ('K'). Couriers may deliver
    them in any order: a courier that took the start and the consume died, and another
    delivered the stop first; the start came back before the consume. The stop found no
    step to stop, the start then started them, and nothing ever stopped them: the steps
    of a cancelled workflow ran. The stop now waits for the consume."""
    t = wapp.tasks
    home_name, far_name = wapp.default_queue, f"{wapp.default_queue}-b"  # two slots
    home, far = wapp.queue(home_name), wapp.queue(far_name)
    sq = t["square"].options(queue=far_name)
    handle = await front.enqueue(durq.group([sq.s(log, 1), sq.s(log, 2)]), id="late-7")
    assert handle.queue == home_name
    box = OutboxKeys(home_name)
    [start], _, _ = home._run(lifecycle.fetch(box, PayloadCodec(), 10, 30))
    assert await front.cancel(handle) is durq.CancelStatus.CANCELLED
    entries, _, _ = home._run(lifecycle.fetch(box, PayloadCodec(), 10, 30))
    by_kind = {e.data[:1]: e.data for e in [start, *entries]}
    assert sorted(by_kind) == [b"K", b"Q", b"S"]
    # the stop first: it waits for the consume (a courier retries it with backoff)
    with pytest.raises(ResponseError, match="waits for the consume"):
        home._run(_apply(by_kind[b"K"]))
    for kind in (b"S", b"Q", b"K"):  # then the start, the consume, the stop again
        assert home._run(_apply(by_kind[kind])) == b"OK"
    assert far.dequeue() is None, "a step of the cancelled workflow can start"
    info = await front.status(handle)
    assert info is not None and {s.state for s in info.steps} == {"cancelled"}
