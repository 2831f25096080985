"""Twins that cannot drift (issue 32): every coroutine method of the App layer (the App,
tasks, handles, schedules, topics, workflows) has a blocking twin named without its
``a`` (``aresult`` -> ``result``, ``_aenqueue`` -> ``_enqueue``), with the same
parameters, defaults and return type; and the async twins no other test calls do what
their blocking twins do, told the same story on the same server."""

from __future__ import annotations

import inspect
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from durq.app.app import App
from durq.app.handle import JobHandle
from durq.app.schedule_control import Schedules
from durq.app.task import Task, TaskCaller
from durq.app.topics import AppTopic
from durq.app.workflows import Chain, Group, WorkflowHandle, _Flow

CLASSES = [App, Task, TaskCaller, JobHandle, Schedules, AppTopic, WorkflowHandle, _Flow]
#: the parameters only an async twin has, and why
ASYNC_ONLY = {
    "Schedules.aupsert": {
        "client": "a worker's own asyncio client (an asyncio pool belongs to one event "
        "loop; the app's blocking pool serves every thread)"
    },
}


def _twin_name(name: str) -> str:
    return "_" + name[2:] if name.startswith("_a") else name[1:]


def _coroutines(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in vars(cls).items()
        if inspect.iscoroutinefunction(member) and not name.startswith("__")
    }


def test_the_app_layer_has_async_methods_to_check() -> None:
    found = {f"{cls.__name__}.{name}" for cls in CLASSES for name in _coroutines(cls)}
    # a guard on the guard: the scan sees the pairs the issue names
    assert {"App.aenqueue_calls", "JobHandle.aresult", "Schedules.aupsert"} <= found
    assert {"AppTopic.apublish", "WorkflowHandle.astatus", "Task.aenqueue_many"} <= found
    # and the flows inherit theirs
    assert Chain.aenqueue is _Flow.aenqueue and Group.aenqueue is _Flow.aenqueue


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_async_method_has_a_blocking_twin_with_the_same_parameters(cls: type) -> None:
    for name, method in _coroutines(cls).items():
        assert name.startswith(("a", "_a")), f"{cls.__name__}.{name}: an async name starts with a"
        twin = getattr(cls, _twin_name(name), None)
        assert twin is not None, f"{cls.__name__}.{name} has no blocking twin"
        assert not inspect.iscoroutinefunction(twin), f"{cls.__name__}.{_twin_name(name)}"
        mine, theirs = inspect.signature(method), inspect.signature(twin)
        only = ASYNC_ONLY.get(f"{cls.__name__}.{name}", {})
        params = [p for p in mine.parameters.values() if p.name not in only]
        assert params == list(theirs.parameters.values()), (
            f"{cls.__name__}.{name}{mine} != {_twin_name(name)}{theirs}"
        )
        assert mine.return_annotation == theirs.return_annotation, f"{cls.__name__}.{name}"


# -- what the async twins no other test calls do ----------------------------------------


@pytest.fixture
def app(redis_url: str) -> Iterator[App]:
    app = App(redis_url, namespace=f"tw-{secrets.token_hex(4)}", default_queue="twins")

    @app.task(queue="twins")
    def add(a: int, b: int) -> int:  # pragma: no cover - enqueued, never run here
        return a + b

    news = app.topic("news")

    @news.subscriber("mail")
    def mail(text: str) -> None:  # pragma: no cover
        pass

    @news.subscriber("feed")
    def feed(text: str) -> None:  # pragma: no cover
        pass

    news.subscribe("mail")
    news.subscribe("feed")
    yield app
    app.close()


def _what(handle: JobHandle[Any]) -> tuple[Any, ...]:
    """A job as the queue holds it, without its id and times."""
    info = handle.info()
    assert info is not None
    return (handle.queue, info.state, info.payload(), info.priority, info.max_attempts)


async def test_aenqueue_calls_enqueues_what_enqueue_calls_does(app: App) -> None:
    add = app.tasks["add"]
    calls = [add.call(1, 2), add.options(priority=3, delay=60).call(3, 4)]
    sync = app.enqueue_calls(calls)
    both = await app.aenqueue_calls(calls)
    assert [_what(h) for h in both] == [_what(h) for h in sync]
    await app.aclose()


async def test_ainfo_and_aprogress_read_what_info_and_progress_do(app: App) -> None:
    handle = app.tasks["add"].enqueue(1, 2)
    assert await handle.aprogress() is None and handle.progress() is None
    queue = app.queue("twins")
    job = queue.dequeue(lease=30)
    assert job is not None and job.id == handle.id
    assert queue.progress(job, 0.25, {"rows": 10}) is False  # True: a cancel was asked
    assert await handle.ainfo() == handle.info()
    assert await handle.aprogress() == handle.progress()
    progress = handle.progress()
    assert progress is not None and (progress.fraction, progress.info) == (0.25, {"rows": 10})
    await app.aclose()


async def test_apublish_hands_every_subscription_what_publish_does(app: App) -> None:
    news = app.topics["news"]
    sync = news.publish("hello", urgent=True)
    both = await news.apublish("hello", urgent=True)
    assert sorted(both) == sorted(sync) == ["feed", "mail"]
    assert [both[s].status for s in sorted(both)] == [sync[s].status for s in sorted(sync)]
    for subscriber in ("feed", "mail"):
        queue = app.queue(f"news/{subscriber}")
        jobs = queue.dequeue_many(10, lease=30)
        assert [j.payload for j in jobs] == [jobs[0].payload] * 2 and len(jobs) == 2
    await app.aclose()
