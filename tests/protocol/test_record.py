"""Job records: the Python reader agrees with the layout the scripts write."""

from __future__ import annotations

import re
import struct
from importlib import resources
from typing import Any

import pytest
import redis

from durq import AsyncQueue, Queue
from durq.codec import PayloadCodec
from durq.dev.server import RedisServer
from durq.errors import CorruptQueue
from durq.protocol.lifecycle import parse_dequeue
from durq.protocol.record import (
    FIXED_SIZE,
    STATE_NAMES,
    VERSION,
    parse_record,
    record_fields,
    token_of,
)

_LAYOUT = struct.Struct(">BBbBHHIHHIHIHIB")


def record(
    *,
    version: int = VERSION,
    state: int = 1,
    priority: int = 0,
    codec: int = 1,
    attempts: int = 0,
    max_attempts: int = 5,
    deliveries: int = 0,
    failures: int = 0,
    enqueued_at: int = 0,
    dequeued_at: int = 0,
    requeued_at: int = 0,
    flags: int = 0,
    group: bytes = b"",
    key: bytes = b"",
    payload: bytes = b"",
) -> bytes:
    def split(ms: int) -> tuple[int, int]:
        return ms >> 32, ms & 0xFFFFFFFF

    head = _LAYOUT.pack(
        version, state, priority, codec, attempts, max_attempts, deliveries, failures,
        *split(enqueued_at), *split(dequeued_at), *split(requeued_at), flags,
    )  # fmt: skip
    return head + bytes([len(group)]) + group + bytes([len(key)]) + key + payload


def _lua_record_source() -> str:
    return resources.files("durq.lua").joinpath("lib/core/record_layout.lua").read_text()


def test_the_fixed_header_is_33_bytes_in_lua_and_python() -> None:
    source = _lua_record_source()
    assert FIXED_SIZE == 33
    fixed = re.search(r"local REC_FIXED = (\d+)", source)
    assert fixed is not None and fixed.group(1) == str(FIXED_SIZE)
    fmt = re.search(r"local REC_FMT = '([^']+)'", source)
    assert fmt is not None
    lua_format = fmt.group(1)
    sizes = {"B": 1, "b": 1, "H": 2, "I": 4}
    total = 0
    for code, width in re.findall(r"([BbHI])(\d*)", lua_format.lstrip(">")):
        total += int(width) if width else sizes[code]
    assert total == FIXED_SIZE


def test_the_states_are_numbered_alike_in_lua_and_python() -> None:
    found = re.findall(r"^local ST_([A-Z]+) = (\d+)", _lua_record_source(), re.MULTILINE)
    assert {int(code): name.lower() for name, code in found} == STATE_NAMES


def test_every_field_is_read_back() -> None:
    big = 2**47 + 12345
    rec = parse_record(
        record(
            state=3, priority=-7, codec=2, attempts=4, max_attempts=9, deliveries=70000,
            failures=3, enqueued_at=big, dequeued_at=big + 1, requeued_at=big + 2, flags=1,
            group="gröup".encode(), key=b"k", payload=b"\x00data",
        )
    )  # fmt: skip
    assert rec is not None
    assert (rec.state, rec.priority, rec.codec) == (3, -7, 2)
    assert (rec.attempts, rec.max_attempts, rec.deliveries, rec.failures) == (4, 9, 70000, 3)
    assert (rec.enqueued_at_ms, rec.dequeued_at_ms, rec.requeued_at_ms) == (big, big + 1, big + 2)
    assert (rec.flags, rec.group, rec.key) == (1, "gröup", "k")
    assert rec.payload_offset == FIXED_SIZE + 2 + len("gröup".encode()) + 1
    assert token_of(rec) == f"70000.{big + 1}"


def test_an_empty_payload_is_a_valid_record() -> None:
    raw = record()
    rec = parse_record(raw)
    assert rec is not None
    assert raw[rec.payload_offset :] == b""


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x01",
        record()[: FIXED_SIZE + 1],
        record(version=2),
        record(state=0),
        record(state=10),  # past the last state (held, 9)
        record()[:FIXED_SIZE] + b"\x05ab",  # group longer than the record
        record(group=b"abc")[: FIXED_SIZE + 4],  # no key length byte
        record(key=b"abc")[:-1],  # key longer than the record
        record(group=b"\xff\xfe"),  # not UTF-8
    ],
    ids=lambda raw: repr(raw[:12]),
)
def test_unreadable_records_are_none(raw: bytes) -> None:
    assert parse_record(raw) is None


def _stored(client: redis.Redis, key: str, field: str) -> bytes:
    raw = client.hget(key, field)
    assert isinstance(raw, bytes), f"{key} {field}: {raw!r}"
    return raw


