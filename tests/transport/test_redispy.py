"""durq.transport.redispy, the fence around redis-py's internals: the lean exchanges
(one request's round trip on a pooled connection, on the connection's own socket or
stream and reader) and the state durq keeps on redis-py's objects, against real servers.
CI runs these on the oldest and the newest redis-py durq supports (``make test-redispy``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import hiredis
import pytest
import redis.asyncio
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from durq.transport import connection, redispy
from durq.transport.redispy import async_exchange, sync_exchange
from helpers import SLACK


def _packed(*commands: tuple[Any, ...]) -> list[bytes]:
    return [b"".join(hiredis.pack_command(c) for c in commands)]


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    c = connection.sync_client(redis_url)
    yield c
    c.close()


@pytest.fixture
def conn(client: Any) -> Iterator[Any]:
    conn = client.connection_pool.get_connection()
    yield conn
    conn.disconnect()
    client.connection_pool.release(conn)


@pytest.fixture
def lean_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test whose exchanges take redis-py's path instead of the lean one."""

    def refuse(conn: Any, packed: Any, count: int) -> list[Any]:
        raise AssertionError("took redis-py's path")

    monkeypatch.setattr(redispy, "_redis_py_exchange", refuse)


def test_pipelined_replies_come_back_in_order_with_errors_in_place(
    conn: Any, lean_only: None
) -> None:
    replies = sync_exchange(
        conn,
        _packed(
            ("SET", "xq:s", "v"),
            ("EVALSHA", "0" * 40, 0),
            ("HGET", "xq:s", "f"),
            ("GET", "xq:s"),
            ("PING",),
        ),
        5,
    )
    assert replies[0] == b"OK"
    assert isinstance(replies[1], NoScriptError)  # redis-py's class, as the driver needs
    assert isinstance(replies[2], ResponseError) and "WRONGTYPE" in str(replies[2])
    assert replies[3:] == [b"v", b"PONG"]
    # the connection stays usable after error replies
    assert sync_exchange(
        conn,
        _packed(
            ("ECHO", "again"),
        ),
        1,
    ) == [b"again"]


