"""``durq worker``: run the tasks of an App."""

from __future__ import annotations

import logging
import os
import sys

import click

from durq.app.app import App
from durq.cli.common import load_app, url_option
from durq.context import JobLogContext
from durq.errors import InvalidArgument
from durq.logs import configure_logging, route_task_logs
from durq.metrics import WorkerMetrics, serve_metrics
from durq.worker import Worker, WorkerConfig
from durq.worker.handoff import run_worker
from durq.worker.pool import DEFAULT_KILL_GRACE, PoolBroken, ProcessPoolConfig
from durq.worker.startup import prepare_processes
from durq.worker.supervisor import SLOT_ENV, Supervisor

__all__ = ["worker"]

log = logging.getLogger("durq.worker")


def _run(worker: Worker) -> None:
    try:
        import uvloop  # optional: a faster event loop where installed
    except ImportError:
        uvloop = None
    # outside the try: an error of the worker must not come chained to the missing
    # uvloop, and an ImportError it raises must not start the (already awaited)
    # coroutine again on another loop
    try:
        if uvloop is None:
            # the loop whose thread short sync tasks may borrow without stalling it; the
            # worker's signals come through it
            worker.handle_signals = False
            run_worker(worker.run(), worker.on_signal)
        else:  # sync tasks all run in threads
            uvloop.run(worker.run())
    except PoolBroken as exc:  # logged: exit so that a supervisor starts a new worker
        raise SystemExit(1) from exc


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
    help="Jobs running at once per process (coroutines, threads for sync tasks, or "
    "child processes with --pool process) [default: 100 when every task is async def, "
    "the CPUs with --pool process, else 20].",
)
@click.option(
    "--pool",
    type=click.Choice(["thread", "process"]),
    default="thread",
    show_default=True,
    help="Where sync tasks run: threads, or child processes forked from a template, with "
    "hard time limits (a task's timeout kills its child) and recycling. A task's own "
    "pool= wins; async tasks always run in the event loop.",
)
@click.option(
    "--kill-grace",
    type=float,
    default=DEFAULT_KILL_GRACE,
    show_default=True,
    help="Process pool: seconds between a task's timeout (durq.TimeLimitExceeded raised "
    "in it) and SIGKILL of its child.",
)
@click.option(
    "--max-jobs-per-child",
    type=click.IntRange(min=1),
    default=None,
    help="Process pool: replace a child after this many jobs (up to 10% fewer, drawn per child).",
)
@click.option(
    "--max-memory-per-child",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="MB",
    help="Process pool: replace a child whose resident memory after a job is above this.",
)
@click.option(
    "--max-child-age",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Process pool: replace a child older than this, between jobs.",
)
@click.option(
    "--memory-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="MB",
    help="Stop fetching while the worker's resident memory (its children's included) is "
    "above this; fetch again under 90% of it.",
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
    help="Seconds between heartbeats: the registry's (what `durq workers` shows) and "
    "a look at each queue for work no wake-up announces (a dead worker's leases, "
    "schedule refills, held jobs); an idle worker sends nothing else, and beats once "
    "per 10 minutes while it has nothing in hand.",
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
    pool: str,
    kill_grace: float,
    max_jobs_per_child: int | None,
    max_memory_per_child: float | None,
    max_child_age: float | None,
    memory_limit: float | None,
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
    handler = configure_logging(log_level, log_format, context=JobLogContext())
    # checked before any child starts: a mistake is one error, not children failing forever
    app = load_app(target)
    # after the import: an app that configures logging itself keeps its own set-up
    route_task_logs(handler, log_level)
    if url:
        app.url = url

    def make_config(slot: int) -> WorkerConfig:
        return WorkerConfig(
            queues=queues,
            concurrency=concurrency,
            prefetch=prefetch,
            lease=lease,
            grace=grace,
            burst=burst,
            heartbeat=heartbeat,
            pool=pool,  # type: ignore[arg-type]  # click.Choice checked it
            process_pool=ProcessPoolConfig(
                kill_grace=kill_grace,
                max_jobs_per_child=max_jobs_per_child,
                max_memory_per_child=max_memory_per_child,
                max_child_age=max_child_age,
            ),
            memory_limit=memory_limit,
            # the supervisor numbers its children, so that each gets a port of its own
            health_port=None if health_port is None else health_port + slot,
            health_host=health_host,
            target_latency=target_latency,
        )

    try:
        config = make_config(_slot())
    except InvalidArgument as exc:
        raise click.UsageError(str(exc)) from None
    if SLOT_ENV not in os.environ:  # once, not again in each child of -p N
        _warn_unused_queues(app, queues)
    if processes > 1:
        # each worker process is forked from this one, which has imported the app (and
        # started no thread nor loop yet): no new interpreter, no second import

        def child(slot: int) -> int:
            try:
                _serve(app, make_config(slot), metrics_port, metrics_host, slot)
            except click.ClickException as exc:
                exc.show()
                return exc.exit_code
            return 0

        prepare_processes()
        sys.exit(Supervisor(child, processes, burst=burst).run())
    _serve(app, config, metrics_port, metrics_host, _slot())


def _serve(
    app: App, config: WorkerConfig, metrics_port: int | None, metrics_host: str, slot: int
) -> None:
    """Run one worker process until it stops."""
    metrics = WorkerMetrics()
    try:
        # made before the metrics endpoint's thread: a process pool's template is
        # forked from a process without threads
        runner = Worker(app, config, metrics=metrics)
    except InvalidArgument as exc:
        raise click.UsageError(str(exc)) from None
    if metrics_port is not None:
        # the supervisor numbers its children, so that each gets a port of its own
        serve_metrics(metrics, metrics_port + slot, metrics_host)
    _run(runner)


def _warn_unused_queues(app: App, queues: tuple[str, ...]) -> None:
    """Say so when ``-q`` names a queue that none of the app's tasks, schedules or
    topic subscriptions uses (a typo consumes nothing, silently, otherwise)."""
    used = set(app.queues) | {s.queue for s in app.schedules.declared.values()}
    for name in queues:
        if name in used or any(t.subscription_of(name) for t in app.topics.values()):
            continue
        log.warning(
            "queue %s: no task, schedule or topic of the app uses it; the worker consumes "
            "it anyway (jobs sent there with .options(queue=...) run). The app's queues: %s",
            name,
            ", ".join(sorted(used)) or "-",
        )


def _slot() -> int:
    """This process's number among the supervisor's children (0 without one)."""
    return int(os.environ.get(SLOT_ENV, "0"))
