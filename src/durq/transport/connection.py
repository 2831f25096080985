"""Redis clients from URLs, with the settings durq relies on.

Accepted URLs (``user:password@`` is AUTH/ACL of the Redis servers; query options such
as ``ssl_ca_certs=...`` or ``socket_timeout=...`` are redis-py's):

- ``redis://host:port/db``, ``rediss://...`` (TLS), ``unix:///path.sock``: one server.
- ``redis+cluster://host:port[,host:port...]/`` (``rediss+cluster://`` for TLS): a
  Redis Cluster; the nodes listed are only the first contacts, the rest is discovered.
- ``redis+sentinel://host:port[,host:port...]/service_name[/db]`` (``rediss+sentinel``
  for TLS): the primary that the Sentinels name for ``service_name``, followed through
  failovers. The sentinels' own credentials, when they need any, are the query options
  ``sentinel_password`` and ``sentinel_username``.

The URL defaults to the ``DURQ_URL`` environment variable, then ``redis://localhost:6379/0``.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio
from redis import connection as _redis_connection
from redis.backoff import NoBackoff
from redis.retry import Retry

from durq.errors import InvalidArgument
from durq.redaction import redact_url
from durq.transport.redispy import async_sentinel_pool, sync_sentinel_pool

__all__ = [
    "DEFAULT_URL",
    "Target",
    "async_client",
    "check_client",
    "parse_target",
    "redact",
    "resolve_url",
    "sync_client",
]

DEFAULT_URL = "redis://localhost:6379/0"
_SINGLE = ("redis", "rediss", "unix")
_CLUSTER = ("redis+cluster", "rediss+cluster")
_SENTINEL = ("redis+sentinel", "rediss+sentinel")
_SENTINEL_QUERY = ("sentinel_password", "sentinel_username")


def keepalive_options() -> dict[int, int]:
    """TCP keepalive of durq's connections, the options this platform's socket module
    has: the first probe after 60 s without traffic, then every 15 s, the connection
    dropped after 4 unanswered (a silent cut is seen within two minutes). An idle
    worker's wait lasts up to IDLE_BLOCK (an hour) without a byte of its own: the
    probes keep load balancers and NAT gateways, which drop a connection idle for a few
    minutes, from forgetting it, and find a peer that vanished. Set here because
    redis-py's default differs by version (7.4 leaves the system's two hours)."""
    # macOS names the idle time TCP_KEEPALIVE; some platforms have only SO_KEEPALIVE
    idle = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)
    interval, count = getattr(socket, "TCP_KEEPINTVL", None), getattr(socket, "TCP_KEEPCNT", None)
    wanted = ((idle, 60), (interval, 15), (count, 4))
    return {option: value for option, value in wanted if option is not None}


# Scripts last milliseconds: a reply that takes longer than this means the server or the
# network is gone. A blocking wait (an idle worker's, up to IDLE_BLOCK) gets its own
# timeout on top (durq.transport.redispy.async_exchange).
_OPTIONS: dict[str, Any] = {
    # RESP2 replies are what the scripts' reply formats are documented in (RESP3 would
    # turn a Lua false into a boolean), and cost less to parse
    "protocol": 2,
    "socket_timeout": 30.0,
    "socket_connect_timeout": 5.0,
    "socket_keepalive": True,
    "socket_keepalive_options": keepalive_options(),
    "health_check_interval": 15,
    # durq decides which calls are safe to repeat (enqueue is, by id); redis-py's
    # blind retry could run a non-idempotent script twice
    "retry": Retry(NoBackoff(), 0),
}


#: connections one client opens to one server at most; a caller beyond that waits up to
#: POOL_WAIT seconds for a free one (redis-py 8 caps its pools at 100 and fails the next
#: caller at once, which an app with many coroutines or threads on one queue would hit)
MAX_CONNECTIONS = 1000
POOL_WAIT = 30.0

# redis-py leaves these unannotated
_parse_url: Any = _redis_connection.parse_url


def resolve_url(url: str | None) -> str:
    """The URL to use: ``url``, else ``$DURQ_URL``, else the local default."""
    resolved = url or os.environ.get("DURQ_URL") or DEFAULT_URL
    scheme = urlsplit(resolved).scheme
    if scheme not in (*_SINGLE, *_CLUSTER, *_SENTINEL):
        raise InvalidArgument(
            f"unsupported URL scheme {scheme!r} in {redact(resolved)}: use redis://, "
            "rediss://, unix://, redis+cluster:// or redis+sentinel://"
        )
    return resolved


def redact(url: str) -> str:
    """The URL without its credentials, for messages, logs, pages and reprs
    (``durq.redaction.redact_url``: every credential form redis-py takes in a URL)."""
    return redact_url(url)


@dataclass(frozen=True)
class Target:
    """What a URL points at: ``kind`` is ``single``, ``cluster`` or ``sentinel``."""

    kind: str
    url: str
    hosts: tuple[tuple[str, int], ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    service: str = ""
    sentinel_options: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # the options hold the passwords: the URL alone, redacted
        return f"<Target {self.kind} {redact(self.url)}>"


def _hosts(text: str, url: str) -> tuple[tuple[str, int], ...]:
    hosts: list[tuple[str, int]] = []
    for item in text.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon:
            host, port = item.strip(), "6379"
        host = host.strip("[]")
        if not host or not port.isdigit():
            raise InvalidArgument(f"bad host:port {item!r} in {redact(url)}")
        hosts.append((host, int(port)))
    return tuple(hosts)


def parse_target(url: str | None = None) -> Target:
    """Parse a durq URL (see the module docstring)."""
    url = resolve_url(url)
    parts = urlsplit(url)
    if parts.scheme in _SINGLE:
        return Target("single", url)
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    hosts = _hosts(hostlist, url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    sentinel_query = {k: v for k, v in query if k in _SENTINEL_QUERY}
    rest = urlencode([(k, v) for k, v in query if k not in _SENTINEL_QUERY])
    path = [unquote(p) for p in parts.path.split("/") if p]
    tls = parts.scheme.startswith("rediss")
    # redis-py parses the credentials and the query options of a one-host URL
    one = urlunsplit(("rediss" if tls else "redis", f"{userinfo}{at}localhost", "", rest, ""))
    options = {k: v for k, v in _parse_url(one).items() if k not in ("host", "port", "db")}
    options.pop("connection_class", None)
    if tls:
        options["ssl"] = True
    if parts.scheme in _CLUSTER:
        if path and path != ["0"]:
            raise InvalidArgument(f"a Redis Cluster has only database 0: {redact(url)}")
        return Target("cluster", url, hosts, options)
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise InvalidArgument(
            f"a Sentinel URL names the service: redis+sentinel://host:port/service[/db], "
            f"got {redact(url)}"
        )
    if len(path) == 2:
        options["db"] = int(path[1])
    sentinel_options: dict[str, Any] = {
        k.removeprefix("sentinel_"): v for k, v in sentinel_query.items()
    }
    for name in ("socket_timeout", "socket_connect_timeout", "ssl", "ssl_ca_certs"):
        if name in options:
            sentinel_options.setdefault(name, options[name])
    return Target("sentinel", url, hosts, options, path[0], sentinel_options)


def _cluster_options(options: dict[str, Any]) -> dict[str, Any]:
    merged = {**_OPTIONS, "max_connections": MAX_CONNECTIONS, **options}
    # the cluster client's own retry: durq routes and retries itself (durq._async.driver)
    merged.pop("health_check_interval", None)
    return merged


def async_client(url: str | None = None, **options: Any) -> Any:
    """An asyncio client for ``url`` with durq's defaults (overridable by ``options``):
    ``redis.asyncio.Redis``, or ``redis.asyncio.cluster.RedisCluster`` for a cluster."""
    target = parse_target(url)
    if target.kind == "cluster":
        from redis.asyncio import cluster

        nodes = [cluster.ClusterNode(host, port) for host, port in target.hosts]
        kwargs = _cluster_options({**target.options, **options})
        return cluster.RedisCluster(startup_nodes=nodes, **kwargs)
    if target.kind == "sentinel":
        from redis.asyncio import sentinel as sentinels

        kwargs = {**_OPTIONS, "max_connections": MAX_CONNECTIONS, **target.options, **options}
        make: Any = sentinels.Sentinel
        sentinel = make(list(target.hosts), sentinel_kwargs=_sentinel_kwargs(target))
        return sentinel.master_for(
            target.service,
            redis_class=redis.asyncio.Redis,
            connection_pool_class=async_sentinel_pool(),
            **kwargs,
        )
    pool: Any = redis.asyncio.BlockingConnectionPool.from_url(
        target.url, **_pool_options(target.url, options)
    )
    return redis.asyncio.Redis.from_pool(pool)


def sync_client(url: str | None = None, **options: Any) -> Any:
    """A blocking client for ``url`` with durq's defaults (overridable by ``options``):
    ``redis.Redis``, or ``redis.cluster.RedisCluster`` for a cluster."""
    target = parse_target(url)
    if target.kind == "cluster":
        from redis import cluster as sync_cluster

        node: Any = sync_cluster.ClusterNode
        nodes = [node(host, port) for host, port in target.hosts]
        kwargs = _cluster_options({**target.options, **options})
        return sync_cluster.RedisCluster(startup_nodes=nodes, **kwargs)
    if target.kind == "sentinel":
        from redis import sentinel as sync_sentinels

        kwargs = {**_OPTIONS, "max_connections": MAX_CONNECTIONS, **target.options, **options}
        make: Any = sync_sentinels.Sentinel
        sentinel = make(list(target.hosts), sentinel_kwargs=_sentinel_kwargs(target))
        return sentinel.master_for(
            target.service,
            redis_class=redis.Redis,
            connection_pool_class=sync_sentinel_pool(),
            **kwargs,
        )
    pool: Any = redis.BlockingConnectionPool.from_url(
        target.url, **_pool_options(target.url, options)
    )
    return redis.Redis.from_pool(pool)


def _pool_options(url: str, options: dict[str, Any]) -> dict[str, Any]:
    merged = {**_OPTIONS, **options}
    if urlsplit(url).scheme == "unix":
        # no TCP under a Unix socket: redis-py's connection for it takes no keepalive
        # options (a TypeError at the first connect, redis-py 8)
        merged.pop("socket_keepalive", None)
        merged.pop("socket_keepalive_options", None)
    merged.setdefault("max_connections", MAX_CONNECTIONS)
    merged.setdefault("timeout", POOL_WAIT)
    return merged


def _sentinel_kwargs(target: Target) -> dict[str, Any]:
    # sentinels answer at once or not at all: a short timeout finds a live one quickly
    return {"socket_timeout": 2.0, "socket_connect_timeout": 2.0, **target.sentinel_options}


def check_client(client: Any) -> None:
    """Refuse clients that decode replies: durq's records are binary."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", {})
    encoder = getattr(client, "get_encoder", None)
    decodes = kwargs.get("decode_responses") or (
        pool is None and encoder is not None and encoder().decode_responses
    )
    if decodes:
        raise InvalidArgument("durq needs a Redis client created with decode_responses=False")
