"""``durq job``: show one job (``durq job ID -q Q``, the same as ``durq job show``) and
cancel jobs (``durq job cancel ID... -q Q``)."""

from __future__ import annotations

import click

from durq.cli.admin import _queue, _redis_errors, console
from durq.cli.common import namespace_option, url_option
from durq.cli.inert import plain
from durq.cli.job_show import job as show_job
from durq.models import CancelStatus

__all__ = ["job"]


class _JobGroup(click.Group):
    """``durq job ID`` keeps meaning ``durq job show ID``: what is not a subcommand (an
    id, an option) goes to ``show``. A job id that is a subcommand's name is shown with
    ``durq job show NAME``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_JobGroup, short_help="Show one job, or cancel jobs.")
def job() -> None:
    """Show everything stored about one job (durq job ID -q QUEUE), or cancel jobs
    (durq job cancel ID... -q QUEUE)."""


job.add_command(show_job, "show")

_SAID = {
    CancelStatus.CANCELLED: "cancelled: it will not run",
    CancelStatus.CANCELLING: "running: its worker is stopping it; it ends cancelled",
    CancelStatus.NOT_FOUND: "not found in this queue",
}


@job.command("cancel")
@click.argument("ids", nargs=-1, required=True)
@click.option("-q", "--queue", required=True, help="The jobs' queue.")
@url_option
@namespace_option
@_redis_errors
def cancel(ids: tuple[str, ...], queue: str, url: str | None, namespace: str) -> None:
    """Cancel jobs: one not started (or waiting for a retry) never runs; a running one
    is stopped by its worker within a third of its lease and is not retried. A job that
    has ended is left as it is. Exits 1 if an id is unknown.

    Job ids may begin with "-": put them after "--" (durq job cancel -q Q -- -xY...)."""
    with _queue(queue, url, namespace) as q:
        results = q.cancel(list(ids))
    for result in results:
        if result.status is CancelStatus.FINISHED:
            state = result.state.value if result.state else "ended"
            said = f"had ended already ({state}): nothing changed"
        else:
            said = _SAID[result.status]
        console.print(plain(f"{result.id}: {said}"))
    if any(r.status is CancelStatus.NOT_FOUND for r in results):
        raise SystemExit(1)
