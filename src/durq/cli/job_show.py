"""``durq job`` and ``durq dlq``: one job (found in any queue, with its last failures,
durable steps and stored result) and the dead letters of a queue."""

from __future__ import annotations

from typing import Any, NamedTuple

import click
import orjson
from rich.table import Table

from durq._sync.queue import Queue
from durq._sync.sharded import ShardedQueue
from durq.cli.admin import _known_queues, _queue, _redis_errors, _when, console
from durq.cli.common import namespace_option, redact_options, url_option
from durq.cli.inert import plain
from durq.cli.steps import steps_table
from durq.models import JobInfo, JobState
from durq.payloads import decode_result, finished_record, result_summary
from durq.redaction import Redact

__all__ = ["dlq", "job"]


def _task_of(info: JobInfo) -> str:
    """The task a job's payload names, or "" (not a task call, or unreadable)."""
    try:
        payload = info.payload()
    except Exception:
        return ""
    named = isinstance(payload, list) and payload and isinstance(payload[0], str)
    return payload[0] if named else ""


class Stored(NamedTuple):
    """What is kept of a finished job with a stored result (a task with
    ``result=True``), for its ``result_ttl``: the result or the error, and the job's
    summary the worker kept with it (``durq.worker.summary``; None: stored without)."""

    kind: str  # "result" or "error"
    value: Any
    job: dict[str, Any] | None
    raw: bytes


def _stored(q: Queue | ShardedQueue, job_id: str) -> Stored | None:
    """The result (or error) stored for ``job_id``, read at once; None when there is
    none."""
    if not isinstance(q, Queue):  # a sharded queue's results are read by shard
        return None
    raw = q.wait_result(job_id, 0)
    if raw is None:
        return None
    ok, value = decode_result(raw)
    return Stored("result" if ok else "error", value, result_summary(raw), raw)


def _lookup(q: Queue | ShardedQueue, job_id: str) -> tuple[JobInfo, Stored | None] | None:
    """What ``q`` keeps of ``job_id``: its record, and its stored result once it
    finished. A worker deletes a completed job's record at once: then the summary kept
    with the result stands in for it (a result stored without one: a bare record)."""
    info = q.job(job_id)
    stored = _stored(q, job_id) if info is None or info.state is JobState.COMPLETED else None
    if stored is not None and (info is None or (info.data is None and stored.job)):
        return finished_record(job_id, stored.raw), stored  # no record, or a bare tombstone
    return None if info is None else (info, stored)


def _summary_rows(info: JobInfo, stored: Stored | None, redact: Redact) -> list[tuple[str, Any]]:
    """The rows only a finished job's summary has: its timings and its worker, and its
    arguments when its record (and payload) is gone."""
    job = stored.job if stored is not None else None
    if not job:
        return []
    rows: list[tuple[str, Any]] = []
    if info.data is not None:
        pass  # the payload row shows them
    elif "args" in job:
        call = {"args": job.get("args"), "kwargs": job.get("kwargs")}
        rows.append(("arguments", _json_or_repr(call, redact)[:2000]))
    elif "args_bytes" in job:
        rows.append(("arguments", f"not kept ({job['args_bytes']} bytes of payload)"))
    started, seconds = job.get("started"), job.get("seconds")
    if isinstance(started, int | float) and isinstance(seconds, int | float):
        rows.append(("started", _when(started)))
        rows.append(("finished", _when(started + seconds)))
        rows.append(("ran", f"{seconds:.3f} s"))
    rows.append(("worker", str(job.get("worker") or "-")))
    return rows


def _failure(error: dict[str, Any]) -> str:
    """One of a job's last failures on one line: when, the exception, and the line of
    the task's code that raised it (the last "File" line of its traceback)."""
    kind = str(error.get("type") or error.get("reason") or "failed").rsplit(".", 1)[-1]
    where = [line.strip() for line in str(error.get("traceback", "")).splitlines()]
    files = [line for line in where if line.startswith("File ")]
    shown = f"{_when(error.get('at'))}  {kind}: {error.get('message', '')}"
    return shown + (f"  ({files[-1]})" if files else "")


