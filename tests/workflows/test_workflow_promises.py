"""Promises of docs/workflows.md (and the workflow part of docs/job-control.md) that no
other workflow test showed, driven by hand where no worker is needed (the promise ->
test table is in docs/guarantees.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, TypeVar

import pytest
import redis

import durq
from cli.support import durq as run
from durq import Message
from durq.codec import PayloadCodec
from durq.payloads import encode_result
from durq.protocol import lifecycle
from durq.protocol import workflows as wf
from durq.protocol.calls import Op, Pipeline
from helpers import eventually
from worker.support import running_worker
from workflows.apps import build
from workflows.test_engine import _forward, _outbox, _take

T = TypeVar("T")


def _deliver(queue: durq.Queue) -> None:
    """Deliver ``queue``'s outbox until it is empty (what its workers do)."""
    while _forward(queue):
        pass


def _status(handle: durq.WorkflowHandle) -> durq.WorkflowInfo:
    info = handle.status()
    assert info is not None
    return info


def _pair(wapp: durq.App, log: str, policy: str) -> tuple[durq.WorkflowHandle, durq.Queue]:
    """A group of two squares (1 and 2) with a callback, under ``policy``; its queue."""
    t = wapp.tasks
    members = [t["square"].s(log, 1), t["square"].s(log, 2)]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue(on_failure=policy)
    return handle, wapp.queue(wapp.default_queue)


@pytest.mark.parametrize("policy", ["fail", "ignore", "wait"])
def test_a_step_cancelled_with_queue_cancel_reports_to_its_workflow_like_a_dead_one(
    wapp: durq.App, log: str, policy: str
) -> None:
    handle, queue = _pair(wapp, log, policy)
    first, second, callback = _status(handle).steps
    assert queue.cancel(first.job_id)[0].status is durq.CancelStatus.CANCELLED
    _deliver(queue)  # a death reaches its workflow through the outbox
    if policy == "ignore":  # it counts as done, its error in place of its result
        job = _take(queue)
        assert job.id == second.job_id
        queue.release_many([job], results=[encode_result(4)])
        cb = _take(queue)
        assert cb.id == callback.job_id
        error, four = cb.payload[1][0]
        assert four == 4 and durq.step_error(error)["reason"] == "cancelled"  # type: ignore[index]
        return
    # under fail and wait (a cancelled step cannot be replayed) the workflow fails: its
    # other unstarted step ends cancelled by it, its callback never becomes a job
    info = _status(handle)
    assert info.state == "failed"
    assert [s.state for s in info.steps] == ["cancelled", "cancelled", "cancelled"]
    got = queue.job(second.job_id)
    assert got is not None and got.state is durq.JobState.CANCELLED
    assert got.reason is not None and got.reason["by"] == f"workflow {handle.id}"
    assert queue.job(callback.job_id) is None
    assert queue.dequeue() is None
    assert queue.stats().cancelled == 2
    with pytest.raises(durq.WorkflowFailed):
        handle.result(1)


def test_a_cancelled_workflows_steps_do_not_count_in_wf_steps_cancelled(
    wapp: durq.App, log: str
) -> None:
    handle, queue = _pair(wapp, log, "fail")
    assert handle.cancel() is durq.CancelStatus.CANCELLED
    counters = queue._run(wf.counters(queue.keys))
    assert (counters["cancelled"], counters["steps_cancelled"]) == (1, 0)
    assert queue.stats().cancelled == 2


@pytest.mark.parametrize("policy", ["fail", "ignore", "wait"])
def test_a_dead_step_stays_in_its_queues_dead_letters_under_every_policy(
    wapp: durq.App, log: str, policy: str
) -> None:
    handle, queue = _pair(wapp, log, policy)
    job = _take(queue)
    assert queue.requeue(job, reason="broken", dead=True) is durq.Outcome.DEAD
    _deliver(queue)
    assert [d.id for d in queue.dead_letters()] == [job.id]
    assert _status(handle).state == ("failed" if policy == "fail" else "running")