def test_a_reply_larger_than_the_read_buffer_is_read_whole(conn: Any, lean_only: None) -> None:
    big = bytes(range(256)) * (5 * len(conn._parser._buffer) // 256 + 7)
    replies = sync_exchange(conn, _packed(("SET", "xq:big", big), ("GET", "xq:big")), 2)
    assert replies == [b"OK", big]
    sync_exchange(
        conn,
        _packed(
            ("DEL", "xq:big"),
        ),
        1,
    )


def test_a_socket_timeout_raises_redis_pys_timeout_error(redis_url: str, lean_only: None) -> None:
    client = connection.sync_client(redis_url, socket_timeout=0.2)
    conn = client.connection_pool.get_connection()
    try:
        sync_exchange(
            conn,
            _packed(
                ("PING",),
            ),
            1,
        )  # connected, on the lean path
        with pytest.raises(TimeoutError):
            sync_exchange(
                conn,
                _packed(
                    ("BLPOP", "xq:nothing", 5),
                ),
                1,
            )
    finally:
        conn.disconnect()
        client.connection_pool.release(conn)
        client.close()


def test_a_connection_closed_by_the_server_raises_connection_error(
    client: Any, conn: Any, lean_only: None
) -> None:
    (own_id,) = sync_exchange(
        conn,
        _packed(
            ("CLIENT", "ID"),
        ),
        1,
    )
    other = client.connection_pool.get_connection()
    try:
        assert sync_exchange(
            other,
            _packed(
                ("CLIENT", "KILL", "ID", own_id),
            ),
            1,
        ) == [1]
    finally:
        client.connection_pool.release(other)
    with pytest.raises(ConnectionError):
        sync_exchange(
            conn,
            _packed(
                ("PING",),
            ),
            1,
        )


def test_bytes_redis_py_read_already_are_not_lost(conn: Any) -> None:
    # two replies arrive together: redis-py's reader keeps the second one, which the
    # next read must return (so the lean path steps aside while the reader holds data)
    conn.send_packed_command(_packed(("ECHO", "one"), ("ECHO", "two")), check_health=False)
    assert conn.read_response() == b"one"
    assert conn._parser._reader.has_data()
    assert sync_exchange(
        conn,
        _packed(
            ("ECHO", "three"),
        ),
        1,
    ) == [b"two"]
    assert sync_exchange(
        conn,
        _packed(
            ("PING",),
        ),
        1,
    ) == [b"three"]


@pytest.mark.parametrize("path", ["lean", "redis-py"])
def test_a_loading_error_raises_as_redis_py_raises_it(conn: Any, path: str) -> None:
    exchange = sync_exchange if path == "lean" else redispy._redis_py_exchange
    for script in ("return redis.error_reply('LOADING busy')",
                   "return {redis.error_reply('LOADING busy'), 1}"):  # fmt: skip
        with pytest.raises(ConnectionError, match="busy"):
            exchange(
                conn,
                _packed(
                    ("EVAL", script, 0),
                ),
                1,
            )
        conn.disconnect()  # as the driver does after any error
        conn.connect()


# -- async_exchange: redis-py's asyncio connection, its hiredis reader fed from its stream


@pytest.fixture
async def aclient(redis_url: str) -> AsyncIterator[Any]:
    c = connection.async_client(redis_url)
    yield c
    await c.aclose()


@pytest.fixture
async def aconn(aclient: Any) -> AsyncIterator[Any]:
    conn = await aclient.connection_pool.get_connection()
    yield conn
    await conn.disconnect()
    await aclient.connection_pool.release(conn)


@pytest.fixture
def async_lean_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test whose async exchanges read through redis-py's read_response."""

    async def refuse(conn: Any, timeout: float | None = None) -> Any:
        raise AssertionError("took redis-py's path")

    monkeypatch.setattr(redispy, "_reply", refuse)


async def test_async_pipelined_replies_come_back_in_order_with_errors_in_place(
    aconn: Any, async_lean_only: None
) -> None:
    commands: list[tuple[Any, ...]] = [
        ("SET", "xq:as", "v"),
        ("EVALSHA", "0" * 40, 0),
        ("HGET", "xq:as", "f"),
    ]
    commands += [("GET", "xq:as"), ("PING",)]
    replies = await async_exchange(aconn, _packed(*commands), 5)
    assert replies[0] == b"OK"
    assert isinstance(replies[1], NoScriptError)
    assert isinstance(replies[2], ResponseError) and "WRONGTYPE" in str(replies[2])
    assert replies[3:] == [b"v", b"PONG"]
    assert await async_exchange(aconn, _packed(("ECHO", "again")), 1) == [b"again"]


async def test_async_a_reply_larger_than_the_read_size_is_read_whole(
    aconn: Any, async_lean_only: None
) -> None:
    big = bytes(range(256)) * (5 * aconn._parser._read_size // 256 + 7)
    packed = _packed(("SET", "xq:abig", big), ("GET", "xq:abig"), ("DEL", "xq:abig"))
    assert await async_exchange(aconn, packed, 3) == [b"OK", big, 1]


async def test_async_a_timeout_is_one_deadline_for_the_exchange(
    redis_url: str, async_lean_only: None
) -> None:
    client = connection.async_client(redis_url, socket_timeout=0.3)
    conn = await client.connection_pool.get_connection()
    try:
        # each reply comes within the timeout, the two together do not
        packed = _packed(("BLPOP", "xq:nothing", 0.2), ("BLPOP", "xq:nothing", 0.2))
        started = time.monotonic()
        with pytest.raises(TimeoutError):  # a timeout per reply would not raise at all
            await async_exchange(conn, packed, 2)
        assert time.monotonic() - started < 0.3 + SLACK
    finally:
        await conn.disconnect()
        await client.connection_pool.release(conn)
        await client.aclose()


async def test_async_a_connection_closed_by_the_server_raises_connection_error(
    aclient: Any, aconn: Any, async_lean_only: None
) -> None:
    (own_id,) = await async_exchange(aconn, _packed(("CLIENT", "ID")), 1)
    other = await aclient.connection_pool.get_connection()
    try:
        assert await async_exchange(other, _packed(("CLIENT", "KILL", "ID", own_id)), 1) == [1]
    finally:
        await aclient.connection_pool.release(other)
    with pytest.raises(ConnectionError):
        await async_exchange(aconn, _packed(("PING",)), 1)


async def test_async_a_task_cancelled_mid_read_is_cancelled(
    aconn: Any, async_lean_only: None
) -> None:
    task = asyncio.create_task(async_exchange(aconn, _packed(("BLPOP", "xq:nothing", 5)), 1))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_async_a_cancelled_exchange_leaves_no_half_read_connection(aclient: Any) -> None:
    from durq._async import driver

    pool = aclient.connection_pool
    task = asyncio.create_task(driver._send_on(pool, [("BLPOP", "xq:nothing", 5)]))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the driver disconnected it before it went back: the BLPOP's reply is never read
    assert not driver._idle_of(pool)
    assert not any(c.is_connected for c in pool._available_connections)
    assert await driver._send_on(pool, [("ECHO", "next")]) == [b"next"]


async def test_async_the_health_check_is_put_off_as_redis_py_does(
    aconn: Any, async_lean_only: None
) -> None:
    aconn.next_health_check = 0.0
    assert await async_exchange(aconn, _packed(("PING",)), 1) == [b"PONG"]
    now = asyncio.get_running_loop().time()
    assert now < aconn.next_health_check <= now + aconn.health_check_interval


async def test_async_bytes_redis_py_read_already_are_not_lost(aconn: Any) -> None:
    await aconn.send_packed_command(_packed(("ECHO", "one"), ("ECHO", "two")), check_health=False)
    assert await aconn.read_response() == b"one"
    assert aconn._parser._reader.has_data()
    assert await async_exchange(aconn, _packed(("ECHO", "three")), 1) == [b"two"]
    assert await async_exchange(aconn, _packed(("PING",)), 1) == [b"three"]


@pytest.mark.parametrize("path", ["lean", "redis-py"])
async def test_async_a_loading_error_raises_as_redis_py_raises_it(
    aconn: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "redis-py":
        monkeypatch.setattr(redispy, "_lean_reader", lambda *args: None)
    for script in ("return redis.error_reply('LOADING busy')",
                   "return {redis.error_reply('LOADING busy'), 1}"):  # fmt: skip
        with pytest.raises(ConnectionError, match="busy"):
            await async_exchange(aconn, _packed(("EVAL", script, 0)), 1)
        await aconn.disconnect()  # as the driver does after any error
        await aconn.connect()


class _Subclassed(redis.asyncio.Connection):
    """A connection class of the caller's own: its read_response may do more."""


@pytest.mark.parametrize("case", ["resp3", "own-class"])
async def test_async_other_connections_take_redis_pys_path(
    redis_url: str, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    options: dict[str, Any] = {"protocol": 3} if case == "resp3" else {}
    if case == "own-class":
        options["connection_class"] = _Subclassed
    client = connection.async_client(redis_url, **options)
    read = 0
    real = redispy._reply

    async def counted(conn: Any, timeout: float | None = None) -> Any:
        nonlocal read
        read += 1
        return await real(conn, timeout)

    monkeypatch.setattr(redispy, "_reply", counted)
    conn = await client.connection_pool.get_connection()
    try:
        packed = _packed(("SET", "xq:o", "v"), ("EVALSHA", "0" * 40, 0), ("GET", "xq:o"))
        replies = await async_exchange(conn, packed, 3)
        assert replies[0] in (b"OK", "OK") and replies[2] == b"v"
        assert isinstance(replies[1], NoScriptError)
        assert read == 3
    finally:
        await conn.disconnect()
        await client.connection_pool.release(conn)
        await client.aclose()
