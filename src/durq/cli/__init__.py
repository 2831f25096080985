"""The ``durq`` command line: run workers and a local server, inspect and repair queues.

Every command takes ``--url`` (default ``$DURQ_URL``, then ``redis://localhost:6379/0``).
"""

from __future__ import annotations

import click

from durq._version import __version__
from durq.cli.admin import dlq, enqueue, job, stats, workers
from durq.cli.local import demo, server
from durq.cli.worker import worker

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="durq")
def main() -> None:
    """durq: a reliable, fast task queue on Redis.

    \b
    Start here:
      durq demo                          watch durq survive failures (no setup needed)
      durq server --dir ./data           a local Redis with persistence, for development
      durq worker myapp.tasks:app        run the tasks of an App
      durq stats                         queues at a glance
    """


for command in (worker, stats, workers, job, dlq, enqueue, server, demo):
    main.add_command(command)
