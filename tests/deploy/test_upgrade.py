"""Upgrading durq with jobs in flight: the previous release (``RELEASES``), installed from
this repository's history, enqueues jobs of every kind and half-drains them under worker
kills; workers of this tree and of the previous release then run side by side, then
this tree's alone, and every job is counted: plain, delayed, grouped (group limit 1),
prioritized, keyed, expiring, retried and dead-lettered jobs (replayed by this tree), a
rate limit, a periodic schedule (no tick fires twice). Workflows of the previous release
are read and cancelled, not run (docs/workflows.md, "Upgrading")."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durq
from deploy.fleet import Fleet, done_seqs, env_for, read_ledger, wait_for
from deploy.releases import Release, previous_release, release_python
from helpers import start_server

pytestmark = [pytest.mark.slow, pytest.mark.fault]

TARGET = "deploy.upgrade_app:app"


@pytest.fixture(scope="session")
def release() -> Release:
    return previous_release()


@pytest.fixture(scope="session")
def old_python(release: Release) -> Path:
    return release_python(release)


@pytest.fixture
def server() -> Iterator[Any]:
    server = start_server("valkey")
    try:
        yield server
    finally:
        server.close()


def _write(python: Path | str, env: dict[str, str], out: Path, base: int = 0) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), "-m", "deploy.upgrade_writer", str(out), str(base)],
        env=env_for(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_a_queue_written_and_half_drained_by_the_previous_release_is_finished_by_this_one(
    tmp_path: Path, server: Any, release: Release, old_python: Path
) -> None:
    prefix = f"up{secrets.token_hex(3)}"
    ledger = tmp_path / "ledger"
    env = {
        "DURQ_UP_URL": server.url,
        "DURQ_UP_PREFIX": prefix,
        "DURQ_UP_LEDGER": str(ledger),
        "DURQ_UP_OLD_VERSION": release.version,
    }
    expected = _write(old_python, env, tmp_path / "expected.json")
    assert expected["version"] == release.version
    seqs = set(expected["seqs"])
    queues = [f"{prefix}-a", f"{prefix}-b"]
    fleet = Fleet(tmp_path, env)
    try:

        def progress() -> float:
            return len(set(done_seqs(ledger)) & seqs) / len(seqs)

        # the previous release half-drains, under kills
        old = [fleet.spawn(old_python, TARGET, queues, label=f"old{i}") for i in range(2)]
        wait_for("30% done", lambda: progress() >= 0.3, 60, fleet)
        old[0].kill()
        old.append(fleet.spawn(old_python, TARGET, queues, label="old2"))
        wait_for("50% done", lambda: progress() >= 0.5, 60, fleet)
        for proc in old:
            proc.kill()
        # both at once
        new = [fleet.spawn(sys.executable, TARGET, queues, label="new0")]
        mixed = fleet.spawn(old_python, TARGET, queues, label="old3")
        wait_for("75% done", lambda: progress() >= 0.75, 60, fleet)
        mixed.kill()
        new.append(fleet.spawn(sys.executable, TARGET, queues, label="new1"))
        doomed = set(expected["doomed"])
        wait_for("every job but the doomed done", lambda: seqs - doomed <= set(done_seqs(ledger)),
                 90, fleet)  # fmt: skip
        # the dead letters the previous release wrote are read and replayed by this tree
        qa = durq.Queue(queues[0], url=server.url)
        dead = qa.dead_letters(limit=100)
        ran = set(done_seqs(ledger))
        assert dead and len(dead) == len(doomed - ran), dead
        qa.replay([d.id for d in dead])
        wait_for("the doomed jobs replayed", lambda: seqs <= set(done_seqs(ledger)), 60, fleet)
        # workflows the previous release submitted do not progress under this tree
        # (docs/workflows.md, "Upgrading"): this tree reads them, and cancels them
        for wf in expected["workflows"]:
            queue = durq.Queue(wf["queue"], url=server.url)
            info = queue.workflow(wf["id"])
            assert info is not None and info.state == "running", wf
            status, state = queue.cancel_workflow(wf["id"])
            assert (status, state) == (durq.CancelStatus.CANCELLED, "cancelled"), wf
            info = queue.workflow(wf["id"])
            assert info is not None and info.state == "cancelled", wf
        ticks = [line.id for line in read_ledger(ledger) if line.kind == "TICK"]
        assert len(ticks) == len(set(ticks)), "a tick fired twice"
        assert any(line.version == durq.__version__ for line in read_ledger(ledger)
                   if line.kind == "TICK")  # fmt: skip
    finally:
        fleet.close()
