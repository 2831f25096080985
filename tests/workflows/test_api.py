"""Workflows with an in-process worker: results passed between steps, nesting, queues
in other slots, status, idempotent submission, and nothing left behind."""

from __future__ import annotations

import time

import pytest
import redis

import durq
from worker.support import running_worker
from workflows.support import leftovers, runs


def test_a_group_then_a_callback(wapp: durq.App, log: str, raw: redis.Redis) -> None:
    square, collect = wapp.tasks["square"], wapp.tasks["collect"]
    handle = durq.group([square.s(log, i) for i in range(20)]).then(collect.s(log)).enqueue()
    info = handle.status()
    assert info is not None and info.state == "running"
    assert info.counts == {"pending": 20, "waiting": 1}
    assert info.waiting_on == {2: 20}
    with running_worker(wapp):
        assert handle.result(10) == 20
    [callback] = runs(log, "callback")
    assert callback["results"] == [i * i for i in range(20)]
    assert callback["job"] == handle.step_id(len(range(20)) + 3)
    info = handle.status()
    assert info is not None and info.state == "completed"
    assert set(info.counts) == {"done"}
    assert leftovers(raw, [handle.queue], [handle.id]) == []


def test_a_chain_passes_each_result_on(wapp: durq.App, log: str, raw: redis.Redis) -> None:
    link = wapp.tasks["link"]
    steps = [link.si([], log, "k0")] + [link.s(log, f"k{i}") for i in range(1, 5)]
    handle = durq.chain(*steps).enqueue()
    with running_worker(wapp):
        assert handle.result(10) == [f"k{i}" for i in range(5)]
    assert [r["seen"] for r in runs(log)] == [[f"k{j}" for j in range(i)] for i in range(5)]
    assert leftovers(raw, [handle.queue], [handle.id]) == []


def test_nesting(wapp: durq.App, log: str) -> None:
    t = wapp.tasks
    sq, double, total, echo = t["square"], t["double"], t["total"], t["echo"]
    chain_of_groups = durq.chain(
        durq.group([sq.s(log, 1), sq.s(log, 2)]), total.s(), durq.group([double.s(), echo.s()])
    )
    group_of_chains = durq.group(
        [durq.chain(sq.s(log, 3), double.s()), sq.s(log, 4), durq.group([echo.si("x")])]
    ).then(echo.s())
    a = chain_of_groups.enqueue()
    b = group_of_chains.enqueue()
    with running_worker(wapp):
        assert a.result(10) == [10, 5]
        assert b.result(10) == [18, 16, ["x"]]


def test_steps_in_other_slots(wapp: durq.App, log: str, raw: redis.Redis) -> None:
    """Queues with other hash tags: completions and starts go through the outboxes."""
    sq, collect, link = wapp.tasks["square"], wapp.tasks["collect"], wapp.tasks["link"]
    queue = wapp.default_queue
    other, sub = f"{queue}-b", f"{queue}/sub"  # another slot; the same slot
    fan = durq.group(
        [sq.options(queue=other).s(log, i) for i in range(6)] + [sq.s(log, 6), sq.s(log, 7)]
    ).then(collect.s(log))
    hops = durq.chain(
        link.si([], log, "a"),
        link.options(queue=other).s(log, "b"),
        link.options(queue=sub).s(log, "c"),
        link.s(log, "d"),
    )
    a, b = fan.enqueue(), hops.enqueue()
    assert a.queue == other  # the slot of most of its steps
    with running_worker(wapp, queues=[queue, other, sub]):
        assert a.result(10) == 8
        assert b.result(10) == ["a", "b", "c", "d"]
    [callback] = runs(log, "callback")
    assert callback["results"] == [i * i for i in range(8)]
    assert leftovers(raw, [queue, other, sub], [a.id, b.id]) == []


def test_immutable_steps_get_no_input(wapp: durq.App) -> None:
    echo, shout = wapp.tasks["echo"], wapp.tasks["shout"]
    a = durq.chain(echo.si(1), echo.si(2), echo.s()).enqueue()
    b = durq.chain(echo.si(1), shout.si("x")).enqueue()
    c = durq.group([echo.si(1), echo.si(2)]).then(echo.si("cb")).enqueue()
    with running_worker(wapp):
        assert a.result(10) == 2
        assert b.result(10) == "X"
        assert c.result(10) == "cb"


def test_enqueueing_an_id_again_changes_nothing(wapp: durq.App, log: str) -> None:
    sq = wapp.tasks["square"]
    first = durq.group([sq.s(log, 1)]).enqueue(id="wf-fixed")
    again = durq.group([sq.s(log, 1), sq.s(log, 2)]).enqueue(id="wf-fixed")
    assert first.created and not again.created
    with running_worker(wapp):
        assert again.result(10) == [1]
    assert durq.group([sq.s(log, 1)]).enqueue(id="wf-fixed").created is False
    assert len(runs(log)) == 1


async def test_asyncio(wapp: durq.App, log: str) -> None:
    sq, total = wapp.tasks["square"], wapp.tasks["total"]
    handle = await durq.group([sq.s(log, i) for i in range(4)]).then(total.s()).aenqueue()
    info = await handle.astatus()
    assert info is not None and info.state == "running"
    with running_worker(wapp):
        assert await handle.aresult(10) == 14
    await wapp.aclose()


def test_a_result_times_out_while_the_workflow_runs(wapp: durq.App, log: str) -> None:
    handle = durq.chain(wapp.tasks["square"].s(log, 2)).enqueue()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        handle.result(0.2)
    assert time.monotonic() - started < 2
