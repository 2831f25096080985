"""A sharded queue is a queue: ``AsyncShardedQueue`` and ``ShardedQueue`` have every
method and option of ``AsyncQueue`` and ``Queue``, with the same parameters and defaults
(the few differences are listed here with their reasons), and do the same: one story of
every operation, told to a plain queue and to a sharded one through both front ends,
ends the same (issue 32: twins that cannot drift)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from typing import Any

import pytest

import durq
from durq import AsyncQueue, AsyncShardedQueue, Message, Queue, ShardedQueue
from durq.codec import PayloadCodec
from durq.dev.server import RedisServer
from engine.support import Blocking

PAIRS = [(AsyncQueue, AsyncShardedQueue), (Queue, ShardedQueue)]

#: what only a sharded queue has: its shards and how jobs are routed to them
SHARDED_ONLY = {"shard_of", "route", "shards", "shard_count", "namespace"}
#: what a sharded queue has otherwise, and why
OTHERWISE = {
    "__init__": "a sharded queue takes its shard count (shards=N), not shard_count",
    "wait_result": "a job id does not tell its shard (a group or a key may have routed "
    "it): the caller names it, shard=EnqueueResult.queue",
}
#: what only a plain queue has, and why
PLAIN_ONLY = {
    "keys": "each shard has its own keys: shards[i].keys",
    "_enqueue_op": "the checked enqueue of one queue's messages, which the sharded queue "
    "asks of its shards",
    "scan_jobs": "a scan's cursor walks one shard's records: shards[i].scan_jobs, as "
    "durq deploy check reads every shard",
}


def _members(cls: type) -> dict[str, Any]:
    """The public methods and properties of ``cls``, with the private ones durq's own
    layers call (``_run``, ``_run_all``) and the context manager's."""
    wanted = {"_run", "_run_all", "__aenter__", "__aexit__", "__enter__", "__exit__"}
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if (not name.startswith("_") or name in wanted or name in OTHERWISE)
        and (callable(member) or isinstance(member, property))
    }


@pytest.mark.parametrize(("plain", "sharded"), PAIRS, ids=["async", "sync"])
def test_a_sharded_queue_has_every_method_of_a_queue_with_the_same_parameters(
    plain: type, sharded: type
) -> None:
    mine, theirs = _members(plain), _members(sharded)
    # a property may be a plain attribute there (declared on the class)
    declared = {n for c in sharded.__mro__ for n in getattr(c, "__annotations__", {})}
    missing = set(mine) - set(theirs) - set(PLAIN_ONLY) - declared
    assert not missing, f"{sharded.__name__} lacks {sorted(missing)}"
    for name, member in mine.items():
        if name in OTHERWISE or name in PLAIN_ONLY or isinstance(member, property):
            continue
        other = theirs[name]
        assert inspect.iscoroutinefunction(member) == inspect.iscoroutinefunction(other), name
        want, got = inspect.signature(member), inspect.signature(other)
        assert list(want.parameters.values()) == list(got.parameters.values()), name
        if name not in ("__aenter__", "__enter__"):  # each returns itself
            assert want.return_annotation == got.return_annotation, name
    options = set(vars(plain("parity", "redis://localhost:1/0")))  # set by __init__
    extra = set(theirs) - set(mine) - SHARDED_ONLY - options
    assert not extra, f"{sorted(extra)}: list them in SHARDED_ONLY, with the reason"


@pytest.mark.parametrize(("plain", "sharded"), PAIRS, ids=["async", "sync"])
def test_a_sharded_queue_has_the_options_of_a_queue(plain: type, sharded: type) -> None:
    options = {"lease": 7.0, "max_attempts": 3, "result_ttl": 60.0, "enqueue_retry_for": 2.0}
    one = plain("parity", "redis://localhost:1/0", **options)
    many = sharded("parity", "redis://localhost:1/0", shards=2, **options)
    public = {k for k in vars(one) if not k.startswith("_")} - set(PLAIN_ONLY)
    assert public - {n for n in dir(many) if not n.startswith("_")} == set()
    for name in public - {"client", "codec", "backoff"}:
        assert getattr(many, name) == getattr(one, name), name
    assert many.codec.serializer == one.codec.serializer
    # each shard is a plain queue with these options
    assert all(shard.lease == 7.0 and shard.max_attempts == 3 for shard in many.shards)


# -- the same story, told to a plain queue and to a sharded one -------------------------


@pytest.fixture
async def make(front: str, server: RedisServer) -> AsyncIterator[Callable[..., Any]]:
    """``(name, shards=0) -> queue`` in the test's front end (0: a plain queue)."""
    made: list[Any] = []

    def make(name: str, shards: int = 0) -> Any:
        options: dict[str, Any] = {"lease": 10.0} | ({"shards": shards} if shards else {})
        if front == "async":
            queue: Any = (AsyncShardedQueue if shards else AsyncQueue)(name, server.url, **options)
        else:
            queue = Blocking((ShardedQueue if shards else Queue)(name, server.url, **options))
        made.append(queue)
        return queue

    yield make
    for queue in made:
        await queue.aclose()


