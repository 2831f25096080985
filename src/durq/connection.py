"""Redis clients from URLs, with the settings durq relies on.

``redis://`` and ``rediss://`` (TLS) and ``unix://`` URLs are accepted, with
``user:password@`` for AUTH/ACL. The URL defaults to the ``DURQ_URL`` environment
variable, then ``redis://localhost:6379/0``.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from durq.errors import InvalidArgument

__all__ = ["DEFAULT_URL", "async_client", "redact", "resolve_url", "sync_client"]

DEFAULT_URL = "redis://localhost:6379/0"

# Blocking waits last at most MAX_BLOCK (5 s), scripts milliseconds: a reply that takes
# longer than this means the server or the network is gone.
_OPTIONS: dict[str, Any] = {
    # RESP2 replies are what the scripts' reply formats are documented in (RESP3 would
    # turn a Lua false into a boolean), and cost less to parse
    "protocol": 2,
    "socket_timeout": 30.0,
    "socket_connect_timeout": 5.0,
    "socket_keepalive": True,
    "health_check_interval": 15,
    # durq decides which calls are safe to repeat (enqueue is, by id); redis-py's
    # blind retry could run a non-idempotent script twice
    "retry": Retry(NoBackoff(), 0),
}


def resolve_url(url: str | None) -> str:
    """The URL to use: ``url``, else ``$DURQ_URL``, else the local default."""
    resolved = url or os.environ.get("DURQ_URL") or DEFAULT_URL
    scheme = urlsplit(resolved).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise InvalidArgument(
            f"unsupported URL scheme {scheme!r} in {redact(resolved)}: use redis://, "
            "rediss:// or unix://"
        )
    return resolved


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


def async_client(url: str | None = None, **options: Any) -> redis.asyncio.Redis:
    """An asyncio client for ``url`` with durq's defaults (overridable by ``options``)."""
    return redis.asyncio.Redis.from_url(resolve_url(url), **{**_OPTIONS, **options})


def sync_client(url: str | None = None, **options: Any) -> redis.Redis:
    """A blocking client for ``url`` with durq's defaults (overridable by ``options``)."""
    return redis.Redis.from_url(resolve_url(url), **{**_OPTIONS, **options})


def check_client(client: Any) -> None:
    """Refuse clients that decode replies: durq's records are binary."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", {})
    if kwargs.get("decode_responses"):
        raise InvalidArgument("durq needs a Redis client created with decode_responses=False")