@pytest.mark.parametrize("policy", ["fail", "ignore"])
def test_purging_a_dead_step_changes_nothing_for_a_workflow_under_fail_or_ignore(
    wapp: durq.App, log: str, policy: str
) -> None:
    handle, queue = _pair(wapp, log, policy)
    job = _take(queue)
    queue.requeue(job, reason="broken", dead=True)
    _deliver(queue)
    before = _status(handle)
    assert queue.purge(job.id) == 1
    assert _forward(queue) == 0  # nothing was written for the workflow
    after = _status(handle)
    assert (after.state, after.error, after.waiting_on) == (
        before.state, before.error, before.waiting_on
    )  # fmt: skip
    if policy == "ignore":  # it goes on and completes, with the error as a result
        second = _take(queue)
        queue.release_many([second], results=[encode_result(4)])
        cb = _take(queue)
        queue.release_many([cb], results=[encode_result(2)])
        assert handle.result(1) == 2


def test_a_steps_result_goes_to_its_workflow_not_to_its_own_job_result(
    redis_url: str, queue_name: str, log: str
) -> None:
    app = build(redis_url, default_queue=queue_name)

    @app.task(name="kept", result=True)
    def kept(x: int) -> int:
        return x + 1

    handle = durq.chain(kept.si(1), app.tasks["echo"].s()).enqueue()
    with running_worker(app):
        assert handle.result(10) == 2
    step = _status(handle).steps[0]
    queue = app.queue(queue_name)
    assert queue._run(lifecycle.wait_result(queue.keys, step.job_id, 0.01)) is None
    app.close()


def test_the_summary_and_the_result_are_kept_result_ttl_the_apps_by_default(
    wapp: durq.App, log: str, raw: redis.Redis
) -> None:
    t = wapp.tasks
    default = durq.chain(t["echo"].si(1)).enqueue()
    short = durq.chain(t["echo"].si(2)).enqueue(result_ttl=30)
    queue = wapp.queue(wapp.default_queue)
    for _ in range(2):
        job = _take(queue)
        queue.release_many([job], results=[encode_result(job.payload[1][0])])
    assert (default.result(1), short.result(1)) == (1, 2)
    prefix = queue.keys.prefix
    for handle, ttl in ((default, wapp.result_ttl), (short, 30)):
        for key in (f"{prefix}wf:{handle.id}", f"{prefix}result:{handle.id}"):
            assert ttl - 5 < raw.pttl(key) / 1000 <= ttl, key
    assert wapp.result_ttl == 3600


def _submission(wapp: durq.App, log: str, n: int) -> tuple[durq.Queue, Pipeline, int]:
    """A group of ``n`` squares made ready to submit, not sent: its home queue, the
    submission's round trip, and the index of its commit in it."""
    flow = durq.group([wapp.tasks["square"].s(log, i) for i in range(n)])
    _app, sub = durq.app.workflows._prepare(flow, None, "fail", None)
    queue = wapp.queue(sub.home_queue)
    queue.register()
    sent = next(sub.op())
    assert isinstance(sent, Pipeline)
    commit = next(i for i, c in enumerate(sent.calls) if "workflow_submit" in repr(c))
    return queue, sent, commit


def _send(calls: Sequence[Any]) -> Op[object]:
    replies = yield Pipeline(tuple(calls))
    return replies


def test_a_commit_whose_client_died_before_the_further_starts_is_finished_by_its_outbox(
    wapp: durq.App, log: str
) -> None:
    n = 2 * wf.START_CHUNK + 7
    queue, sent, commit = _submission(wapp, log, n)
    assert len(sent.calls) == commit + 3  # two further calls would start the rest
    queue._run(_send(sent.calls[: commit + 1]))  # the client dies right after the commit
    assert queue.stats().pending == wf.START_CHUNK  # at most START_CHUNK steps per script call
    _deliver(queue)  # a worker of the queue delivers the outbox: the rest starts
    assert queue.stats().pending == n
    assert len({j.id for j in queue.dequeue_many(n)}) == n


