"""``durq functions``: durq's Redis Functions libraries on the server (load, list, prune).

``load`` is for an admin: where producers and workers may not FUNCTION LOAD (the ACL
set-up of docs/deployment.md), it loads this version's library at a deploy, after
checking that nothing else holds its names. A durq version never deletes an older
library (:mod:`durq.protocol.libraries` says why pruning is safe); on a Cluster every
primary holds its own copy, so every command visits each primary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click
from redis.exceptions import RedisError
from rich.table import Table

from durq._sync.namespace import Namespace
from durq.cli.common import terminal, url_option
from durq.cli.inert import escape_controls, plain
from durq.errors import ForeignLibrary
from durq.models import LibraryInfo, Trust

__all__ = ["functions"]

console = terminal()
T = TypeVar("T")


def _each(url: str | None, do: Callable[[Namespace], list[tuple[str, T]]]) -> list[tuple[str, T]]:
    """``do`` on the namespace of ``url``: one result per server that holds libraries
    (the server, or each Cluster primary)."""
    try:
        with Namespace(url) as space:
            return do(space)
    except RedisError as exc:
        raise click.ClickException(escape_controls(f"{type(exc).__name__}: {exc}")) from None


@click.group()
def functions() -> None:
    """Load, list and prune durq's Redis Functions libraries.

    \b
    Every durq version loads its own library (about 2.4 MB of server memory) and never
    deletes an older one, which workers of that version may still run. Pruning is safe
    at any time: a worker of an older version reloads its library on its next call.
    """


_LOADED = {
    Trust.VERIFIED: "already loaded, and its code is this durq version's",
    Trust.LOADED: "loaded",
    Trust.NO_FUNCTIONS: "no Functions (Redis 6.2): scripts run with EVALSHA",
}


@functions.command()
@url_option
@click.option(
    "--replace",
    is_flag=True,
    help="Load durq's code over a library of its name whose code is not durq's "
    "(once you know who wrote it).",
)
def load(url: str | None, replace: bool) -> None:
    """Load this durq version's library (on each Cluster primary).

    \b
    For an admin user: producers and workers then need no FUNCTION LOAD permission
    (docs/deployment.md, "AUTH and ACL"). Run it at each deploy of a new durq version,
    and after a restart that lost the library; until then those clients run durq's
    scripts with EVALSHA. A library of durq's name with other code, or another library
    that registers its function names, is reported and left alone.
    """
    try:
        outcomes = _each(url, lambda space: space.load_library(replace=replace))
    except ForeignLibrary as exc:
        raise click.ClickException(str(exc)) from None
    name = Namespace.library_name()
    for where, trust in outcomes:
        if trust not in _LOADED:
            raise click.ClickException(f"{where}: could not load {name}: {trust.value}")
        console.print(f"{where}: {name} {_LOADED[trust]}")


@functions.command("list")
@url_option
def list_(url: str | None) -> None:
    """Show durq's libraries on the server (each Cluster primary)."""
    table = Table("server", "library", "functions", "version")
    for where, libs in _each(url, Namespace.libraries):
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
    for where, deleted in _each(url, Namespace.prune_libraries):
        if deleted is None:
            console.print(plain(f"{where}: no Functions (Redis 6.2), nothing to prune"))
            continue
        total += len(deleted)
        for name in deleted:
            console.print(plain(f"{where}: deleted {name}"))
    console.print(f"deleted {total} librar{'y' if total == 1 else 'ies'}")
