"""durq.transport.spin: a blocking exchange polls for its reply for a short budget, then sleeps;
a connection whose replies keep coming later than that stops polling for a while. Real
servers, real sockets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hiredis
import pytest
from redis.exceptions import ConnectionError

from durq.errors import InvalidArgument
from durq.transport import connection, redispy, spin
from durq.transport.redispy import sync_exchange

pytestmark = pytest.mark.skipif(not spin._CAN_POLL, reason="no non-blocking reads here")


def _packed(*commands: tuple[Any, ...]) -> list[bytes]:
    return [b"".join(hiredis.pack_command(c) for c in commands)]


# The test budget is long enough that a PING's reply comes within it on a loaded CI
# machine, and SLOW's reply (BLPOP on an empty list) well after it.
BUDGET = 0.05
SLOW = ("BLPOP", "sp:never", 0.3)


@pytest.fixture
def budget() -> Iterator[None]:
    """A budget of BUDGET seconds for the test, whatever $DURQ_REPLY_SPIN_US says."""
    before = spin.budget()
    spin.set_budget(BUDGET)
    yield
    spin.set_budget(before)


def _conn(url: str, **options: Any) -> tuple[Any, Any]:
    client = connection.sync_client(url, **options)
    return client, client.connection_pool.get_connection()


def _close(client: Any, conn: Any) -> None:
    conn.disconnect()
    client.connection_pool.release(conn)
    client.close()


def _state(conn: Any) -> int:
    return int(redispy.attached(conn).get(redispy.SPIN, 0))


def test_replies_read_by_polling_come_back_whole_and_in_order(redis_url: str, budget: None) -> None:
    client, conn = _conn(redis_url)
    big = b"x" * 300_000  # more than one read's buffer: the reads after the first block
    try:
        replies = sync_exchange(
            conn, _packed(("SET", "sp:big", big), ("GET", "sp:big"), ("PING",)), 3
        )
        assert replies == [b"OK", big, b"PONG"]
    finally:
        _close(client, conn)


def test_a_socket_without_a_timeout_is_polled_without_blocking(
    redis_url: str, budget: None
) -> None:
    client, conn = _conn(redis_url, socket_timeout=None)
    try:
        for i in range(20):
            assert sync_exchange(conn, _packed(("INCR", "sp:n")), 1) == [i + 1]
        assert conn._sock.gettimeout() is None
        assert _state(conn) == 0
    finally:
        _close(client, conn)


def test_replies_later_than_the_budget_make_the_connection_rest_then_try_again(
    redis_url: str, budget: None
) -> None:
    client, conn = _conn(redis_url)
    slow = _packed(SLOW)
    try:
        for miss in range(1, spin.MISSES):
            assert sync_exchange(conn, slow, 1) == [None]
            assert _state(conn) == miss
        assert sync_exchange(conn, slow, 1) == [None]
        assert _state(conn) == -spin.REST  # resting: the next REST exchanges do not poll
        for _ in range(spin.REST):
            assert sync_exchange(conn, _packed(("PING",)), 1) == [b"PONG"]
        assert _state(conn) == 0  # rested: the next exchange polls again
        assert sync_exchange(conn, _packed(("PING",)), 1) == [b"PONG"]
        assert _state(conn) == 0
    finally:
        _close(client, conn)


def test_a_hit_forgets_earlier_misses(redis_url: str, budget: None) -> None:
    client, conn = _conn(redis_url)
    try:
        assert sync_exchange(conn, _packed(SLOW), 1) == [None]
        assert _state(conn) == 1
        assert sync_exchange(conn, _packed(("PING",)), 1) == [b"PONG"]
        assert _state(conn) == 0
    finally:
        _close(client, conn)


def test_a_budget_of_zero_never_polls(redis_url: str) -> None:
    before = spin.budget()
    spin.set_budget(0)
    client, conn = _conn(redis_url)
    try:
        assert sync_exchange(conn, _packed(SLOW), 1) == [None]
        assert _state(conn) == 0  # not polled, so no miss is counted
    finally:
        spin.set_budget(before)
        _close(client, conn)


def test_a_connection_closed_while_polled_raises_connection_error(
    redis_url: str, budget: None
) -> None:
    client, conn = _conn(redis_url)
    other = client.connection_pool.get_connection()
    try:
        (own,) = sync_exchange(conn, _packed(("CLIENT", "ID")), 1)
        assert sync_exchange(other, _packed(("CLIENT", "KILL", "ID", own)), 1) == [1]
        with pytest.raises(ConnectionError):
            sync_exchange(conn, _packed(("PING",)), 1)
    finally:
        client.connection_pool.release(other)
        _close(client, conn)


@pytest.mark.parametrize(("raw", "seconds"), [("100", 100e-6), ("0", 0.0), ("-5", 0.0)])
def test_the_budget_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, seconds: float
) -> None:
    monkeypatch.setenv("DURQ_REPLY_SPIN_US", raw)
    assert spin._budget_from_env() == pytest.approx(seconds)


def test_a_blocking_client_does_not_poll_unless_durq_reply_spin_us_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DURQ_REPLY_SPIN_US", raising=False)
    assert spin._budget_from_env() == 0.0


def test_a_budget_that_is_not_a_number_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURQ_REPLY_SPIN_US", "fast")
    with pytest.raises(InvalidArgument, match="DURQ_REPLY_SPIN_US"):
        spin._budget_from_env()
