"""Every task call takes one path to its queue (``App._enqueue``, ``durq.app.jobs``):
``Task.enqueue``, ``Task.enqueue_many``, ``options(...)`` and ``enqueue_calls`` store the
same jobs, with the same checks, results and guarantees."""

from __future__ import annotations

import enum

import pytest

import durq
from durq.models import EnqueueStatus, JobState


class Colour(enum.IntEnum):
    RED = 1


def _app(url: str, **options: object) -> durq.App:
    return durq.App(url=url, **options)  # type: ignore[arg-type]


def test_single_and_bulk_enqueue_store_what_enqueue_calls_stores(
    redis_url: str, queue_name: str
) -> None:
    app = _app(redis_url)

    @app.task(queue=queue_name, max_attempts=7)
    def add(a: int, b: int = 0) -> int:
        return a + b

    fast = [add.enqueue(1, b=2), *add.enqueue_many([(3,), (4, 5)])]
    slow = app.enqueue_calls([add.call(1, b=2), add.call(3), add.call(4, 5)])
    queue = app.queue(queue_name)
    for f, s in zip(fast, slow, strict=True):
        assert f.status is EnqueueStatus.CREATED and f.queue == queue_name
        fi, si = queue.job(f.id), queue.job(s.id)
        assert fi is not None and si is not None
        assert (fi.payload(), fi.max_attempts, fi.state) == (
            si.payload(),
            si.max_attempts,
            si.state,
        )
        assert fi.state is JobState.PENDING and fi.max_attempts == 7
    assert queue.stats().pending == 6
    app.close()


def test_bad_arguments_are_refused_every_time_with_the_parameter_named(
    redis_url: str, queue_name: str
) -> None:
    app = _app(redis_url)

    @app.task(queue=queue_name)
    def one(a: int) -> None: ...

    for _ in range(2):  # the second time from the remembered signature check
        with pytest.raises(durq.InvalidArgument, match="one\\(\\)"):
            one.enqueue(1, 2)  # type: ignore[call-arg]
        with pytest.raises(durq.InvalidArgument):
            one.enqueue_many([(1, 2)])
        with pytest.raises(durq.NotSerializable, match="argument 'a'"):
            one.enqueue({1, 2})  # type: ignore[arg-type]
    # a subclass of a JSON type takes the checking path, which accepts it
    assert one.enqueue(Colour.RED).status is EnqueueStatus.CREATED
    assert app.queue(queue_name).stats().pending == 1
    app.close()


async def test_aenqueue_and_aenqueue_many_take_the_same_path(
    redis_url: str, queue_name: str
) -> None:
    app = _app(redis_url)

    @app.task(queue=queue_name)
    async def work(n: int) -> None: ...

    handles = [await work.aenqueue(0), *(await work.aenqueue_many([(i,) for i in range(1, 2500)]))]
    assert len({h.id for h in handles}) == 2500  # more than one script call's batch
    assert app.queue(queue_name).stats().pending == 2500
    await app.aclose()
    app.close()


def test_durability_is_confirmed_on_the_fast_path(redis_url: str, queue_name: str) -> None:
    app = _app(redis_url, durability=durq.Durability(replicas=1, timeout=0.05))

    @app.task(queue=queue_name)
    def work(n: int) -> None: ...

    with pytest.raises(durq.NotDurable) as caught:
        work.enqueue(1)  # no replica: written, not confirmed
    results = getattr(caught.value, "results", None)
    assert results is not None and results[0].status is EnqueueStatus.CREATED
    app.close()


def test_calls_of_several_tasks_and_options_reach_their_queue_in_the_callers_order(
    redis_url: str, queue_name: str
) -> None:
    app = _app(redis_url)

    @app.task(queue=queue_name)
    def first(n: int) -> None: ...

    @app.task(queue=queue_name, max_attempts=3)
    def second(n: int) -> None: ...

    other = f"{queue_name}-other"
    calls = [
        first.call(0),
        second.call(1),
        first.call(2).with_options(key="two"),
        first.call(3).with_options(queue=other),
        second.call(4),
        first.call(5),
    ]
    handles = app.enqueue_calls(calls)
    assert [h.queue for h in handles] == [queue_name] * 3 + [other] + [queue_name] * 2
    queue = app.queue(queue_name)
    taken = [queue.dequeue() for _ in range(5)]
    assert [job.payload[1][0] for job in taken if job is not None] == [0, 1, 2, 4, 5]
    assert [job.max_attempts for job in taken if job is not None] == [5, 3, 5, 3, 5]
    assert all(app.queue(h.queue).job(h.id) is not None for h in handles)
    app.close()
