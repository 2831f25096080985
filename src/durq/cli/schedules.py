"""``durq schedules list|pause|resume|remove|trigger``: periodic jobs at run time.

Schedules are declared in code (``app.schedule``) and upserted by workers; these
commands act on what is stored in Redis, so they need no App. A schedule of a sharded
queue lives in one shard, chosen by its name (``durq.app.schedule_spec.pinned_queue``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich import box
from rich.table import Table

from durq._sync.namespace import Namespace
from durq._sync.queue import Queue
from durq.app.schedule_spec import pinned_queue
from durq.cli.admin import _known_queues, _redis_errors, _when
from durq.cli.common import namespace_option, terminal, url_option
from durq.cli.inert import escape_controls, plain
from durq.errors import DurqError
from durq.keys import shard_name, split_shard
from durq.models import ScheduleInfo

__all__ = ["schedules"]

console = terminal()


@contextmanager
def _client(url: str | None, namespace: str) -> Iterator[tuple[Namespace, dict[str, int]]]:
    try:
        with Namespace(url, namespace=namespace) as space:
            yield space, space.shard_counts()
    except DurqError as exc:
        raise click.ClickException(escape_controls(str(exc))) from None


def _shard_queues(name: str, shards: dict[str, int]) -> list[str]:
    count = shards.get(name, 0)
    return [shard_name(name, i) for i in range(count)] if count else [name]


def _queue(base: Namespace, queue: str, namespace: str, shards: dict[str, int]) -> Queue:
    """Queue (or shard: ``name~i``) ``queue`` on ``base``'s client. A shard needs its
    queue's shard count: its keys carry the shard's own hash tag, not ``{name~i}``."""
    name, index = split_shard(queue)
    count = shards.get(name, 0) if index is not None else 0
    return Queue(queue, client=base.client, namespace=namespace, shard_count=count)


def _listed(
    base: Namespace, queue: str, namespace: str, shards: dict[str, int]
) -> list[ScheduleInfo]:
    return _queue(base, queue, namespace, shards).schedules()


def _every(info: ScheduleInfo) -> str:
    if info.cron:
        return f"{info.cron} ({info.tz or 'UTC'})"
    return f"every {info.every:g}s"


def _in(seconds: float | None, now: float) -> str:
    if seconds is None:
        return "-"
    return f"{_when(seconds)} (in {max(seconds - now, 0):.1f}s)"


@click.group()
def schedules() -> None:
    """List and control periodic jobs (pause, resume, remove, trigger)."""


@schedules.command("list")
@click.option("-q", "--queue", "queues", multiple=True, help="Queue (default: all known).")
@url_option
@namespace_option
@_redis_errors
def list_(queues: tuple[str, ...], url: str | None, namespace: str) -> None:
    """Show the schedules: timing, next and last tick, last outcome, counts."""
    names = list(queues) or _known_queues(url, namespace)
    rows: list[tuple[object, ...]] = []
    with _client(url, namespace) as (base, shards):
        for name in names:
            for queue in _shard_queues(name, shards):
                for info in _listed(base, queue, namespace, shards):
                    now = info.server_time
                    rows.append((
                        queue, info.name, info.task, _every(info), info.state,
                        _in(info.next_due, now), _when(info.last_tick),
                        info.last_outcome or "-", info.fired, info.skipped, info.missed,
                    ))  # fmt: skip
    if not rows:
        console.print("no schedules (workers upsert the schedules their app declares)")
        return
    table = Table(title="durq schedules", box=box.SIMPLE_HEAD)
    for col in _COLUMNS:
        table.add_column(col, justify="right" if col in ("fired", "skipped", "missed") else "left")
    for row in rows:
        table.add_row(*map(plain, row))
    if console.measure(table, options=console.options.update_width(10_000)).maximum <= (
        console.width
    ):
        console.print(table)
        return
    # a narrow terminal: one block per schedule, each value whole, rather than a table
    # of columns squeezed to an ellipsis
    for row in rows:
        where, schedule, task, timing, state, due, last, outcome, fired, skipped, missed = row
        console.print(plain(f"{schedule}  (queue {where}, task {task})"))
        console.print(plain(f"  {timing}, {state}; next tick {due}"))
        console.print(plain(f"  last tick {last}, outcome {outcome}"))
        console.print(plain(f"  fired {fired}, skipped {skipped}, missed {missed}"))


_COLUMNS = ("queue", "schedule", "task", "timing", "state", "next tick", "last tick",
            "last outcome", "fired", "skipped", "missed")  # fmt: skip


def _control(action: str, name: str, queue: str, url: str | None, namespace: str) -> Any:
    with _client(url, namespace) as (base, shards):
        target = pinned_queue(queue, name, shards.get(queue, 0))
        q = _queue(base, target, namespace, shards)
        result = q.control_schedule(action, name)
    if result is None:
        raise click.ClickException(f"no schedule {name!r} in queue {target!r}")
    return result


_queue_option = click.option("-q", "--queue", required=True, help="The schedule's queue.")


def _control_command(fn: Callable[..., None]) -> click.Command:
    """``durq schedules <verb> NAME -q QUEUE [--url] [--namespace]``: one command of
    runtime control, with the options and error handling they all share."""
    for add in (_redis_errors, namespace_option, url_option, _queue_option,
                click.argument("name")):  # fmt: skip
        fn = add(fn)
    return schedules.command()(fn)


@_control_command
def pause(name: str, queue: str, url: str | None, namespace: str) -> None:
    """Stop firing a schedule's ticks (worker restarts keep it paused)."""
    _control("pause", name, queue, url, namespace)
    console.print(plain(f"paused {name}"))


@_control_command
def resume(name: str, queue: str, url: str | None, namespace: str) -> None:
    """Fire a paused schedule again from its next tick (the paused ticks are skipped)."""
    due = _control("resume", name, queue, url, namespace)
    console.print(plain(f"resumed {name}: next tick {_when(due) if due else 'none (ended)'}"))


@_control_command
def remove(name: str, queue: str, url: str | None, namespace: str) -> None:
    """Delete a schedule and its state (a worker that declares it creates it anew)."""
    _control("remove", name, queue, url, namespace)
    console.print(plain(f"removed {name}"))


@_control_command
def trigger(name: str, queue: str, url: str | None, namespace: str) -> None:
    """Enqueue a schedule's job now, besides its ticks."""
    job_id = _control("trigger", name, queue, url, namespace)
    console.print(plain(f"enqueued {job_id}"))