def _show(info: JobInfo, redact: Redact, queue: str, stored: Stored | None = None) -> None:
    info = redact.job(info)  # its reason and progress; the payload below
    table = Table(show_header=False, title=plain(f"job {info.id}"))
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows: list[tuple[str, Any]] = [
        ("queue", queue),
        ("task", _task_of(info) or _summary_task(stored) or "-"),
        ("state", info.state.value + (" (corrupt record)" if info.corrupt else "")),
        ("group", info.group or "-"),
        ("key", info.key or "-"),
        ("priority", info.priority),
        ("attempts", f"{info.attempts}/{info.max_attempts}"),
        ("deliveries", info.deliveries),
        ("failures", info.failures),
        ("enqueued", _when(info.enqueued_at)),
        ("last dequeued", _when(info.dequeued_at)),
        ("last requeued", _when(info.requeued_at)),
        ("lease ends", _when(info.lease_deadline)),
        ("due", _when(info.due_at)),
        ("died", _when(info.died_at)),
        ("kept until", _when(info.retained_until)),
    ]
    for name, value in rows + _summary_rows(info, stored, redact) + _control_rows(info):
        table.add_row(name, plain(value))
    if info.reason:
        for k, v in info.reason.items():
            table.add_row(plain(f"reason.{k}"), plain(v))
    for error in info.errors:  # its last failures, oldest first (the latest is the reason)
        table.add_row(plain(f"attempt {error.get('attempt', '?')} failed"), plain(_failure(error)))
    if info.data is not None:
        try:
            shown = orjson.dumps(redact.value(info.payload())).decode()
        except Exception:
            shown = redact.text(repr(info.data[:500]))
        table.add_row("payload", plain(shown[:2000]))
    if stored is not None:
        table.add_row(stored.kind, plain(_json_or_repr(stored.value, redact)[:2000]))
    console.print(table)


def _summary_task(stored: Stored | None) -> str:
    task = stored.job.get("task") if stored is not None and stored.job else None
    return task if isinstance(task, str) else ""


def _control_rows(info: JobInfo) -> list[tuple[str, Any]]:
    """The rows of a job's job control (docs/job-control.md), those it has."""
    rows: list[tuple[str, Any]] = []
    if info.progress is not None:
        shown = f"{info.progress.fraction:.1%} at {_when(info.progress.at)}"
        if info.progress.info is not None:
            shown += f": {orjson.dumps(info.progress.info).decode()[:500]}"
        rows.append(("progress", shown))
    if info.expires_at is not None:
        rows.append(("expires", _when(info.expires_at)))
    if info.cancel_requested:
        rows.append(("cancel", "requested: its worker is stopping it"))
    if info.waits_for is not None:
        rows.append(("waits for", f"job {info.waits_for} (keep-last follow-up)"))
    return rows


def _json_or_repr(value: Any, redact: Redact) -> str:
    """``value`` as JSON text with its secrets hidden (its repr if it is not JSON)."""
    try:
        return orjson.dumps(redact.value(value)).decode()
    except Exception:
        return redact.text(repr(value))


def _find_job(job_id: str, url: str | None, namespace: str) -> tuple[str, JobInfo, Stored | None]:
    """The queue that has a trace of ``job_id``, and what it has: every queue of the
    namespace is asked (a round trip or two each), the first that knows the id answers."""
    for name in _known_queues(url, namespace):
        with _queue(name, url, namespace) as q:
            found = _lookup(q, job_id)
        if found is not None:
            return name, *found
    raise click.ClickException(f"no queue has a trace of job {job_id}")


@click.command(short_help="Show everything stored about one job.")
@click.argument("job_id")
@click.option("-q", "--queue", help="The job's queue (default: found by asking each queue).")
@url_option
@namespace_option
@redact_options
@_redis_errors
def job(job_id: str, queue: str | None, url: str | None, namespace: str, redact: Redact) -> None:
    """Show everything stored about one job: queue, task, state, attempts, times, reason,
    its last failures, payload, its durable steps, sleeps and waits, and a finished job's
    stored result.
    Without -q, every queue is asked for it.

    Job ids may begin with "-": put such an id after "--" (durq job -q Q -- -xY...)."""
    if queue is None:
        queue, info, stored = _find_job(job_id, url, namespace)
    else:
        with _queue(queue, url, namespace) as q:
            found = _lookup(q, job_id)
        if found is None:
            raise click.ClickException(f"queue {queue} has no trace of job {job_id}")
        info, stored = found
    with _queue(queue, url, namespace) as q:
        steps = q.steps(job_id)
    _show(info, redact, queue, stored)
    if steps:  # durable steps (docs/durable.md)
        console.print(steps_table(info.id, steps))


