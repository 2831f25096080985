"""``durq enqueue``: one call of a task by name, with the per-job options of
``Task.options`` (delay, priority, dedup key and modes, expiry)."""

from __future__ import annotations

from typing import Any

import click
import orjson

from durq.cli.admin import _queue, _redis_errors, console
from durq.cli.common import load_app, namespace_option, url_option
from durq.cli.inert import plain
from durq.errors import DurqError
from durq.models import EnqueueStatus

__all__ = ["enqueue"]


def _said(status: EnqueueStatus, job_id: str, queue: str, superseded: str | None) -> str:
    """What an enqueue did, in one line: ``created: job ID on QUEUE``."""
    shown = f"{status.value}: job {job_id} on {queue}"
    if superseded:  # REPLACED
        shown += f" (superseded job {superseded})"
    return shown


@click.command(short_help="Enqueue a call of a task by name, with JSON arguments.")
@click.argument("task")
@click.option(
    "--args",
    "args_json",
    default="[]",
    show_default=True,
    help="Positional arguments as a JSON list.",
)
@click.option(
    "--kwargs",
    "kwargs_json",
    default="{}",
    show_default=True,
    help="Keyword arguments as a JSON object.",
)
@click.option("-q", "--queue", default=None, help="Queue [default: the task's, with --app].")
@click.option(
    "--app",
    "target",
    default=None,
    metavar="MODULE:APP",
    help="Check the task and its arguments against this App.",
)
@click.option(
    "--delay", type=float, default=None, metavar="SECONDS", help="Seconds before it is ready."
)
@click.option("--id", "job_id", default=None, help="Idempotency id.")
@click.option("--priority", type=int, default=None, help="-10..10, higher first within its group.")
@click.option("--group", default=None, help="The group (tenant) served in turn with the others.")
@click.option("--key", default=None, help="Dedup key: a job of the key not started yet is kept.")
@click.option(
    "--replace", is_flag=True, help="With --key: supersede the job of the key not started yet."
)
@click.option(
    "--expires",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Not started within SECONDS, it never runs (it ends expired).",
)
@click.option(
    "--ttl",
    type=float,
    default=None,
    metavar="SECONDS",
    help="With --key, throttle: one job per key per SECONDS.",
)
@click.option(
    "--debounce",
    type=float,
    default=None,
    metavar="SECONDS",
    help="With --key: start SECONDS after a burst's last enqueue, with its arguments.",
)
@click.option(
    "--max-wait",
    type=float,
    default=None,
    metavar="SECONDS",
    help="With --debounce: the longest a steady stream of enqueues holds the job back.",
)
@click.option(
    "--keep-last",
    is_flag=True,
    help="With --key: while its job runs, one follow-up waits, with the newest arguments.",
)
@url_option
@namespace_option
@_redis_errors
def enqueue(
    task: str,
    args_json: str,
    kwargs_json: str,
    queue: str | None,
    target: str | None,
    delay: float | None,
    job_id: str | None,
    priority: int | None,
    group: str | None,
    key: str | None,
    replace: bool,
    expires: float | None,
    ttl: float | None,
    debounce: float | None,
    max_wait: float | None,
    keep_last: bool,
    url: str | None,
    namespace: str,
) -> None:
    """Enqueue a call of TASK (by name) with JSON arguments.

    The options are those of Task.options in Python, checked the same way: a dedup mode
    (--ttl, --debounce, --keep-last, --replace) needs --key, and takes no other mode."""
    try:
        args, kwargs = orjson.loads(args_json), orjson.loads(kwargs_json)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from None
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise click.BadParameter("--args must be a JSON list and --kwargs a JSON object")
    # options not given are left out, so that each path applies its own defaults; the
    # library checks the rest (InvalidArgument: reported below in one line)
    options: dict[str, Any] = {
        "id": job_id, "delay": delay, "priority": priority, "group": group, "key": key,
        "replace": replace, "expires": expires, "ttl": ttl, "debounce": debounce,
        "max_wait": max_wait, "keep_last": keep_last,
    }  # fmt: skip
    given = {name: v for name, v in options.items() if v is not None and v is not False}
    if target:
        app = load_app(target)
        if url:
            app.url = url
        found = app.tasks.get(task)
        if found is None:
            raise click.ClickException(f"no task {task!r} in {target}: {sorted(app.tasks)}")
        try:
            handle = found.options(queue=queue, **given).enqueue(*args, **kwargs)
        except DurqError as exc:
            raise click.ClickException(str(exc)) from None
        console.print(plain(_said(handle.status, handle.id, handle.queue, handle.superseded)))
        return
    if queue is None:
        raise click.UsageError("give --queue, or --app to use the task's queue")
    with _queue(queue, url, namespace) as q:
        try:
            result = q.enqueue([task, args, kwargs], **given)
        except DurqError as exc:
            raise click.ClickException(str(exc)) from None
    console.print(plain(_said(result.status, result.id, result.queue or queue, result.superseded)))