def test_a_client_dying_before_the_commit_leaves_only_staging_hashes_that_expire(
    wapp: durq.App, log: str, raw: redis.Redis
) -> None:
    queue, sent, commit = _submission(wapp, log, 3)
    queue._run(_send(sent.calls[:commit]))  # the structure is sent, the commit is not
    assert list(raw.scan_iter(match=queue.keys.prefix + "wf:*", count=1000)) == []
    staged = list(raw.scan_iter(match=queue.keys.prefix + "wfn:*", count=1000))
    assert len(staged) == 2  # the header (plan) and the structure
    assert all(0 < raw.pttl(key) <= 600_000 for key in staged)
    assert queue.stats().pending == 0 and queue.dequeue() is None


@pytest.mark.parametrize("policy", ["fail", "ignore"])
def test_purging_a_quarantined_step_reports_it_to_its_workflow_under_every_policy(
    wapp: durq.App, log: str, raw: redis.Redis, policy: str
) -> None:
    handle, queue = _pair(wapp, log, policy)
    first, second, _callback = _status(handle).steps
    raw.hset(queue.keys.prefix + "jobs", first.job_id, b"\x01\x01")  # unreadable
    job = _take(queue)  # the first is quarantined on the way
    assert job.id == second.job_id
    (dead,) = queue.dead_letters()
    assert dead.id == first.job_id and dead.reason["reason"] == "corrupt_record"  # type: ignore[index]
    queue.release_many([job], results=[encode_result(4)])
    _deliver(queue)
    assert _status(handle).state == "running"  # nothing could end the step: it waits
    assert queue.purge(first.job_id) == 1
    _deliver(queue)
    if policy == "fail":
        with pytest.raises(durq.WorkflowFailed, match="purged"):
            handle.result(1)
        return
    cb = _take(queue)
    error, four = cb.payload[1][0]
    assert four == 4 and durq.step_error(error)["reason"] == "purged"  # type: ignore[index]


def test_a_result_waits_without_polling(make_server: Any, queue_name: str, log: str) -> None:
    server = make_server()
    app = build(server.url, default_queue=queue_name)
    handle = durq.chain(app.tasks["square"].s(log, 2)).enqueue()
    client = redis.Redis.from_url(server.url)
    before = sum(s["calls"] for s in client.info("commandstats").values())
    with pytest.raises(TimeoutError):
        handle.result(2.0)
    after = sum(s["calls"] for s in client.info("commandstats").values())
    client.close()
    app.close()
    assert after - before <= 6  # a blocking wait or two, and the info calls


def test_an_entry_that_cannot_be_applied_yet_is_retried_with_backoff(
    wapp: durq.App, log: str, raw: redis.Redis
) -> None:
    t = wapp.tasks
    home_name = wapp.default_queue
    far_name = f"{home_name}-b"  # another slot
    members = [t["square"].s(log, 1), t["square"].options(queue=far_name).s(log, 2)]
    handle = durq.group(members).enqueue()
    far = wapp.queue(far_name)
    broken = far.keys.prefix + "jobs"
    raw.set(broken, "not a hash")  # the far step's start cannot be applied there
    outboxes = (wapp.queue(home_name), far)
    with running_worker(wapp, queues=[home_name, far_name]):
        time.sleep(1.0)
        tries = sum(q.outbox_stats().enqueued + q.outbox_stats().retried for q in outboxes)
        assert sum(q.outbox_stats().dead for q in outboxes) == 0
        assert tries <= 20, f"{tries} deliveries in 1 s: no backoff"
        raw.delete(broken)  # repaired: a later try applies it
        assert handle.result(10) == [1, 4]


