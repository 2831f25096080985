"""This process's TCP connections to a Redis server, to check that nothing leaks."""

from __future__ import annotations

from urllib.parse import urlsplit

import psutil


def redis_connections(url: str) -> set[tuple[str, int]]:
    """The local ends of this process's open TCP connections to ``url``'s server."""
    port = urlsplit(url).port
    return {
        (c.laddr.ip, c.laddr.port)
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED
    }
