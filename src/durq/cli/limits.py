"""``durq limits``: see and change a queue's flow control (rate limits, max_active)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from durq.cli.admin import _known_queues, _queue, _redis_errors
from durq.cli.common import namespace_option, terminal, url_option
from durq.cli.limits_tables import flow_tables
from durq.errors import InvalidArgument
from durq.limits import Rate

__all__ = ["limits"]

console = terminal()
_NONE = "none"


def _rate(option: str, text: str | None) -> Rate | None:
    if text is None or text.lower() == _NONE:
        return None
    try:
        return Rate.parse(text)
    except InvalidArgument as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _settings(
    rate: str | None, group_rate: str | None, groups: Sequence[str], max_active: str | None
) -> dict[str, Any]:
    """The ``configure`` arguments the options ask for (an option not given: absent)."""
    out: dict[str, Any] = {}
    if rate is not None:
        out["rate"] = _rate("--rate", rate)
    if group_rate is not None:
        out["group_rate"] = _rate("--group-rate", group_rate)
    if groups:
        own: dict[str, Rate | None] = {}
        for item in groups:
            name, eq, text = item.partition("=")
            if not eq or not name:
                raise click.BadParameter(f"{item!r}: write NAME=RATE", param_hint="--group")
            own[name] = _rate("--group", text)
        out["group_rates"] = own
    if max_active is not None:
        if max_active.lower() == _NONE:
            out["max_active"] = None
        elif max_active.isdigit() and int(max_active) >= 1:
            out["max_active"] = int(max_active)
        else:
            raise click.BadParameter(
                f"{max_active!r}: an int >= 1, or none", param_hint="--max-active"
            )
    return out


@click.command(short_help="Show or change flow control: rate limits and max_active.")
@click.argument("queues", nargs=-1)
@click.option(
    "--rate",
    metavar="RATE",
    help="At most this many job starts for the whole queue: 100/s, 5/2.5s, 30/min, "
    "100/s,burst=10; 'none' removes it.",
)
@click.option(
    "--group-rate",
    metavar="RATE",
    help="The rate of each named group without one of its own; 'none' removes it.",
)
@click.option(
    "--group",
    "groups",
    multiple=True,
    metavar="NAME=RATE",
    help="The rate of one group (repeatable); NAME=none removes it.",
)
@click.option(
    "--max-active",
    metavar="N",
    help="At most N jobs of the queue leased at once; 'none' removes the cap.",
)
@click.option("--parked", default=10, show_default=True, help="Parked groups listed at most.")
@url_option
@namespace_option
@_redis_errors
def limits(
    queues: tuple[str, ...],
    rate: str | None,
    group_rate: str | None,
    groups: tuple[str, ...],
    max_active: str | None,
    parked: int,
    url: str | None,
    namespace: str,
) -> None:
    """Show the flow control of QUEUES (default: every queue), or change one QUEUE's.

    \b
      durq limits                                 limits, current rate, parked groups
      durq limits mail --rate 100/s               at most 100 job starts per second
      durq limits mail --group-rate 5/s           ... per named group
      durq limits mail --group tenant-7=20/s      one group's own rate
      durq limits mail --max-active 3             at most 3 jobs in flight
      durq limits mail --rate none                remove a limit
    """
    settings = _settings(rate, group_rate, groups, max_active)
    if settings and len(queues) != 1:
        raise click.UsageError("name exactly one queue to change its limits")
    names = list(queues) or _known_queues(url, namespace)
    if not names:
        console.print("no queues yet (a queue is listed once something was enqueued)")
        return
    infos = []
    for name in names:
        with _queue(name, url, namespace) as q:
            if settings:
                try:
                    q.configure(**settings)
                except InvalidArgument as exc:
                    raise click.ClickException(str(exc)) from None
            infos.append(q.limits(max(parked, 1)))
    for table in flow_tables(infos, parked):
        console.print(table)
