"""sync_exchange: one request's round trip on a pooled blocking connection, on the
connection's own socket and reader, against real servers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hiredis
import pytest
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from durq import connection
from durq.connection import sync_exchange


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

    monkeypatch.setattr(connection, "_redis_py_exchange", refuse)


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
    exchange = sync_exchange if path == "lean" else connection._redis_py_exchange
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
