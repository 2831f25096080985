"""``Durability(fsync=True)``: an enqueue returns only once the write is in the server's
append-only file (WAITAOF), and raises NotDurable when it cannot be (docs/guarantees.md;
the promise -> test table is there)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import durq
from durq.dev.server import RedisServer
from helpers import selected_flavors

FSYNC = durq.Durability(fsync=True, timeout=1.0)


@pytest.mark.skipif("valkey" not in selected_flavors(), reason="WAITAOF needs Valkey")
def test_fsync_durability_confirms_the_write_is_on_disk_and_refuses_without_an_aof(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    on_disk = make_server("valkey", appendonly=True, appendfsync="everysec")
    with durq.Queue(queue_name, on_disk.url, durability=FSYNC) as q:
        assert q.enqueue("x").created
        assert all(r.created for r in q.enqueue_many(range(20)))
    no_aof = make_server("valkey")
    with (
        durq.Queue(queue_name, no_aof.url, durability=FSYNC) as q,
        pytest.raises(durq.NotDurable) as caught,
    ):
        q.enqueue("x")
    # applied on the primary, not confirmed: a retry with the same id is safe
    assert caught.value.results is not None


@pytest.mark.skipif("redis" not in selected_flavors(), reason="needs Redis 6.2")
def test_fsync_durability_on_a_server_without_waitaof_is_a_clear_error(
    redis62_server: RedisServer, queue_name: str
) -> None:
    with (
        durq.Queue(queue_name, redis62_server.url, durability=FSYNC) as q,
        pytest.raises(durq.NotDurable, match="no WAITAOF"),
    ):
        q.enqueue("x")


def test_a_redis_process_killed_under_appendfsync_everysec_keeps_every_acknowledged_job(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    """The reply goes out after the write(2) to the AOF: a process crash (not a power
    loss) leaves it in the page cache, so nothing acknowledged is lost."""
    server = make_server(appendonly=True, appendfsync="everysec")
    with durq.Queue(queue_name, server.url) as q:
        ids = [r.id for r in q.enqueue_many(range(2_000))]
        server.kill()  # SIGKILL, right after the last reply
    server.restart()
    with durq.Queue(queue_name, server.url) as q:
        assert q.stats().pending == 2_000
        assert {j.id for j in q.dequeue_many(2_000)} == set(ids)
