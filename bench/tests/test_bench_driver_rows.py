"""The driver's side of the feature rows (bench/driver_rows.py) and the DBOS peer's
PostgreSQL (bench/postgres.py): the startup variants a peer gets without declaring
any, what counts as a worker's own commands, and the cluster's stated settings."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from bench_modules import load_bench_module


@pytest.fixture(scope="module")
def rows() -> ModuleType:
    return load_bench_module("driver_rows.py", "bench_driver_rows")


@pytest.fixture(scope="module")
def postgres() -> ModuleType:
    return load_bench_module("postgres.py", "bench_postgres")


def peer_module(work_mode: str, procs: int) -> Any:
    specs = {"default": {"procs": 1}, work_mode: {"procs": procs}}
    return SimpleNamespace(WORK={"io_redis": work_mode}, worker_specs=lambda: specs)


def test_a_peer_starts_its_default_worker_and_its_multi_process_one(rows: Any) -> None:
    got = rows.default_startup(peer_module("process-4", 4))
    assert [(v["label"], v["mode"], v["kind"]) for v in got] == [
        ("default", "default", "io_redis"),
        ("4 processes (its io_redis configuration)", "process-4", "io_redis"),
    ]
    assert len(rows.default_startup(peer_module("c100", 1))) == 1  # one process: no second
    assert rows.default_startup(SimpleNamespace()) == []  # a feature row's anchor


def test_only_commands_a_client_sends_count_as_a_workers_own(rows: Any) -> None:
    before = {"cmdstat_evalsha": {"calls": 10, "usec": 100}, "cmdstat_incrby": {"calls": 5}}
    after = {
        "cmdstat_evalsha": {"calls": 40, "usec": 700},
        "cmdstat_incrby": {"calls": 35, "usec": 30},  # the jobs' own work
        "cmdstat_hset": {"calls": 90, "usec": 200},  # inside the scripts
        "cmdstat_bzpopmin": {"calls": 3, "usec": 9},
        "cmdstat_get": {"calls": 0, "usec": 0},
    }
    delta = rows.commandstats_delta(before, after)
    assert delta["evalsha"] == {"calls": 30, "usec": 600}
    assert "get" not in delta  # nothing happened
    assert rows.client_cost(delta) == {"calls": 33, "usec": 609}


def test_the_cluster_runs_without_durability_on_loopback(postgres: Any) -> None:
    argv = postgres.server_argv(Path("/d"), 5499, Path("/s"))
    settings = dict(a.split("=", 1) for a in argv[argv.index("-D") + 2 :] if "=" in a)
    assert settings["listen_addresses"] == "127.0.0.1" and settings["port"] == "5499"
    for off in ("fsync", "synchronous_commit", "full_page_writes"):
        assert settings[off] == "off" and off in postgres.SETTINGS_TEXT
    assert settings["shared_preload_libraries"] == "pg_stat_statements"


def test_a_workers_tree_includes_children_in_sessions_of_their_own() -> None:
    """What the driver kills when it stops a worker: `durq worker -p N` starts each
    child in a session of its own, which killing the worker's group would not reach."""
    common = load_bench_module("common.py", "bench_common_tree")
    spawn = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], "
        "start_new_session=True); time.sleep(30)"
    )
    parent = subprocess.Popen([sys.executable, "-c", spawn])
    try:
        for _ in range(100):
            tree = common.descendants([parent.pid])
            if tree:
                break
            time.sleep(0.05)
        assert len(tree) == 1
        (child,) = tree
        assert os.getsid(child) == child != os.getsid(parent.pid)
    finally:
        for pid in [parent.pid, *tree]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        parent.wait(5)