def test_a_workflow_has_at_most_100000_steps(wapp: durq.App, log: str) -> None:
    step = wapp.tasks["echo"].si(1)
    with pytest.raises(durq.InvalidArgument, match="at most 100000 steps"):
        durq.group([step] * (wf.MAX_NODES + 1)).enqueue()


def test_declared_types_refuse_only_clear_mismatches(wapp: durq.App) -> None:
    app = wapp

    @app.task(name="pair")
    def pair() -> tuple[int, int]:
        return (1, 2)

    @app.task(name="first_of")
    def first_of(values: Sequence[int]) -> int:
        return values[0]

    @app.task(name="halve")
    def halve(x: float) -> float:
        return x / 2

    @app.task(name="same")
    def same(x: T) -> T:
        return x

    @app.task(name="loose")
    def loose(x):  # type: ignore[no-untyped-def]
        return x

    @app.task(name="mapping")
    def mapping(x: dict[str, int]) -> int:
        return len(x)

    # a tuple is a list, an int fits a float, a generic, a TypeVar, no annotation: pass
    durq.chain(pair.si(), first_of.s(), halve.s(), same.s(), loose.s(), mapping.s()).enqueue()
    with pytest.raises(durq.InvalidArgument, match="declared dict"):
        durq.chain(first_of.si([1]), mapping.s()).enqueue()  # int for a dict: refused


def test_a_step_after_one_declared_to_return_any_passes(wapp: durq.App) -> None:
    @wapp.task(name="mapping")
    def mapping(x: dict[str, int]) -> int:
        return len(x)

    durq.chain(wapp.tasks["echo"].si({"a": 1}), mapping.s()).enqueue()  # echo: -> Any


def test_a_malformed_outbox_entry_is_dead_lettered_in_the_outbox_and_logged(
    wapp: durq.App, caplog: pytest.LogCaptureFixture
) -> None:
    queue = wapp.queue(wapp.default_queue)
    queue.register()
    bad = [Message(b"not an entry"), Message(b"Z\0" + queue.keys.prefix.encode() + b"\0x")]
    queue._run(lifecycle.enqueue(_outbox(queue), PayloadCodec(), bad, max_attempts=5))
    with (
        caplog.at_level(logging.ERROR, logger="durq.worker"),
        running_worker(wapp, queues=[wapp.default_queue]),
    ):
        eventually(lambda: queue.outbox_stats().dead == 2, 10, "the dead letters")
    assert caplog.text.count("cannot be delivered") == 2
    assert queue.outbox_stats().pending == 0


def test_workflow_show_watch_refreshes_until_the_workflow_ends(
    wapp: durq.App, log: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from durq.cli import workflow as cli_workflow

    handle = durq.group([wapp.tasks["square"].s(log, 1)]).enqueue()
    # cancelled once the watch showed it running twice (a fixed delay was too short for
    # a loaded machine, where the command took seconds to show it once)
    shown_twice = threading.Event()
    renderings: list[str] = []
    render = cli_workflow._print

    def counted(info: Any, *args: Any) -> None:
        render(info, *args)
        renderings.append(info.state)
        if renderings.count("running") >= 2:
            shown_twice.set()

    monkeypatch.setattr(cli_workflow, "_print", counted)
    canceller = threading.Thread(target=lambda: shown_twice.wait(60) and handle.cancel())
    canceller.start()
    started = time.monotonic()
    try:
        shown = run("workflow", "show", handle.id, "--watch", "--url", wapp.url)
    finally:
        shown_twice.set()
        canceller.join()
    assert shown.exit_code == 0, shown.output
    assert time.monotonic() - started >= 1.0  # a second between two renderings
    assert renderings[-1] == "cancelled" and renderings.count("running") >= 2
    assert shown.output.count("running") >= 2  # shown again every second meanwhile
    assert "cancelled" in shown.output.split("running")[-1]