@pytest.mark.parametrize("front", ["sync", "async"])
async def test_a_record_written_by_the_server_reads_back_as_enqueued_and_dequeued(
    server: RedisServer, queue_name: str, front: str
) -> None:
    queue: Any = (
        Queue(queue_name, server.url) if front == "sync" else AsyncQueue(queue_name, server.url)
    )
    client = redis.Redis.from_url(server.url)
    try:

        async def call(name: str, *args: Any, **kwargs: Any) -> Any:
            result = getattr(queue, name)(*args, **kwargs)
            return await result if front == "async" else result

        await call("enqueue", {"x": 1}, id="r", group="g", key="k", priority=3, max_attempts=4)
        pending = parse_record(_stored(client, queue.keys.prefix + "jobs", "r"))
        assert pending is not None
        assert (STATE_NAMES[pending.state], pending.priority, pending.group, pending.key) == (
            "pending", 3, "g", "k",
        )  # fmt: skip
        assert (pending.attempts, pending.max_attempts, pending.deliveries) == (0, 4, 0)
        job = await call("dequeue")
        raw = _stored(client, queue.keys.prefix + "jobs", "r")
        active = parse_record(raw)
        assert active is not None
        assert STATE_NAMES[active.state] == "active"
        assert token_of(active) == job.token
        assert raw[active.payload_offset :] == job.data == b'{"x":1}'
        assert active.enqueued_at_ms == pending.enqueued_at_ms
    finally:
        client.close()
        if front == "async":
            await queue.aclose()
        else:
            queue.close()


def test_a_group_that_is_not_utf8_can_be_read_leniently() -> None:
    rec = parse_record(record(group=b"\xff\xfe", key=b"k"), errors="replace")
    assert rec is not None
    assert (rec.group, rec.key) == ("\ufffd\ufffd", "k")


@pytest.mark.parametrize(
    "parts",
    [{}, {"group": b"g"}, {"key": b"k"}, {"group": b"g", "key": b"key", "payload": b"[1]"}],
    ids=["plain", "group", "key", "both"],
)
def test_record_fields_are_the_record_as_a_plain_tuple(parts: dict[str, bytes]) -> None:
    # the worker reads fetched records with record_fields (no named tuple per job); a
    # record without group or key takes its short path
    group, key, payload = (parts.get(name, b"") for name in ("group", "key", "payload"))
    raw = record(
        attempts=2, deliveries=3, enqueued_at=5, dequeued_at=6, group=group, key=key,
        payload=payload,
    )  # fmt: skip
    fields = record_fields(raw)
    rec = parse_record(raw)
    assert rec is not None and fields is not None
    assert fields == tuple(rec)
    assert raw[rec.payload_offset :] == payload
    assert (rec.group, rec.key) == (group.decode(), key.decode())


def _fetched(raws: list[bytes]) -> list[Any]:
    """A dequeue reply holding ``raws`` (ids j0, j1, ...), its lease deadline 9000 ms."""
    reply: list[Any] = [len(raws), 9000, -1, 0]
    for n, raw in enumerate(raws):
        reply += [f"j{n}".encode(), raw]
    return reply


def test_a_fetch_reads_each_record_as_record_fields_does() -> None:
    # parse_dequeue reads a record without group or key with one unpack (record.PLAIN)
    # and shares a token string between the jobs of one dequeue time and delivery count:
    # each job is what the full reader makes of its record
    big = 2**47 + 12345
    raws = [
        record(state=3, attempts=1, deliveries=1, enqueued_at=big, dequeued_at=big + 9,
               payload=b'["t",[1],{}]'),
        record(state=3, attempts=1, deliveries=1, enqueued_at=big + 1, dequeued_at=big + 9,
               priority=-3, codec=2, max_attempts=7, payload=b"\x01"),
        record(state=3, attempts=2, deliveries=4, enqueued_at=7, dequeued_at=big + 9),
        record(state=3, deliveries=1, dequeued_at=big + 10, group=b"g", payload=b"[2]"),
        record(state=3, deliveries=1, dequeued_at=big + 10, key="kéy".encode()),
        record(state=3, deliveries=1, dequeued_at=big + 10, group=b"\xff", key=b"k"),
        record(state=3, deliveries=1, dequeued_at=big + 10, payload=b"[3]"),
    ]  # fmt: skip
    codec = PayloadCodec()
    jobs = parse_dequeue(_fetched(raws), "q", codec)
    assert [job.token for job in jobs] == [
        f"1.{big + 9}", f"1.{big + 9}", f"4.{big + 9}", *[f"1.{big + 10}"] * 4
    ]  # fmt: skip
    for n, (job, raw) in enumerate(zip(jobs, raws, strict=True)):
        rec = parse_record(raw, errors="replace")
        assert rec is not None
        assert (job.queue, job.id, job.lease_deadline, job.codec) == ("q", f"j{n}", 9.0, codec)
        assert job.token == token_of(rec)
        assert (job.attempt, job.max_attempts, job.deliveries, job.priority) == (
            rec.attempts, rec.max_attempts, rec.deliveries, rec.priority,
        )  # fmt: skip
        assert (job.group, job.key) == (rec.group or None, rec.key or None)
        assert job.enqueued_at == rec.enqueued_at_ms / 1000
        assert (job.codec_id, job.data) == (rec.codec, raw[rec.payload_offset :])


@pytest.mark.parametrize(
    "raw",
    [b"", record()[: FIXED_SIZE + 1], record(state=3, version=2), record(state=0),
     record(state=10), record(state=3, group=b"abc")[: FIXED_SIZE + 4]],
    ids=["empty", "short", "version", "state 0", "state 10", "cut"],
)  # fmt: skip
def test_a_fetched_record_that_cannot_be_read_is_a_corrupt_queue(raw: bytes) -> None:
    good = record(state=3, deliveries=1)
    with pytest.raises(CorruptQueue):
        parse_dequeue(_fetched([good, raw]), "q", PayloadCodec())
