"""The ``durq`` command line: run workers and a local server, inspect and repair queues.

Every command takes ``--url`` (default ``$DURQ_URL``, then ``redis://localhost:6379/0``).

Each command's module is imported when that command runs (or its own help is asked
for): ``durq --help`` lists them from the table below without importing one, and
``durq stats`` does not import the worker, the dashboard or the demo.
"""

from __future__ import annotations

import importlib

import click

from durq._version import __version__

__all__ = ["COMMANDS", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (module of durq.cli, the first sentence of its help; tests/cli/test_help.py
    # checks each against the command's own)
    "worker": ("worker", "Run the tasks of the App at MODULE:APP (e.g. myapp.tasks:app)."),
    "stats": ("admin", "Show the queues: sizes, totals and throughput."),
    "limits": ("limits", "Show or change flow control: rate limits and max_active."),
    "workers": (
        "admin",
        "List the live workers (with the durq version each runs) and the jobs in their hands.",
    ),
    "job": ("jobs", "Show one job, or cancel jobs."),
    "workflow": ("workflow", "Inspect and cancel workflows (durq.chain, durq.group)."),
    "dlq": ("job_show", "Dead letters: list, show, replay, purge."),
    "schedules": (
        "schedules",
        "List and control periodic jobs (pause, resume, remove, trigger).",
    ),
    "enqueue": ("enqueue", "Enqueue a call of a task by name, with JSON arguments."),
    "doctor": (
        "admin",
        "Check the server's settings and the queues' keys for what can lose jobs.",
    ),
    "dashboard": (
        "dashboard",
        "Serve the web dashboard: queues, groups, workers, jobs, dead letters (replay and "
        "purge), and Prometheus metrics at /metrics.",
    ),
    "functions": ("functions", "Load, list and prune durq's Redis Functions libraries."),
    "deploy": ("deploy", "Check a deploy before it rolls out."),
    "server": ("local", "Run a local Redis-compatible server with persistence."),
    "demo": ("local", "Watch durq recover from failures, live (nothing to set up)."),
    "signal": ("durable", "Send a signal to the jobs waiting for it (durq.wait_for)."),
}


class _Group(click.Group):
    """The commands, each imported on first use; the list of commands shows each one's
    first sentence whole, wrapped if need be (click cuts it to the terminal's width with
    "...")."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        # with any command added to the group itself (main.add_command)
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in COMMANDS:
            module = importlib.import_module(f"durq.cli.{COMMANDS[cmd_name][0]}")
            command = getattr(module, cmd_name)
            self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (name, COMMANDS[name][1] if name in COMMANDS else self._short_help(ctx, name))
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _short_help(self, ctx: click.Context, name: str) -> str:
        command = self.get_command(ctx, name)
        return "" if command is None else command.get_short_help_str(limit=1000)


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