@click.group()
def dlq() -> None:
    """Dead letters: list, show, replay, purge."""


@dlq.command("list")
@click.option("-q", "--queue", required=True, help="The dead letters' queue.")
@click.option("--limit", default=50, show_default=True)
@url_option
@namespace_option
@redact_options
@_redis_errors
def dlq_list(queue: str, limit: int, url: str | None, namespace: str, redact: Redact) -> None:
    """List dead letters, newest first, with their reasons."""
    with _queue(queue, url, namespace) as q:
        total = q.stats().dead
        items = [redact.job(info) for info in q.dead_letters(limit)]
    table = Table(title=plain(f"{total} dead letters in {queue}"))
    for col in ("id", "task", "died", "attempts", "reason", "error"):
        table.add_column(col, overflow="fold")
    for info in items:
        reason = info.reason or {}
        kind = str(reason.get("type", "")).rsplit(".", 1)[-1]  # builtins.ValueError: ValueError
        error = f"{kind}: {reason.get('message', '')}" if kind else str(reason.get("message", ""))
        table.add_row(
            *map(plain, (
                info.id,
                _task_of(info) or "-",
                _when(info.died_at),
                f"{info.attempts}/{info.max_attempts}",
                reason.get("reason", ""),
                error[:120],
            ))
        )  # fmt: skip
    console.print(table)


@dlq.command("show")
@click.argument("job_id")
@click.option("-q", "--queue", required=True, help="The dead letters' queue.")
@url_option
@namespace_option
@redact_options
@_redis_errors
def dlq_show(job_id: str, queue: str, url: str | None, namespace: str, redact: Redact) -> None:
    """Show one dead letter with its traceback.

    Job ids may begin with "-": put such an id after "--" (durq dlq show -q Q -- -xY...)."""
    with _queue(queue, url, namespace) as q:
        info = q.job(job_id)
    if info is None or info.died_at is None:
        raise click.ClickException(f"{job_id} is not a dead letter of {queue}")
    _show(info, redact, queue)


def _ids_or_all(ids: tuple[str, ...], all_: bool) -> None:
    if bool(ids) == all_:
        raise click.UsageError("give job ids, or --all (not both)")


@dlq.command("replay")
@click.argument("ids", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Replay every dead letter.")
@click.option("-q", "--queue", required=True, help="The dead letters' queue.")
@url_option
@namespace_option
@_redis_errors
def dlq_replay(
    ids: tuple[str, ...], all_: bool, queue: str, url: str | None, namespace: str
) -> None:
    """Put dead letters back in the queue with fresh attempts.

    Job ids may begin with "-": put such an id after "--" (durq dlq replay -q Q -- -xY...)."""
    _ids_or_all(ids, all_)
    with _queue(queue, url, namespace) as q:
        n = q.replay_all() if all_ else q.replay(list(ids))
    console.print(f"replayed {n} job(s)")


@dlq.command("purge")
@click.argument("ids", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Delete every dead letter.")
@click.option("-q", "--queue", required=True, help="The dead letters' queue.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation with --all.")
@url_option
@namespace_option
@_redis_errors
def dlq_purge(
    ids: tuple[str, ...], all_: bool, queue: str, yes: bool, url: str | None, namespace: str
) -> None:
    """Delete dead letters for good.

    Job ids may begin with "-": put such an id after "--" (durq dlq purge -q Q -- -xY...)."""
    _ids_or_all(ids, all_)
    if all_ and not yes:
        click.confirm(f"delete every dead letter of {queue}?", abort=True)
    with _queue(queue, url, namespace) as q:
        n = q.purge_all() if all_ else q.purge(list(ids))
    console.print(f"purged {n} job(s)")
