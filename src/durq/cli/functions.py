"""``durq functions``: durq's Redis Functions libraries on the server (list, prune).

A durq version loads its own library and never deletes an older one
(:mod:`durq.protocol.libraries` says why pruning is safe); on a Cluster every primary
holds its own copy, so both commands visit each primary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import click
from redis.exceptions import RedisError
from rich.console import Console
from rich.table import Table

from durq import connection
from durq._sync.driver import Driver
from durq.cli.common import url_option
from durq.cli.inert import escape_controls, plain
from durq.cluster import is_cluster
from durq.lua.functions import library
from durq.protocol.calls import Op
from durq.protocol.libraries import LibraryInfo, loaded_libraries, prune_libraries

__all__ = ["functions"]

console = Console()
T = TypeVar("T")


@contextmanager
def _nodes(url: str | None) -> Iterator[list[tuple[str, Driver]]]:
    """A driver per server that holds libraries: the server, or each Cluster primary."""
    client = connection.sync_client(url)
    try:
        if is_cluster(client):
            nodes = [(n.name, Driver(n.redis_connection)) for n in client.get_primaries()]
        else:
            kwargs = client.connection_pool.connection_kwargs
            where = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
            nodes = [(str(where), Driver(client))]
        yield nodes
    except RedisError as exc:
        raise click.ClickException(escape_controls(f"{type(exc).__name__}: {exc}")) from None
    finally:
        client.close()


def _each(url: str | None, make: Callable[[str], Op[T]]) -> list[tuple[str, T]]:
    current = library().name
    with _nodes(url) as nodes:
        return [(where, driver.run(make(current))) for where, driver in nodes]


@click.group()
def functions() -> None:
    """List durq's Redis Functions libraries, and prune those of other durq versions.

    \b
    Every durq version loads its own library (about 2.4 MB of server memory) and never
    deletes an older one, which workers of that version may still run. Pruning is safe
    at any time: a worker of an older version reloads its library on its next call.
    """


@functions.command("list")
@url_option
def list_(url: str | None) -> None:
    """Show durq's libraries on the server (each Cluster primary)."""
    table = Table("server", "library", "functions", "version")
    for where, libs in _each(url, loaded_libraries):
        if libs is None:
            table.add_row(
                plain(where), "-", "-", "no Functions (Redis 6.2): scripts run with EVALSHA"
            )
            continue
        if not libs:
            table.add_row(plain(where), "-", "-", "none loaded yet")
        for lib in libs:
            table.add_row(*map(plain, (where, lib.name, lib.functions, _version(lib))))
    console.print(table)


def _version(lib: LibraryInfo) -> str:
    return "this durq" if lib.current else "another durq version"


@functions.command()
@url_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def prune(url: str | None, yes: bool) -> None:
    """Delete the libraries of other durq versions (this version's stays)."""
    if not yes:
        click.confirm("delete the Functions libraries of other durq versions?", abort=True)
    total = 0
    for where, deleted in _each(url, prune_libraries):
        if deleted is None:
            console.print(plain(f"{where}: no Functions (Redis 6.2), nothing to prune"))
            continue
        total += len(deleted)
        for name in deleted:
            console.print(plain(f"{where}: deleted {name}"))
    console.print(f"deleted {total} librar{'y' if total == 1 else 'ies'}")
