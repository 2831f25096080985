"""The connections durq opens (``durq.transport.connection``): TCP ones probe an idle
peer (an idle worker's wait lasts up to IDLE_BLOCK, minutes without a byte of its
own), and a Unix socket, which has no TCP, connects at all."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from typing import Any

import psutil
import pytest

import durq
from durq.dev.server import RedisServer
from durq.transport import connection


def _sockets_to(port: int) -> dict[Any, int]:
    """This process's TCP sockets connected to ``port``: local address -> fd."""
    found = psutil.Process().net_connections(kind="tcp")
    return {c.laddr: c.fd for c in found if c.raddr and c.raddr.port == port and c.fd >= 0}


def _probes(fd: int) -> tuple[int, dict[int, int]]:
    """SO_KEEPALIVE and the keepalive options of socket ``fd``, as the kernel holds them."""
    with socket.socket(fileno=os.dup(fd)) as sock:
        options = connection.keepalive_options()
        probes = {o: sock.getsockopt(socket.IPPROTO_TCP, o) for o in options}
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE), probes


def _opened(port: int, before: dict[Any, int]) -> list[tuple[int, dict[int, int]]]:
    return [_probes(fd) for laddr, fd in _sockets_to(port).items() if laddr not in before]


def test_tcp_connections_probe_an_idle_peer_after_a_minute(valkey_server: RedisServer) -> None:
    wanted = connection.keepalive_options()
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux: all three
        assert wanted == {socket.TCP_KEEPIDLE: 60, socket.TCP_KEEPINTVL: 15, socket.TCP_KEEPCNT: 4}
    port = valkey_server.port
    client = connection.sync_client(valkey_server.url)
    try:
        before = _sockets_to(port)  # other tests' clients, in this process
        client.ping()
        assert _opened(port, before) == [(1, wanted)]
    finally:
        client.close()

    async def main() -> None:
        aclient = connection.async_client(valkey_server.url)
        try:
            before = _sockets_to(port)
            await aclient.ping()
            assert _opened(port, before) == [(1, wanted)]
        finally:
            await aclient.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("front", ["async", "sync"])
def test_a_queue_works_through_a_unix_socket_url(
    make_server: Callable[..., RedisServer], queue_name: str, front: str
) -> None:
    # durq turned TCP keepalive on for every URL, and redis-py's Unix socket connection
    # takes no keepalive options: the first connect raised TypeError
    server = make_server(unixsocket=True)
    url = f"unix://{server.unix_socket_path}"
    if front == "sync":
        with durq.Queue(queue_name, url) as q:
            q.enqueue("x", id="a")
            job = q.dequeue()
            assert job is not None and job.id == "a"
            q.release(job)
            assert q.stats().size == 0
        return

    async def main() -> Any:
        async with durq.AsyncQueue(queue_name, url) as q:
            await q.enqueue("x", id="a")
            job = await q.dequeue()
            assert job is not None and job.id == "a"
            await q.release(job)
            return (await q.stats()).size

    assert asyncio.run(main()) == 0
