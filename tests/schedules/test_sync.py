"""Syncing the declared schedules (``app.sync_schedules()``, and the asyncio twin that a
worker runs when it starts) where it meets runtime control and code changes: a timing
change keeps a runtime pause, a schedule moved to another queue stops firing in the old
one, a schedule removed from the code is reported even when the app declares none
(issue 30, bugs 5, 6 and 12). Each runs through both front ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import durq
from durq.app.schedule_control import SyncReport
from durq.transport import connection
from durq.worker.schedules import ScheduleKeeper
from schedules.apps import build
from schedules.test_engine import drain

Sync = Callable[..., SyncReport]


@pytest.fixture(params=["sync", "async"])
def sync(request: pytest.FixtureRequest) -> Sync:
    """``sync(app, queues=None, remove_missing=False)`` through the test's front end."""

    def run(app: durq.App, queues: list[str] | None = None, **options: Any) -> SyncReport:
        if request.param == "sync":
            return app.sync_schedules(queues, **options)

        async def go() -> SyncReport:
            client = connection.async_client(app.url)
            try:
                return await app.schedules.aupsert(queues, client=client, **options)
            finally:
                await client.aclose()

        return asyncio.run(go())

    return run


@pytest.fixture
def apps(redis_url: str, queue_name: str) -> Iterator[Callable[[], durq.App]]:
    """Versions of the test's App (each a deploy of new code), closed at the end."""
    made: list[durq.App] = []

    def make() -> durq.App:
        app = build(redis_url, queue_name)
        made.append(app)
        return app

    yield make
    for app in made:
        app.close()


def test_a_timing_change_keeps_a_runtime_pause(apps: Callable[[], durq.App], sync: Sync) -> None:
    app = apps()
    app.schedule("hb", "tick", every=0.2, args=("log",))
    sync(app)
    app.schedules.pause("hb")
    newer = apps()
    newer.schedule("hb", "tick", every=0.3, args=("log",))
    assert sync(newer).changed == ["hb"]
    info = newer.schedules.get("hb")
    assert info is not None and info.state == "paused" and info.next_due is None
    assert drain(newer.queue(newer.default_queue), 0.5) == []
    # the declared flag changing overrides the pause, with or without a timing change
    latest = apps()
    latest.schedule("hb", "tick", every=0.25, args=("log",), enabled=False)
    sync(latest)
    latest.schedules.resume("hb")  # a runtime resume of a schedule declared disabled ...
    last = apps()
    last.schedule("hb", "tick", every=0.2, args=("log",), enabled=False)
    assert sync(last).changed == ["hb"]
    info = last.schedules.get("hb")
    assert info is not None and info.state == "active"  # ... stands too


def test_a_schedule_moved_to_another_queue_fires_in_the_new_queue_only(
    apps: Callable[[], durq.App], sync: Sync, queue_name: str
) -> None:
    old, new = f"{queue_name}-old", f"{queue_name}-new"
    app = apps()
    app.schedule("hb", "tick", every=0.2, args=("log",), queue=old)
    sync(app)
    # the new code declares it in another queue; a worker of the old queue syncs first:
    # it removes the old copy and creates the new one (no gap in a rolling deploy)
    moved = apps()
    moved.schedule("hb", "tick", every=0.2, args=("log",), queue=new)
    report = sync(moved, [old])
    assert report.moved == [(old, "hb", new)] and report.created == ["hb"]
    assert report.missing == []
    assert moved.schedules.get("hb", old) is None
    assert drain(moved.queue(old), 0.5) == []
    assert sync(moved, [new]).unchanged == ["hb"]
    assert drain(moved.queue(new), 0.5)
    # a copy of the name that runs another task is not this schedule: reported, kept
    other = apps()
    other.schedule("hb", "add", every=60, args=(1,), queue=old)
    sync(other, [old])
    assert sync(moved, [old]).missing == [(old, "hb")]
    assert moved.schedules.get("hb", old) is not None


def test_a_moved_schedule_is_found_by_its_new_queue_and_keeps_a_runtime_pause(
    apps: Callable[[], durq.App], sync: Sync, queue_name: str
) -> None:
    old, new = f"{queue_name}-old", f"{queue_name}-new"
    app = apps()
    app.task(name="elsewhere", queue=old)(lambda: None)  # the old queue stays the app's
    app.schedule("hb", "tick", every=0.2, args=("log",), queue=old)
    sync(app)
    app.schedules.pause("hb")
    # a worker of the new queue syncs first: the old copy goes when it is created there
    moved = apps()
    moved.task(name="elsewhere", queue=old)(lambda: None)
    moved.schedule("hb", "tick", every=0.2, args=("log",), queue=new)
    report = sync(moved, [new])
    assert report.created == ["hb"] and report.moved == [(old, "hb", new)]
    assert moved.schedules.get("hb", old) is None
    info = moved.schedules.get("hb")
    assert info is not None and info.queue == new and info.state == "paused"
    assert drain(moved.queue(new), 0.5) == [] and drain(moved.queue(old), 0.3) == []
    assert sync(moved).unchanged == ["hb"]  # settled: nothing moves again
    moved.schedules.resume("hb")
    assert drain(moved.queue(new), 0.5)


def test_a_removed_schedule_is_reported_when_the_app_declares_none(
    apps: Callable[[], durq.App], sync: Sync, queue_name: str
) -> None:
    app = apps()
    app.schedule("hb", "tick", every=60, args=("log",))
    sync(app)
    bare = apps()  # the new code declares no schedule at all
    assert sync(bare).missing == [(queue_name, "hb")]
    assert sync(bare, remove_missing=True).removed == [(queue_name, "hb")]
    assert bare.schedules.all() == []


def test_a_worker_of_an_app_without_schedules_warns_of_a_removed_one(
    apps: Callable[[], durq.App], queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = apps()
    app.schedule("hb", "tick", every=60, args=("log",))
    app.sync_schedules()
    bare = apps()

    async def start() -> None:
        client = connection.async_client(bare.url)
        try:
            queue = bare.aqueue(queue_name, client=client)
            await ScheduleKeeper(bare.schedules, [queue_name], [queue], client).start()
        finally:
            await client.aclose()

    with caplog.at_level(logging.WARNING, logger="durq.worker"):
        asyncio.run(start())
    assert any("'hb'" in r.getMessage() and "no longer declared" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    assert bare.schedules.get("hb", queue_name) is not None  # reported, not removed
