"""Expand/contract for workflows (durq.app.fleet), with a heartbeat of durq 0.1.0 planted
in the registry (no format in it, as 0.1.0 writes it): while such a worker consumes one
of a workflow's queues, a submission writes 0.1.0's layout, which this tree's workers
run too (lua/lib/workflows/legacy.lua); a workflow that layout cannot hold is refused
with durq.FleetTooOld and nothing written; an old worker of other queues, or none,
leaves the new layout. The real mixed fleet: tests/deploy/test_upgrade.py."""

from __future__ import annotations

import secrets

import orjson
import pytest
import redis

import durq
from durq.app.fleet import FleetGate
from durq.keys import NamespaceKeys, QueueKeys, workflow_key
from durq.protocol import workflows_legacy
from worker.support import running_worker
from workflows.support import Front


def _plant_old_worker(raw: redis.Redis, app: durq.App, queues: list[str]) -> str:
    """A heartbeat as durq 0.1.0's worker writes it (no version, no format)."""
    space = NamespaceKeys(app.namespace)
    worker_id = f"oldhost:1:{secrets.token_hex(3)}"
    fields = {"host": "oldhost", "pid": 1, "queues": queues, "concurrency": 10, "started": 0}
    raw.hset(space.worker(worker_id), mapping={k: orjson.dumps(v) for k, v in fields.items()})
    raw.pexpire(space.worker(worker_id), 60_000)
    raw.sadd(space.workers, worker_id)
    return worker_id


def _forget(raw: redis.Redis, app: durq.App, worker_id: str) -> None:
    space = NamespaceKeys(app.namespace)
    raw.delete(space.worker(worker_id))
    raw.srem(space.workers, worker_id)
    app._fleet = FleetGate(app.namespace)  # what it read of the fleet, forgotten


async def test_while_a_0_1_0_worker_consumes_its_queues_a_workflow_is_written_in_its_layout(
    wapp: durq.App, front: Front, raw: redis.Redis, log: str
) -> None:
    t = wapp.tasks
    home, other = wapp.default_queue, f"{wapp.default_queue}-far"  # two slots
    old = _plant_old_worker(raw, wapp, [other])
    try:
        chain = durq.chain(
            t["link"].s([], log, "a"), t["link"].options(queue=other).s(log, "b"),
            t["link"].s(log, "c"),
        )  # fmt: skip
        grouped = durq.group(
            [t["square"].s(log, 1), t["square"].options(queue=other).s(log, 2)]
        ).then(t["collect"].s(log))
        handles = [await front.enqueue(chain), await front.enqueue(grouped)]
        for h in handles:
            # 0.1.0's layout: no run, one hash with the barriers, step ids <wid>.<node>
            assert h.run == "", h
            wk = workflow_key(QueueKeys(h.queue, wapp.namespace).prefix, h.id)
            assert raw.hget(wk, "Q") is not None and raw.hget(wk, "run") is None
        expired = durq.chain(t["echo"].s(1), t["echo"].options(queue=other, expires=60).s())
        with pytest.raises(durq.FleetTooOld, match=old) as caught:
            await front.enqueue(expired, id="refused")
        assert caught.value.workers == [old]
        assert "expires" in str(caught.value) and "nothing was written" in str(caught.value)
        assert raw.exists(workflow_key(QueueKeys(home, wapp.namespace).prefix, "refused")) == 0
        with running_worker(wapp, queues=[home, other]):
            assert await front.result(handles[0], 30) == ["a", "b", "c"]
            assert await front.result(handles[1], 30) == 2
            info = await front.status(handles[1])
            assert info is not None and {s.job_id for s in info.steps} == {
                f"{handles[1].id}.{n}" for n in (3, 4, 5)
            }
        # an old worker of other queues only: the new layout
        _forget(raw, wapp, old)
        elsewhere = _plant_old_worker(raw, wapp, ["some-other-queue"])
        fresh = await front.enqueue(durq.chain(t["echo"].s(1), t["echo"].options(queue=other).s()))
        assert fresh.run
        # none left: the new layout, and what 0.1.0 could not hold is submitted
        _forget(raw, wapp, elsewhere)
        again = await front.enqueue(expired, id="refused")
        assert again.created and again.run
        with running_worker(wapp, queues=[home, other]):
            assert await front.result(fresh, 30) == 1
            assert await front.result(again, 30) == 1
    finally:
        _forget(raw, wapp, old)


def test_a_producer_reads_the_fleet_at_most_once_per_fleet_ttl(
    wapp: durq.App, raw: redis.Redis, log: str
) -> None:
    t = wapp.tasks
    flow = durq.chain(t["echo"].s(1), t["echo"].s())
    assert flow.enqueue().run  # the fleet read: no old worker
    old = _plant_old_worker(raw, wapp, [wapp.default_queue])
    try:
        assert flow.enqueue().run, "read again within FLEET_TTL"
        wapp._fleet._read_at -= 60.0  # FLEET_TTL passed
        assert flow.enqueue().run == ""
    finally:
        _forget(raw, wapp, old)


def test_a_large_group_in_0_1_0_s_layout_starts_from_0_1_0_s_cursor(
    wapp: durq.App, raw: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node of more than 500 leaves starts 500 per call from a cursor that is an index,
    as 0.1.0 writes and reads it, so that either version's 'R' order continues the
    other's start (lib/workflows/legacy.lua). (0.1.0 submits such workflows; this
    version's own are refused in that layout past LEGACY_MAX_STEPS: lifted here.)"""
    monkeypatch.setattr(workflows_legacy, "LEGACY_MAX_STEPS", 1_000)
    t = wapp.tasks
    old = _plant_old_worker(raw, wapp, [wapp.default_queue])
    try:
        handle = durq.group([t["echo"].s(i) for i in range(600)]).enqueue()
        assert handle.run == ""
        wk = workflow_key(QueueKeys(handle.queue, wapp.namespace).prefix, handle.id)
        assert raw.hget(wk, "c0") == b"601"  # all started: past the end, as 0.1.0 marks it
        assert wapp.queue(handle.queue).stats().pending == 600
        with running_worker(wapp, queues=[handle.queue], concurrency=50):
            assert handle.result(60) == list(range(600))
    finally:
        _forget(raw, wapp, old)


def test_a_workflow_too_large_for_0_1_0_s_one_call_stop_is_refused_while_it_lives(
    wapp: durq.App, raw: redis.Redis, log: str
) -> None:
    """0.1.0's layout stops all of a workflow's steps in one call (a cancel, a failure):
    past LEGACY_MAX_STEPS steps that call would run over durq's 10 ms, so such a
    workflow is refused while a 0.1.0 worker consumes its queues, and written in the new
    layout once none does."""
    t = wapp.tasks
    big = durq.group(
        [t["square"].s(log, i) for i in range(workflows_legacy.LEGACY_MAX_STEPS)]
    ).then(t["collect"].s(log))  # LEGACY_MAX_STEPS + 1 steps with the callback
    old = _plant_old_worker(raw, wapp, [wapp.default_queue])
    try:
        with pytest.raises(
            durq.FleetTooOld, match=f"{workflows_legacy.LEGACY_MAX_STEPS + 1} steps"
        ):
            big.enqueue(id="too-big")
        home = QueueKeys(wapp.default_queue, wapp.namespace).prefix
        assert raw.exists(workflow_key(home, "too-big")) == 0
        small = durq.group([t["square"].s(log, 1)]).then(t["collect"].s(log))
        assert small.enqueue().run == ""  # within the bound: 0.1.0's layout
    finally:
        _forget(raw, wapp, old)
    assert big.enqueue(id="too-big").run  # no old worker: the new layout
