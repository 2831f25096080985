"""The ``durq`` command line: run workers and a local server, inspect and repair queues.

Every command takes ``--url`` (default ``$DURQ_URL``, then ``redis://localhost:6379/0``).
"""

from __future__ import annotations

import click

from durq._version import __version__
from durq.cli.admin import doctor, stats, workers
from durq.cli.dashboard import dashboard
from durq.cli.deploy import deploy
from durq.cli.durable import signal
from durq.cli.enqueue import enqueue
from durq.cli.functions import functions
from durq.cli.job_show import dlq
from durq.cli.jobs import job
from durq.cli.limits import limits
from durq.cli.local import demo, server
from durq.cli.schedules import schedules
from durq.cli.worker import worker
from durq.cli.workflow import workflow

__all__ = ["main"]


class _Group(click.Group):
    """A group whose list of commands shows each one's first sentence whole, wrapped
    if need be (click cuts it to the terminal's width with "...")."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="durq")
def main() -> None:
    """durq: a reliable, fast task queue on Redis.

    \b
    Start here:
      durq demo                          watch durq survive failures (no setup needed)
      durq server --dir ./data           a local Redis with persistence, for development
      durq worker myapp.tasks:app        run the tasks of an App
      durq stats                         queues at a glance
      durq dashboard                     the web dashboard, on http://127.0.0.1:8080
    """


for command in (
    worker, stats, limits, workers, job, workflow, dlq, schedules, enqueue, doctor, dashboard,
    functions, deploy, server, demo, signal,
):  # fmt: skip
    main.add_command(command)
