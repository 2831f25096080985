"""Bad input is refused before anything is sent, with a message that says what is wrong."""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from durq import (
    AsyncQueue,
    InvalidArgument,
    JobNotFound,
    Message,
    NotSerializable,
    PayloadTooLarge,
    Queue,
)
from durq.codec import Codec
from durq.keys import NamespaceKeys
from durq.protocol.args import new_ids
from engine.support import keys_of


@pytest.fixture
def q(local_q: Any) -> Any:
    """Arguments are checked before anything is sent: the default server is enough."""
    return local_q


@pytest.fixture
def raw(redis_url: str) -> Iterator[Any]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
async def untouched(q: Any, raw: Any) -> Any:
    """Checks, after the test, that the refused calls left the queue's keys as they were."""
    await q.enqueue("before", id="before")
    before = keys_of(raw, q)
    yield
    assert keys_of(raw, q) == before


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"tags": {"a", "b"}}, "payload['tags'] is a set"),
        ({"at": datetime.datetime(2024, 1, 1)}, "payload['at'] is a datetime"),
        ([1, 2, math.nan], "payload[2] is nan"),
        ({"x": [math.inf]}, "payload['x'][0] is inf"),
        ({"deep": [{"blob": b"\x00"}]}, "payload['deep'][0]['blob'] is a bytes"),
        ({1: "int key"}, "payload has a key 1"),
        (object(), "payload is a object"),
        (bytearray(b"x"), "payload is a bytearray"),
    ],
)
async def test_a_payload_that_is_not_json_data_is_refused_naming_the_path(
    q: Any, untouched: Any, payload: Any, where: str
) -> None:
    with pytest.raises(NotSerializable) as caught:
        await q.enqueue(payload)
    assert where in str(caught.value)
    assert isinstance(caught.value, TypeError)


async def test_one_bad_payload_refuses_the_whole_batch(q: Any, untouched: Any) -> None:
    with pytest.raises(NotSerializable, match=r"payload\['when'\]"):
        await q.enqueue_many([{"ok": 1}, {"when": datetime.date.today()}])


async def test_a_payload_over_max_payload_bytes_is_refused(make_q: Any) -> None:
    q = make_q(max_payload_bytes=100)
    await q.enqueue("x" * 90)
    with pytest.raises(PayloadTooLarge, match="max_payload_bytes"):
        await q.enqueue("x" * 200)
    with pytest.raises(PayloadTooLarge):
        await q.enqueue(b"\x00" * 101)
    assert (await q.stats()).pending == 1


async def test_enqueue_encoded_refuses_a_payload_over_max_payload_bytes_too(
    make_q: Any,
) -> None:
    q = make_q(max_payload_bytes=100)
    small, large = new_ids(2)
    jobs = [(small, int(Codec.JSON), b'"fits"'), (large, int(Codec.JSON), b'"' + b"x" * 200 + b'"')]
    with pytest.raises(PayloadTooLarge, match="max_payload_bytes"):
        await q.enqueue_encoded(jobs)
    assert (await q.stats()).enqueued == 0  # none of the batch
    await q.enqueue_encoded(jobs[:1])
    assert (await q.stats()).pending == 1


async def test_a_deeply_nested_payload_is_refused(q: Any, untouched: Any) -> None:
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(NotSerializable, match="nested"):
        await q.enqueue(deep)


