"""Workflows on a sharded queue (found in the review of issue 30): a step with a group
goes to that group's shard, as ``ShardedQueue`` routes the group's jobs, so the group's
limit holds across the queue; the sharded queue is registered by its name (not its
shards as queues of their own); ``durq workflow show`` and ``cancel`` find a workflow
whose home is a shard; and ``status()`` shows a step whose start is still on its way
to another shard as ``starting``, not ``done``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durq
from cli.support import durq as run
from durq.keys import NamespaceKeys, shard_index, shard_name
from durq.protocol.namespace import queue_names, shard_counts
from worker.support import running_worker
from workflows.apps import build
from workflows.support import Front, courier

SHARDS = 4


@pytest.fixture
def sapp(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    """The workflow test App with a sharded queue (this test's queue name + "-s")."""
    app = build(redis_url, default_queue=queue_name, shards={f"{queue_name}-s": SHARDS})
    yield app
    app.close()


async def test_a_step_with_a_group_goes_to_its_group_s_shard(
    sapp: durq.App, log: str, queue_name: str
) -> None:
    name = f"{queue_name}-s"
    front = Front(sapp, "async")
    sq = sapp.tasks["square"].options(queue=name, group="tenant-7")
    steps = [sq.s(log, i) for i in range(8)]
    handle = await front.enqueue(durq.group(steps))
    info = await front.status(handle)
    assert info is not None
    home = shard_name(name, shard_index("tenant-7", SHARDS))
    assert {s.queue for s in info.steps} == {home}  # where the group's plain jobs go
    # so the group's limit holds across the queue: one of its jobs at a time
    sharded = sapp.sharded_queue(name)
    sharded.shards[shard_index("tenant-7", SHARDS)].configure(group_limit=1)
    plain = sharded.enqueue(["square", [log, 9], {}], group="tenant-7")
    assert plain.queue == home
    shard = sharded.shards[shard_index("tenant-7", SHARDS)]
    assert shard.dequeue() is not None
    assert shard.dequeue() is None
    await sapp.aclose()


def test_a_workflow_on_a_sharded_queue_registers_it_by_its_name(
    sapp: durq.App, log: str, queue_name: str
) -> None:
    name = f"{queue_name}-s"
    sq = sapp.tasks["square"].options(queue=name)
    collect = sapp.tasks["collect"].options(queue=name)
    handle = durq.group([sq.s(log, i) for i in range(12)]).then(collect.s(log)).enqueue()
    space = NamespaceKeys("durq")
    queue = sapp.queue(handle.queue)
    names = queue._run(queue_names(space))
    assert name in names and not any(n.startswith(f"{name}~") for n in names)
    assert queue._run(shard_counts(space))[name] == SHARDS
    # steps in other shards than the home wait for their start (an outbox entry)
    info = handle.status()
    assert info is not None and "done" not in info.counts
    assert info.counts.get("starting", 0) > 0, info.counts
    courier(queue)
    info = handle.status()
    assert info is not None and set(info.counts) == {"pending", "waiting"}
    # the CLI finds it in its shard, among the registered queues (in this process: a
    # `durq` process took 2-3 s a command on a loaded machine)
    shown = run("workflow", "show", handle.id, "--url", sapp.url)
    assert shown.exit_code == 0 and "running" in shown.output, shown.output
    shown = run("workflow", "show", handle.id, "-q", handle.queue, "--url", sapp.url)
    assert shown.exit_code == 0 and "running" in shown.output, shown.output
    cancelled = run("workflow", "cancel", handle.id, "--url", sapp.url)
    assert cancelled.exit_code == 0 and "cancelled" in cancelled.output, cancelled.output
    with running_worker(sapp, queues=[name]), pytest.raises(durq.Cancelled):
        handle.result(5)


async def test_a_workflow_id_has_one_home_whichever_shards_its_steps_go_to(
    sapp: durq.App, log: str, queue_name: str, redis_url: str
) -> None:
    """Found by the model test: steps without a group go to any shard, and the home was
    a shard holding most of them: the same id submitted again landed in another home
    and ran again. It lives in the App's default queue; when that queue is sharded, in
    its shard of the id."""
    front = Front(sapp, "async")
    sq = sapp.tasks["square"].options(queue=f"{queue_name}-s")
    handles = [
        await front.enqueue(durq.group([sq.s(log, i) for i in range(3)]), id="sharded-7")
        for _ in range(8)
    ]
    assert [h.created for h in handles] == [True] + [False] * 7
    assert {(h.queue, h.run) for h in handles} == {(sapp.default_queue, handles[0].run)}
    await sapp.aclose()
    home = f"{queue_name}-d"
    app = build(redis_url, default_queue=home, shards={home: SHARDS})
    try:
        flow = durq.chain(app.tasks["square"].options(queue=queue_name).s(log, 1))
        first = flow.enqueue(id="sharded-8")
        assert first.queue == shard_name(home, shard_index("sharded-8", SHARDS))
        assert not flow.enqueue(id="sharded-8").created
    finally:
        app.close()
