"""``python manage.py durq_worker``: run the Django tasks of a durq backend.

The options are those of ``durq worker``; the App is the backend's, and the queues
default to the backend's ``QUEUES``.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from durq.contrib.django import runner
from durq.contrib.django.backend import DurqBackend
from durq.contrib.django.compat import task_backends
from durq.contrib.django.known import import_task_modules
from durq.errors import DurqError
from durq.logs import configure_logging
from durq.metrics import WorkerMetrics, serve_metrics
from durq.worker import Worker, WorkerConfig
from durq.worker.handoff import run_worker
from durq.worker.startup import prepare_processes
from durq.worker.supervisor import SLOT_ENV, Supervisor

__all__ = ["Command"]


class Command(BaseCommand):
    """Runs Django tasks from durq's queues until SIGTERM or Ctrl-C (which drain)."""

    help = (
        "Run the Django tasks of a durq task backend. SIGTERM or Ctrl-C drains: no more "
        "fetching, running tasks get --grace seconds, the rest go back to the queue."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        add = parser.add_argument
        add("--backend", default="default", help="TASKS alias of the durq backend.")
        add("-q", "--queue", dest="queues", action="append", default=[],
            help="Queue to consume (repeatable). Default: the backend's QUEUES.")  # fmt: skip
        add("-c", "--concurrency", type=int, default=20,
            help="Tasks running at once per process, each in a thread (default 20).")  # fmt: skip
        add("-p", "--processes", type=int, default=1,
            help="Worker processes, kept running by a supervisor (default 1).")  # fmt: skip
        add("--url", default=None, help="Redis URL (default: the backend's url option).")
        add("--lease", type=float, default=None, help="Lease in seconds (default 30).")
        add("--grace", type=float, default=25.0,
            help="Seconds running tasks get to finish on SIGTERM/SIGINT (default 25).")  # fmt: skip
        add("--prefetch", type=int, default=0, help="Jobs held beyond the concurrency.")
        add("--burst", action="store_true", help="Exit once the queues are drained.")
        add("--heartbeat", type=float, default=5.0, help="Seconds between heartbeats.")
        add("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
        add("--log-format", default="text", choices=["text", "json"])
        add("--metrics-port", type=int, default=None,
            help="Serve Prometheus metrics on this port (process i of -p N: PORT+i).")  # fmt: skip
        add("--metrics-host", default="127.0.0.1",
            help="Address of the metrics endpoint (default 127.0.0.1: no auth).")  # fmt: skip
        add("--health-port", type=int, default=None,
            help="Serve /livez, /readyz, /scale.json and /metrics on this port (process i "
                 "of -p N: PORT+i; docs/deployment.md, Kubernetes).")  # fmt: skip
        add("--health-host", default="127.0.0.1",
            help="Address of the health endpoint (default 127.0.0.1: no auth).")  # fmt: skip
        add("--target-latency", type=float, default=10.0,
            help="Seconds within which ready jobs should start (/scale.json).")  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        configure_logging(options["log_level"], options["log_format"])
        backend = task_backends[options["backend"]]
        if not isinstance(backend, DurqBackend):
            raise CommandError(f"TASKS[{options['backend']!r}] is not a durq backend")
        queues = options["queues"] or sorted(backend.queues)
        if not queues:
            raise CommandError("the backend's QUEUES is empty: name queues with -q")
        app = backend.durq_app
        # the project's task modules, now: a broken one fails here, not in every job
        import_task_modules(runner.task_modules(backend))
        if options["url"]:
            app.url = options["url"]

        def make_config(slot: int) -> WorkerConfig:
            # the id Django's TaskResult.worker_ids shows: one per process
            name = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
            return WorkerConfig(
                queues=queues,
                concurrency=options["concurrency"],
                prefetch=options["prefetch"],
                lease=options["lease"],
                grace=options["grace"],
                burst=options["burst"],
                heartbeat=options["heartbeat"],
                name=name,
                health_port=(
                    None if options["health_port"] is None else options["health_port"] + slot
                ),
                health_host=options["health_host"],
                target_latency=options["target_latency"],
            )

        slot = int(os.environ.get(SLOT_ENV, "0"))
        try:
            config = make_config(slot)
        except DurqError as exc:
            raise CommandError(str(exc)) from None
        if options["processes"] > 1:
            # each worker process is forked from this one, which has set Django up and
            # imported the task modules: no new interpreter, no second set-up. A
            # database connection opened so far would be shared by the processes:
            # closed first (each opens its own on first use)
            from django.db import connections

            connections.close_all()
            prepare_processes()

            def child(slot: int) -> int:
                _serve(app, make_config(slot), options, slot)
                return 0

            sys.exit(Supervisor(child, options["processes"], burst=options["burst"]).run())
        _serve(app, config, options, slot)


def _serve(app: Any, config: WorkerConfig, options: dict[str, Any], slot: int) -> None:
    """Run one worker process until it stops."""
    if config.name is not None:  # always, made by make_config
        runner.worker_id = config.name  # the id Django's TaskResult.worker_ids shows
    metrics = WorkerMetrics()
    if options["metrics_port"] is not None:
        serve_metrics(metrics, options["metrics_port"] + slot, options["metrics_host"])
    # as `durq worker` runs it: short sync tasks may borrow the loop's thread
    worker = Worker(app, config, metrics=metrics, handle_signals=False)
    run_worker(worker.run(), worker.on_signal)