async def test_an_integer_beyond_64_bits_is_refused(q: Any, untouched: Any) -> None:
    with pytest.raises(NotSerializable):
        await q.enqueue({"big": 2**70})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delay": -1}, "delay"),
        ({"delay": math.nan}, "delay"),
        ({"delay": "5"}, "delay"),
        ({"delay": 11 * 365 * 86400}, "delay"),
        ({"priority": 11}, "priority"),
        ({"priority": 1.5}, "priority"),
        ({"priority": True}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": "3"}, "max_attempts"),
        ({"id": ""}, "job id"),
        ({"id": 17}, "job id"),
        ({"id": "a\nb"}, "control"),
        ({"id": "x" * 201}, "200"),
        ({"group": ""}, "group"),
        ({"group": "tab\there"}, "control"),
        ({"group": "é" * 101}, "200"),
        ({"key": "k\x00"}, "control"),
        ({"key": 5}, "key"),
        ({"replace": True}, "needs a key"),
    ],
)
async def test_enqueue_options_out_of_range_are_refused(
    q: Any, untouched: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        await q.enqueue("x", **options)


@pytest.mark.parametrize("lease", [0, -1, 0.01, math.inf, "30", None.__class__, 8 * 86400])
async def test_a_lease_out_of_range_is_refused(q: Any, untouched: Any, lease: Any) -> None:
    with pytest.raises(InvalidArgument, match="lease"):
        await q.dequeue(lease=lease)


@pytest.mark.parametrize("count", [0, -3, 2.0, "5", True])
async def test_a_dequeue_count_must_be_a_positive_int(q: Any, untouched: Any, count: Any) -> None:
    with pytest.raises(InvalidArgument, match="count"):
        await q.dequeue_many(count)


@pytest.mark.parametrize("wait", [-1, math.nan, "1"])
async def test_a_bad_wait_is_refused(q: Any, untouched: Any, wait: Any) -> None:
    with pytest.raises(InvalidArgument, match="wait"):
        await q.dequeue(wait=wait)


async def test_leases_delays_and_keeps_of_held_jobs_are_checked(q: Any, raw: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    before = keys_of(raw, q)
    calls = [
        q.extend(job, lease=0),
        q.extend(job, lease=-5),
        q.extend_many([job], lease=math.nan),
        q.defer(job, -1),
        q.requeue(job, delay=-2),
        q.release(job, keep=-1),
        q.requeue_many([job], delay=[0, 1]),
        q.defer_many([job], [1, 2]),
        q.release_many([job], results=[b"a", b"b"]),
    ]
    for call in calls:
        with pytest.raises(InvalidArgument):
            await call
    assert keys_of(raw, q) == before
    await q.release(job)


async def test_unknown_job_ids_are_reported_as_not_found_or_none(q: Any) -> None:
    class Ghost:
        id = "ghost"
        token = "1.0"
        attempt = 1

    with pytest.raises(JobNotFound):
        await q.release(Ghost())
    with pytest.raises(JobNotFound):
        await q.requeue(Ghost(), delay=0)
    assert await q.job("ghost") is None
    assert await q.replay("ghost") == 0
    assert await q.purge("ghost") == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda q: q.job(""),
        lambda q: q.job(None),
        lambda q: q.replay(["ok", ""]),
        lambda q: q.purge([3]),
        lambda q: q.groups(names=["\x01"]),
        lambda q: q.groups(limit=0),
        lambda q: q.dead_letters(limit=-1),
        lambda q: q.dead_letters(offset=-1),
        lambda q: q.configure(group_limit=-1),
        lambda q: q.configure(dead_cap=1.5),
        lambda q: q.configure(dedup_window=-1),
        lambda q: q.configure(limits={"g": -1}),
        lambda q: q.configure(weights={"": 2}),
        lambda q: q.wait_result("", 1),
    ],
)
async def test_inspection_and_settings_arguments_are_checked(
    q: Any, untouched: Any, call: Any
) -> None:
    with pytest.raises(InvalidArgument):
        await call(q)


@pytest.mark.parametrize("name", ["", "has space", "-leading", "a/b/c", "x" * 129, "ünï", 5])
def test_invalid_queue_names_are_refused(name: Any) -> None:
    for cls in (Queue, AsyncQueue):
        with pytest.raises(InvalidArgument, match="queue name"):
            cls(name, "redis://127.0.0.1:1")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease": 0}, "lease"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"serializer": "yaml"}, "serializer"),
        ({"max_payload_bytes": 0}, "max_payload_bytes"),
        ({"namespace": "bad space"}, "namespace"),
    ],
)
def test_invalid_queue_options_are_refused(options: dict[str, Any], message: str) -> None:
    for cls in (Queue, AsyncQueue):
        with pytest.raises(InvalidArgument, match=message):
            cls("fine", "redis://127.0.0.1:1", **options)


def test_an_unsupported_url_scheme_is_refused_without_showing_the_password() -> None:
    with pytest.raises(InvalidArgument) as caught:
        Queue("fine", "http://user:s3cret@example.com/0")
    assert "s3cret" not in str(caught.value)


def test_a_client_that_decodes_responses_is_refused(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(InvalidArgument, match="decode_responses"):
            Queue("fine", client=client)
    finally:
        client.close()


async def test_messages_with_bad_options_refuse_the_batch(q: Any, untouched: Any) -> None:
    with pytest.raises(InvalidArgument, match="priority"):
        await q.enqueue_many([Message(1), Message(2, priority=99)])


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda q: q.enqueue("x", debounce=1.0), InvalidArgument),  # debounce needs a key
        (lambda q: q.enqueue("x", priority=99), InvalidArgument),
        (lambda q: q.enqueue_many([{"at": datetime.date.today()}]), NotSerializable),
    ],
)
async def test_a_refused_enqueue_does_not_register_a_new_queue(
    q: Any, raw: Any, call: Any, error: type[Exception]
) -> None:
    """The queue list of ``durq stats`` names only queues something was enqueued to: the
    check comes before the registration."""
    space = NamespaceKeys(q.keys.namespace)
    with pytest.raises(error):
        await call(q)
    assert not raw.sismember(space.queues, q.name)
    await q.enqueue("fine")
    assert raw.sismember(space.queues, q.name)
