"""``durq worker``: run the tasks of an App."""

from __future__ import annotations

import os
import sys

import click

from durq.cli.common import load_app, url_option
from durq.errors import InvalidArgument
from durq.logs import configure_logging
from durq.metrics import WorkerMetrics, serve_metrics
from durq.worker import Worker, WorkerConfig
from durq.worker.handoff import run_worker
from durq.worker.supervisor import SLOT_ENV, Supervisor

__all__ = ["worker"]


def _run(worker: Worker) -> None:
    try:
        import uvloop  # optional: a faster event loop where installed
    except ImportError:
        # the loop whose thread short sync tasks may borrow without stalling it; the
        # worker's signals come through it
        worker.handle_signals = False
        run_worker(worker.run(), worker.on_signal)
        return
    # outside the try: an ImportError raised by the worker itself must not start the
    # (already awaited) coroutine again on another loop; sync tasks all run in threads
    uvloop.run(worker.run())


@click.command()
@click.argument("target", metavar="MODULE:APP")
@click.option(
    "-q",
    "--queue",
    "queues",
    multiple=True,
    help="Queue to consume (repeatable). Default: the queues of the app's tasks.",
)
@click.option(
    "-c",
    "--concurrency",
    type=int,
    default=None,
    help="Jobs running at once per process (coroutines, or threads for sync tasks) "
    "[default: 100 when every task is async def, else 20].",
)
@click.option(
    "-p",
    "--processes",
    default=1,
    show_default=True,
    help="Worker processes, kept running by a supervisor.",
)
@url_option
@click.option(
    "--lease",
    type=float,
    default=None,
    help="Lease in seconds [default: the app's, 30]; a dead worker's jobs come "
    "back within about one lease.",
)
@click.option(
    "--grace",
    type=float,
    default=25.0,
    show_default=True,
    help="Seconds running jobs get to finish on SIGTERM/SIGINT.",
)
@click.option(
    "--prefetch",
    default=0,
    show_default=True,
    help="Jobs held beyond the concurrency, started as slots free up.",
)
@click.option("--burst", is_flag=True, help="Exit once the queues are drained.")
@click.option(
    "--heartbeat",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between registry heartbeats (what `durq workers` shows).",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option(
    "--log-format", default="text", show_default=True, type=click.Choice(["text", "json"])
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve Prometheus metrics on this port (with -p N, process i uses PORT+i).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics endpoint listens on. It has no authentication: open it "
    "(0.0.0.0) only where the network is trusted.",
)
@click.option(
    "--health-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve /livez, /readyz, /scale.json (KEDA metrics-api) and /metrics on this "
    "port (with -p N, process i uses PORT+i).",
)
@click.option(
    "--health-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the health endpoint listens on (no authentication, like --metrics-host).",
)
@click.option(
    "--target-latency",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds within which ready jobs should start: the worker count /scale.json suggests.",
)
def worker(
    target: str,
    queues: tuple[str, ...],
    concurrency: int | None,
    processes: int,
    url: str | None,
    lease: float | None,
    grace: float,
    prefetch: int,
    burst: bool,
    heartbeat: float,
    log_level: str,
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
    health_port: int | None,
    health_host: str,
    target_latency: float,
) -> None:
    """Run the tasks of the App at MODULE:APP (e.g. myapp.tasks:app).

    \b
    SIGTERM or Ctrl-C drains: no more fetching, running jobs get --grace seconds,
    unstarted and unfinished jobs are given back. A second signal stops at once.
    Nothing is lost either way: unacknowledged jobs return after their lease.
    """
    configure_logging(log_level, log_format)
    # checked before any child starts: a mistake is one error, not children failing forever
    app = load_app(target)
    if url:
        app.url = url
    try:
        config = WorkerConfig(
            queues=queues,
            concurrency=concurrency,
            prefetch=prefetch,
            lease=lease,
            grace=grace,
            burst=burst,
            heartbeat=heartbeat,
            # the supervisor numbers its children, so that each gets a port of its own
            health_port=None if health_port is None else health_port + _slot(),
            health_host=health_host,
            target_latency=target_latency,
        )
    except InvalidArgument as exc:
        raise click.UsageError(str(exc)) from None
    if processes > 1:
        argv = [sys.executable, "-m", "durq", *_child_args(sys.argv[1:])]
        sys.exit(Supervisor(argv, processes, burst=burst).run())
    metrics = WorkerMetrics()
    if metrics_port is not None:
        serve_metrics(metrics, metrics_port + _slot(), metrics_host)
    _run(Worker(app, config, metrics=metrics))


def _slot() -> int:
    """This process's number among the supervisor's children (0 without one)."""
    return int(os.environ.get(SLOT_ENV, "0"))


def _child_args(args: list[str]) -> list[str]:
    """The same command line with one process per child."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("-p", "--processes"):
            skip = i + 1 < len(args)
            continue
        if arg.startswith("--processes=") or (arg.startswith("-p") and arg[2:].isdigit()):
            continue
        out.append(arg)
    return out
