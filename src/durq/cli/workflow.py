"""``durq workflow show ID``: a workflow's state, its steps and where it waits;
``durq workflow cancel ID``: cancel it."""

from __future__ import annotations

import time
from collections import Counter

import click
from rich.table import Table

from durq._sync.namespace import Namespace
from durq._sync.queue import Queue
from durq.cli.admin import _known_queues, _redis_errors, _when, console
from durq.cli.common import namespace_option, redact_options, url_option
from durq.cli.inert import escape_controls, plain
from durq.errors import DurqError
from durq.keys import check_job_id, shard_name, split_shard
from durq.models import CancelStatus, WorkflowInfo
from durq.redaction import Redact

__all__ = ["workflow"]


@click.group()
def workflow() -> None:
    """Inspect and cancel workflows (durq.chain, durq.group)."""


def _find(workflow_id: str, queue: str | None, url: str | None, namespace: str) -> Queue:
    """The home queue of the workflow: ``queue`` (a queue, or a shard ``name~i`` of a
    sharded queue), or the registered queue holding it (a sharded queue's steps spread
    over its shards, and so do the homes of its workflows)."""
    with Namespace(url, namespace=namespace) as space:
        counts = space.shard_counts()
    if queue:
        base, index = split_shard(queue)
        homes = [(queue, counts.get(base, 0) if index is not None else 0)]
    else:
        homes = [
            home
            for n in _known_queues(url, namespace)
            for home in (
                [(shard_name(n, i), counts[n]) for i in range(counts[n])]
                if n in counts
                else [(n, 0)]
            )
        ]
    for name, shards in homes:
        q = Queue(name, url, namespace=namespace, shard_count=shards)
        if q.has_workflow(workflow_id):
            return q
        q.close()
    where = f"queue {queue}" if queue else "any registered queue (give its home: -q)"
    raise click.ClickException(f"no workflow {workflow_id} in {where}")


def _print(info: WorkflowInfo, limit: int, redact: Redact) -> None:
    summary = Table(show_header=False, title=plain(f"workflow {info.id}"))
    summary.add_column("field", style="bold")
    summary.add_column("value", overflow="fold")
    rows = [
        ("state", info.state),
        ("home queue", info.queue),
        ("on failure", info.policy),
        ("created", _when(info.created_at)),
        ("finished", _when(info.finished_at)),
        ("steps", ", ".join(f"{n} {s}" for s, n in sorted(info.counts.items()))),
    ]
    if info.waiting_on:
        waits = ", ".join(f"group {b}: {n} open" for b, n in sorted(info.waiting_on.items()))
        rows.append(("waiting on", waits))
    for node, reason in sorted(info.dead.items()):
        rows.append((f"dead step {node}", f"{redact.value(reason)} (replay it to go on)"))
    if info.error:
        rows.append(("error", str(redact.value(info.error))))
    for name, value in rows:
        summary.add_row(plain(name), plain(value))
    console.print(summary)
    steps = Table(title=f"steps (first {limit})" if len(info.steps) > limit else "steps")
    for column in ("node", "task", "queue", "job", "state"):
        steps.add_column(column)
    for step in info.steps[:limit]:
        steps.add_row(*map(plain, (step.node, step.task, step.queue, step.job_id, step.state)))
    console.print(steps)
    tasks = Counter(s.task for s in info.steps)
    if len(info.steps) > limit:
        console.print(plain(f"... {len(info.steps) - limit} more ({dict(tasks)})"))


@workflow.command("show", short_help="Show a workflow: state, steps, where it waits.")
@click.argument("workflow_id")
@click.option("-q", "--queue", default=None, help="Its home queue [default: searched].")
@click.option("--limit", default=50, show_default=True, help="Steps listed at most.")
@click.option("--watch", is_flag=True, help="Show it again every second until it ended.")
@url_option
@namespace_option
@redact_options
@_redis_errors
def show(
    workflow_id: str,
    queue: str | None,
    limit: int,
    watch: bool,
    url: str | None,
    namespace: str,
    redact: Redact,
) -> None:
    """Show a workflow: its state, each step's state, and where it waits (open groups,
    dead steps waited for). Its home queue is found among the registered queues unless
    given with -q (the handle's ``queue``)."""
    try:
        check_job_id(workflow_id)
        q = _find(workflow_id, queue, url, namespace)
        with q:
            while True:
                info = q.workflow(workflow_id)
                if info is None:
                    raise click.ClickException(f"workflow {workflow_id} is gone (expired)")
                _print(info, limit, redact)
                if not watch or info.state != "running":
                    return
                time.sleep(1.0)
    except DurqError as exc:
        raise click.ClickException(escape_controls(str(exc))) from None


@workflow.command("cancel", short_help="Cancel a running workflow.")
@click.argument("workflow_id")
@click.option("-q", "--queue", default=None, help="Its home queue [default: searched].")
@url_option
@namespace_option
@_redis_errors
def cancel(workflow_id: str, queue: str | None, url: str | None, namespace: str) -> None:
    """Cancel a workflow (WorkflowHandle.cancel): it ends cancelled, its callback never
    runs, its steps that did not start never do, and its running steps are stopped.
    A workflow that had ended is left as it is; an unknown one exits 1."""
    try:
        check_job_id(workflow_id)
        q = _find(workflow_id, queue, url, namespace)
        with q:
            status, state = q.cancel_workflow(workflow_id)
    except DurqError as exc:
        raise click.ClickException(escape_controls(str(exc))) from None
    if status is CancelStatus.CANCELLED:
        console.print(plain(f"workflow {workflow_id}: cancelled"))
    elif status is CancelStatus.FINISHED:
        console.print(plain(f"workflow {workflow_id} had ended ({state}): nothing changed"))
    else:
        raise click.ClickException(f"workflow {workflow_id} is gone (expired)")
