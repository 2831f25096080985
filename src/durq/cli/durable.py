"""``durq signal NAME [JSON]``: wake the jobs waiting for a signal (durable steps,
docs/durable.md; the steps ``durq job show`` lists are in ``durq.cli.steps``)."""

from __future__ import annotations

import click
import orjson

from durq.cli.admin import _known_queues, _queue, _redis_errors, console
from durq.cli.common import namespace_option, url_option
from durq.cli.inert import plain

__all__ = ["signal"]


@click.command(short_help="Send a signal to the jobs waiting for it (durq.wait_for).")
@click.argument("name")
@click.argument("payload", required=False, default="null")
@click.option(
    "-q", "--queue", "queues", multiple=True,
    help="A queue to signal (repeat for more); default: every queue of the namespace.",
)  # fmt: skip
@click.option(
    "--ttl", type=float, default=None,
    help="Seconds the signal is kept for waits reached later (default: a day).",
)  # fmt: skip
@url_option
@namespace_option
@_redis_errors
def signal(
    name: str,
    payload: str,
    queues: tuple[str, ...],
    ttl: float | None,
    url: str | None,
    namespace: str,
) -> None:
    """Send signal NAME with PAYLOAD (JSON, default null): every job waiting for NAME
    (durq.wait_for) gets the payload and runs again now; a wait reached within --ttl
    seconds gets it at once. Safe to send again: the newest signal of a name is kept."""
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="PAYLOAD") from None
    targets = list(queues) or _known_queues(url, namespace)
    if not targets:
        raise click.ClickException("no queue to signal: this namespace has none yet")
    woken = 0
    for target in targets:
        with _queue(target, url, namespace) as q:
            woken += q.signal(name, value) if ttl is None else q.signal(name, value, ttl=ttl)
    where = plain(", ".join(targets))
    console.print(f"signal {plain(name)} sent to {where}: {woken} waiting jobs made ready")
