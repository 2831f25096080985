"""Inspecting and repairing queues: ``stats``, ``workers``, ``job``, ``dlq``, ``doctor``."""

from __future__ import annotations

import datetime
import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec

import click
from redis.exceptions import RedisError
from rich import box
from rich.table import Table
from rich.text import Text

from durq._sync.namespace import Namespace
from durq._sync.queue import Queue
from durq._sync.sharded import ShardedQueue
from durq.cli.common import namespace_option, terminal, url_option
from durq.cli.inert import escape_controls, plain
from durq.cli.limits_tables import flow_tables
from durq.cli.pool_tables import children_table
from durq.errors import DurqError
from durq.models import GroupInfo, QueueStats
from durq.transport import connection
from durq.worker.registry import list_workers

__all__ = ["doctor", "stats", "workers"]

console = terminal()
P = ParamSpec("P")


def _redis_errors(command: Callable[P, None]) -> Callable[P, None]:
    """Report Redis errors (server unreachable, wrong password, missing permission) and
    durq's (a bad namespace, a key of another type) in one line, as command errors,
    rather than as a traceback (their messages may quote what Redis holds: inert)."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            command(*args, **kwargs)
        except RedisError as exc:
            raise click.ClickException(escape_controls(f"{type(exc).__name__}: {exc}")) from None
        except DurqError as exc:
            raise click.ClickException(escape_controls(str(exc))) from None

    return run


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@contextmanager
def _queue(name: str, url: str | None, namespace: str) -> Iterator[Queue | ShardedQueue]:
    try:
        with Namespace(url, namespace=namespace) as space:
            # a sharded queue: its shards, added up
            yield space.queue(name)
    except DurqError as exc:
        raise click.ClickException(escape_controls(str(exc))) from None


def _known_queues(url: str | None, namespace: str) -> list[str]:
    try:
        with Namespace(url, namespace=namespace) as space:
            return space.queue_names()
    except DurqError as exc:  # a bad namespace, or something else's key in its place
        raise click.ClickException(escape_controls(str(exc))) from None


_NOW = ("pending", "delayed", "active", "held", "dead")
_TOTALS = ("enqueued", "completed", "failed", "retried", "dead-lettered", "reclaimed")


def _stats_table(title: str, rows: dict[str, dict[str, Any]], columns: list[str]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD)
    table.add_column("queue", no_wrap=True)  # the one column never cut short
    for col in columns:
        table.add_column(col, justify="right", overflow="fold")
    for name, row in rows.items():
        table.add_row(plain(name), *(plain(row[col]) for col in columns))
    return table


def _groups_table(group_rows: list[tuple[str, GroupInfo]]) -> Table:
    gt = Table(title="largest groups", box=box.SIMPLE_HEAD)
    gt.add_column("queue", no_wrap=True)
    gt.add_column("group", overflow="fold")
    for col in ("ready", "active", "limit", "weight"):
        gt.add_column(col, justify="right")
    for qname, g in group_rows:
        gt.add_row(*map(plain, (qname, g.name, g.ready, g.active, g.limit or "-", g.weight or "-")))
    return gt


def _outbox_table(outboxes: list[QueueStats]) -> Table | None:
    """The workflow outboxes that hold entries (None when none does): what steps in
    these queues wrote for workflows and steps in other slots, not delivered yet. It
    grows when no worker consumes the queue, or deliveries fail."""
    held = [o for o in outboxes if o.size or o.dead]
    if not held:
        return None
    table = Table(title="workflow outboxes: not delivered yet", box=box.SIMPLE_HEAD)
    table.add_column("queue", no_wrap=True)
    for col in ("waiting", "retrying", "delivering", "dead"):
        table.add_column(col, justify="right")
    for o in held:
        table.add_row(*map(plain, (o.name, o.pending, o.delayed, o.active, o.dead)))
    return table


@click.command(short_help="Show the queues: sizes, totals and throughput.")
@click.argument("queues", nargs=-1)
@url_option
@namespace_option
@click.option(
    "--groups",
    "top_groups",
    default=0,
    show_default=True,
    help="Also show the N largest groups of each queue.",
)
@click.option(
    "--rate/--no-rate",
    default=False,
    show_default=True,
    help="Also measure jobs completed per second (reads twice, a second apart).",
)
@_redis_errors
def stats(
    queues: tuple[str, ...], url: str | None, namespace: str, top_groups: int, rate: bool
) -> None:
    """Show the queues: pending, delayed, active, held (waiting for a worker that runs
    their task: docs/deployment.md), dead, totals and throughput.

    Queues whose workflow outbox holds entries (workflow steps in other slots, not
    delivered yet) are listed in a table of their own."""
    names = list(queues) or _known_queues(url, namespace)
    if not names:
        console.print("no queues yet (a queue is listed once something was enqueued)")
        return
    first = {}
    for name in names:
        with _queue(name, url, namespace) as q:
            first[name] = q.stats()
    if rate:
        time.sleep(1.0)
    group_rows: list[tuple[str, GroupInfo]] = []
    flow_infos = []  # flow control of the queues that use it (durq limits)
    outboxes = []  # workflow outboxes (docs/workflows.md, "Across queues")
    rows: dict[str, dict[str, Any]] = {}
    for name in names:
        with _queue(name, url, namespace) as q:
            s = q.stats() if rate else first[name]
            if top_groups:
                group_rows += [(name, g) for g in q.groups(top_groups)]
            flow_infos.append(q.limits())
            outboxes.append(q.outbox_stats())
        row = {col: getattr(s, col.replace("-", "_")) for col in (*_NOW, *_TOTALS)}
        if rate:
            elapsed = max(s.server_time - first[name].server_time, 1e-3)
            row["done/s"] = f"{(s.completed - first[name].completed) / elapsed:.0f}"
        rows[name] = row
    now = [*_NOW, "done/s"] if rate else list(_NOW)
    table = _stats_table("durq queues", rows, [*now, *_TOTALS])
    if (
        console.measure(table, options=console.options.update_width(10_000)).maximum
        <= console.width
    ):
        console.print(table)
    else:  # a narrow terminal: two tables rather than squeezed columns
        console.print(_stats_table("durq queues", rows, now))
        console.print(_stats_table("since each queue was created", rows, list(_TOTALS)))
    backlog = _outbox_table(outboxes)
    if backlog is not None:
        console.print(backlog)
    if group_rows:
        console.print(_groups_table(group_rows))
    for flow_table in flow_tables([info for info in flow_infos if info.limited]):
        console.print(flow_table)


@click.command()
@url_option
@namespace_option
@_redis_errors
def workers(url: str | None, namespace: str) -> None:
    """List the live workers (with the durq version each runs) and the jobs in their
    hands."""
    client = connection.sync_client(url)
    try:
        entries = list_workers(client, namespace)
    finally:
        client.close()
    now = time.time()
    table = Table(
        title=f"{len(entries)} live worker{'' if len(entries) == 1 else 's'}", box=box.SIMPLE_HEAD
    )
    table.add_column("id", no_wrap=True)
    table.add_column("queues", overflow="fold")
    table.add_column("durq", no_wrap=True)  # a deploy under way shows two versions
    for col in ("concurrency", "in hand", "up", "last beat"):
        table.add_column(col, justify="right")
    jobs = Table(title="jobs in hand", box=box.SIMPLE_HEAD)
    for col in ("worker", "queue", "job", "task", "attempt", "state"):
        jobs.add_column(col, no_wrap=col in ("worker", "job"), overflow="fold")
    for w in entries:
        # heartbeats are whatever was written to Redis: shown as text, never trusted
        in_hand = _number(w.get("in_hand")) or 0
        queues = w.get("queues")
        table.add_row(
            *map(plain, (
                w["id"],
                ", ".join(map(str, queues)) if isinstance(queues, list) else "",
                w.get("version", "?"),
                w.get("concurrency", ""),
                f"{in_hand:g}",
                _age(now, _number(w.get("started"))),
                _last_beat(now, w),
            ))
        )  # fmt: skip
        listed = [j for j in w.get("jobs") or () if isinstance(j, dict)]
        for j in listed:
            state = "running" if j.get("running") else "waiting"
            row = (j.get("queue"), j.get("id"), j.get("task") or "?", j.get("attempt"), state)
            jobs.add_row(*map(plain, (w["id"], *row)))
        if in_hand > len(listed):  # the registry lists the first 100
            jobs.add_row(plain(w["id"]), "", f"and {in_hand - len(listed):g} more", "", "", "")
    console.print(table)
    if jobs.row_count:
        console.print(jobs)
    children = children_table(entries)
    if children.row_count:
        console.print(children)


def _last_beat(now: float, worker: dict[str, Any]) -> str:
    """How old a worker's last beat is, and for an idle one (its beats minutes apart,
    ``every`` in its heartbeat) how often it beats: "4m ago (idle: every 10m)"."""
    text = _age(now, _number(worker.get("beat"))) + " ago"
    every = _number(worker.get("every"))
    if every is not None and every >= 60:
        text += f" (idle: every {_age(every, 0.0)})"
    return text


def _number(value: Any) -> float | None:
    """A number of a heartbeat, or None when it holds anything else."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def _age(now: float, then: float | None) -> str:
    """``now - then`` for people: 0.2s, 45s, 12m, 3h, 2d."""
    if then is None:
        return "-"
    seconds = max(now - then, 0.0)
    if seconds < 10:
        return f"{seconds:.1f}s"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _library_notes(space: Namespace) -> list[tuple[str, str]]:
    """An info line when the server keeps the Functions libraries of other durq versions."""
    try:
        found = space.libraries()
    except RedisError:  # FUNCTION LIST not allowed for this user: nothing to say
        return []
    others = sorted({lib.name for _, libs in found for lib in libs or () if not lib.current})
    if not others:
        return []
    return [
        (
            "info",
            f"{len(others)} Functions librar{'y' if len(others) == 1 else 'ies'} of other durq "
            f"versions loaded ({', '.join(others)}), about 2.4 MB of memory each: "
            "`durq functions prune` removes them",
        )
    ]


@click.command()
@click.argument("queues", nargs=-1)
@url_option
@namespace_option
def doctor(queues: tuple[str, ...], url: str | None, namespace: str) -> None:
    """Check the server's settings and the queues' keys for what can lose jobs."""
    names = list(queues) or _known_queues(url, namespace)
    problems = 0
    with Namespace(url, namespace=namespace) as space:
        notes = space.server_warnings() + _library_notes(space)
        for level, message in notes:
            problems += level == "warning"
            style = "red" if level == "warning" else "yellow"
            console.print(Text.assemble((level, style), ": ", plain(message)))
    for name in names:
        with _queue(name, url, namespace) as q:
            for problem in q.check():
                problems += 1
                shown = (escape_controls(f"queue {name}"), "red")
                console.print(Text.assemble(shown, ": ", plain(problem)))
    console.print("[green]no problems found[/]" if not problems else f"{problems} problem(s)")
    if problems:
        raise SystemExit(1)