def _counts(stats: durq.QueueStats) -> dict[str, Any]:
    return {k: v for k, v in asdict(stats).items() if k not in ("name", "server_time")}


async def _story(q: Any, sharded: bool) -> dict[str, Any]:
    """Every operation of the queue API once, and what each gave (ids and names left
    out: a sharded queue's results name their shards)."""
    codec = PayloadCodec("json")
    seen: dict[str, Any] = {}
    first = await q.enqueue("a", id="job-a", group="g1", priority=1)
    again = await q.enqueue("a", id="job-a", group="g1")
    keyed = [await q.enqueue(p, key="k", max_attempts=2) for p in ("k1", "k2")]
    seen["enqueue"] = [r.status for r in (first, again, *keyed)]
    many = await q.enqueue_many(["b", "c", Message("d", id="job-d", priority=2)], group="g2")
    encoded = await q.enqueue_encoded(
        [("job-e", *codec.encode("e")), ("job-f", *codec.encode("f"))]
    )
    seen["enqueue_many"] = [r.status for r in (*many, *encoded)]
    seen["enqueued"] = _counts(await q.stats())

    jobs = {job.payload: job for job in await q.dequeue_many(20, lease=30)}
    seen["dequeued"] = sorted(jobs)
    seen["progress"] = await q.progress(jobs["a"], 0.5, {"step": 1})
    progress = await q.read_progress("job-a")
    seen["read_progress"] = (progress.fraction, progress.info)
    seen["extend"] = await q.extend_many([jobs["a"], jobs["b"]], lease=60)
    seen["defer"] = await q.defer_many([jobs["c"], jobs["d"]], [0, 30])
    failed = [jobs["e"], jobs["f"]]
    seen["requeue"] = await q.requeue_many(
        failed, reason=["gone", "later"], delay=[0, 30], dead=[True, False]
    )
    done = [jobs["a"], jobs["b"], jobs["k1"]]
    seen["release"] = await q.release_many(done, results=[codec.encode(1)[1], None, None])
    shard = {"shard": first.queue} if sharded else {}
    seen["result"] = await q.wait_result("job-a", 5, **shard)
    seen["states"] = {p: (await q.job(job.id)).state for p, job in sorted(jobs.items())}

    seen["dead_letters"] = [(i.id, i.reason["reason"]) for i in await q.dead_letters()]
    total, page = await q.dead_letters_page(0, 10)
    seen["dead_letters_page"] = (total, [i.id for i in page])
    seen["groups"] = sorted((g.name, g.ready, g.active) for g in await q.groups())
    total, groups = await q.groups_page(1)
    seen["groups_page"] = (total, [(g.name, g.ready) for g in groups])
    seen["replay"] = (await q.replay("job-e"), await q.replay_all())
    again_dead = await q.dequeue(lease=30)
    await q.requeue(again_dead, reason="again", dead=True)
    seen["purge"] = (await q.purge(["no-such-job"]), await q.purge_all())
    seen["cancel"] = [r.status for r in await q.cancel(["job-d", "job-f", "no-such-job"])]

    await q.configure(group_limit=2, max_active=6, dead_cap=100)
    flow = await q.limits()
    seen["limits"] = (flow.max_active, flow.active)
    seen["check"] = await q.check()
    seen["stats"] = _counts(await q.stats())
    seen["outbox_stats"] = _counts(await q.outbox_stats())
    seen["workflows"] = (
        await q.workflow("wf-none"),
        await q.has_workflow("wf-none"),
        await q.cancel_workflow("wf-none"),
        await q.running_workflows(),
        await q.workflow_counters(),
    )
    seen["schedules"] = (
        await q.schedules(),
        await q.schedules_page(),
        await q.schedule("none"),
        await q.control_schedule("pause", "none"),
    )
    return seen


async def test_a_sharded_queue_does_what_a_queue_does(
    make: Callable[..., Any], queue_name: str
) -> None:
    plain = await _story(make(queue_name), sharded=False)
    sharded = await _story(make(f"{queue_name}-s", shards=3), sharded=True)
    assert sharded == plain
    # and what they both did is what the queue API promises
    assert plain["enqueue"] == ["created", "exists", "created", "deduplicated"]
    assert plain["dequeued"] == ["a", "b", "c", "d", "e", "f", "k1"]
    assert plain["requeue"] == [durq.Outcome.DEAD, durq.Outcome.RETRYING]
    assert plain["result"] == PayloadCodec("json").encode(1)[1]
    assert plain["replay"] == (1, 0) and plain["purge"] == (0, 1)
    assert plain["limits"] == (6, 0) and plain["check"] == []
