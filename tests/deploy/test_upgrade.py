"""Upgrading durq with jobs in flight: the previous release (``RELEASES``), installed from
this repository's history, enqueues jobs of every kind and half-drains them under worker
kills; workers of this tree and of the previous release then run side by side, then
this tree's alone, and every job is counted: plain, delayed, grouped (group limit 1),
prioritized, keyed, expiring, retried and dead-lettered jobs (replayed by this tree), a
rate limit, a periodic schedule (no tick fires twice), and workflows (chains across the
two queues' slots, groups with a callback) that the previous release submitted and
began, run on by both fleets in the previous release's layout (lua/lib/workflows/legacy.lua):
every step runs, and each result counts once. Jobs held by a worker of this tree while
a worker of the previous release runs stay readable by the previous release (a delayed
job to it: docs/decisions/held-records.md): its producer deduplicates against them by
key, and they run once when a capable worker brings them back."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durq
from deploy.fleet import Fleet, done_seqs, env_for, read_ledger, wait_for
from deploy.releases import Release, previous_release, release_python
from durq.app.workflows import WorkflowHandle
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


def _writer(python: Path | str, env: dict[str, str], out: Path, *args: str) -> dict[str, Any]:
    """Run ``deploy.upgrade_writer`` with ``args`` under ``python``; what it wrote to
    ``out``."""
    done = subprocess.run(
        [str(python), "-m", "deploy.upgrade_writer", *args],
        env=env_for(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _write(python: Path | str, env: dict[str, str], out: Path, base: int = 0) -> dict[str, Any]:
    return _writer(python, env, out, str(out), str(base))


def _poke(python: Path, env: dict[str, str], tmp_path: Path, expected: Path) -> dict[str, Any]:
    """What ``python``'s durq makes of the held jobs (deploy.upgrade_writer --poke)."""
    out = tmp_path / "poked.json"
    return _writer(python, env, out, "--poke", str(expected), str(out))


def _workflows_running(url: str, workflows: list[dict[str, Any]]) -> int:
    """How many of ``workflows`` still run."""
    running = 0
    for wf in workflows:
        info = durq.Queue(wf["queue"], url=url).workflow(wf["id"])
        running += info is not None and info.state == "running"
    return running


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
    qc = durq.Queue(f"{prefix}-c", url=server.url)
    held = {h["seq"] for h in expected["held"]}
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
        # the previous release began its workflows; chains wait behind the plain jobs
        assert _workflows_running(server.url, expected["workflows"])
        # both at once
        new = [fleet.spawn(sys.executable, TARGET, queues, label="new0")]
        # a worker of this tree without `later` holds its jobs; one of the previous
        # release runs beside it (on their queue too), and its producer meets them
        lacking = fleet.spawn(sys.executable, TARGET, [qc.name], label="new-lacking",
                              env={"DURQ_UP_WITHOUT_LATER": "1"})  # fmt: skip
        wait_for("the jobs of `later` held", lambda: qc.stats().held == len(held), 60, fleet)
        mixed = fleet.spawn(old_python, TARGET, [*queues, qc.name], label="old3")
        poked = _poke(old_python, env, tmp_path, tmp_path / "expected.json")
        assert poked["states"] == ["delayed"] * len(held), poked
        assert poked["cancel"] == "cancelled", poked
        first = expected["held"][0]["seq"]
        wait_for("75% done", lambda: progress() >= 0.75, 60, fleet)
        assert not done_seqs(ledger).keys() & held  # nothing took them from the holding area
        mixed.kill()
        lacking.kill()
        new.append(fleet.spawn(sys.executable, TARGET, [*queues, qc.name], label="new1"))
        wait_for("the held jobs run", lambda: held - {first} <= set(done_seqs(ledger)), 60, fleet)
        wait_for("the holding area empty", lambda: qc.stats().held == 0, 30, fleet)
        counts = done_seqs(ledger)
        assert all(counts[s] == 1 for s in held - {first}) and first not in counts, counts
        assert not qc.dead_letters(limit=10)
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
        # workflows the previous release submitted run to their end: each result is
        # the one expected (every fan-in counted once), every step ran
        reader = durq.App(server.url)
        try:
            for wf in expected["workflows"]:
                handle = WorkflowHandle(reader, wf["queue"], wf["id"])
                assert handle.result(timeout=60) == wf["result"], wf
        finally:
            reader.close()
        steps: dict[str, set[str]] = defaultdict(set)
        versions = set()
        for line in read_ledger(ledger):
            if line.kind == "STEP":
                steps[line.id.rsplit(".", 1)[0]].add(line.id)
                versions.add(line.version)
        for wf in expected["workflows"]:
            assert len(steps[wf["id"]]) == wf["nodes"], (wf, steps[wf["id"]])
        assert versions == {release.version, durq.__version__}, versions
        ticks = [line.id for line in read_ledger(ledger) if line.kind == "TICK"]
        assert len(ticks) == len(set(ticks)), "a tick fired twice"
        assert any(line.version == durq.__version__ for line in read_ledger(ledger)
                   if line.kind == "TICK")  # fmt: skip
    finally:
        fleet.close()


def _old_live(space: durq.Namespace) -> int:
    """How many live workers of the registry have no format (durq 0.1.0)."""
    return sum("format" not in beat for beat in space.live_workers().values())


def _steps_ran(ledger: Path) -> tuple[set[str], set[str]]:
    """The distinct ids of the steps that ran, and the versions that ran them."""
    lines = [line for line in read_ledger(ledger) if line.kind == "STEP"]
    return {line.id for line in lines}, {line.version for line in lines}


def _steps_of(workflow_id: str, ran: set[str]) -> set[str]:
    return {step for step in ran if step.startswith(workflow_id + ".")}


def test_workflows_this_tree_submits_beside_workers_of_the_previous_release_run_on_both(
    tmp_path: Path, server: Any, release: Release, old_python: Path
) -> None:
    """Expand/contract (durq.app.fleet): while a worker of the previous release consumes
    their queues, this tree's producer submits workflows in that release's layout, and
    both versions' workers run their steps under SIGKILLs (every step runs, each result
    counts once); a workflow that layout cannot hold is refused (durq.FleetTooOld), and
    once no old worker is live, submissions take this tree's layout."""
    prefix = f"uf{secrets.token_hex(3)}"
    ledger = tmp_path / "ledger"
    env = {"DURQ_UP_URL": server.url, "DURQ_UP_PREFIX": prefix, "DURQ_UP_LEDGER": str(ledger)}
    queues = [f"{prefix}-a", f"{prefix}-b"]
    fleet = Fleet(tmp_path, env)
    space = durq.Namespace(url=server.url)
    try:
        old = fleet.spawn(old_python, TARGET, queues, label="old0")
        new = fleet.spawn(sys.executable, TARGET, queues, label="new0")
        fleet.wait_ready(new)
        wait_for("the old worker's heartbeat", lambda: _old_live(space) == 1, 30, fleet)
        out = tmp_path / "mixed.json"
        mixed = _writer(sys.executable, env, out, "--workflows", str(out), "0")
        assert all(wf["run"] == "" for wf in mixed["workflows"]), mixed  # 0.1.0's layout
        assert "workers of durq 0.1.0" in mixed["refused"], mixed["refused"]
        assert "expires" in mixed["refused"], mixed["refused"]
        # kills on both sides once steps run; replacements of both versions
        wait_for("steps run", lambda: len(_steps_ran(ledger)[0]) >= 3, 60, fleet)
        old.kill()
        new.kill()
        fleet.spawn(old_python, TARGET, queues, label="old1")
        fleet.spawn(sys.executable, TARGET, queues, label="new1")
        reader = durq.App(server.url)
        try:
            for wf in mixed["workflows"]:
                handle = WorkflowHandle(reader, wf["queue"], wf["id"])
                assert handle.result(timeout=60) == wf["result"], wf
            ran, versions = _steps_ran(ledger)
            for wf in mixed["workflows"]:
                assert len(_steps_of(wf["id"], ran)) == wf["nodes"], (wf, ran)
            assert versions == {release.version, durq.__version__}, versions
            # the old workers stop (a clean stop unregisters): this tree's layout again
            for proc in fleet.procs:
                if proc.label.startswith("old"):
                    proc.term()
            wait_for("no old worker", lambda: _old_live(space) == 0, 30, fleet)
            out = tmp_path / "new.json"
            later = _writer(sys.executable, env, out, "--workflows", str(out), "1000")
            assert all(wf["run"] for wf in later["workflows"]), later
            assert later["refused"].startswith("submitted, run"), later["refused"]
            for wf in later["workflows"]:
                handle = WorkflowHandle(reader, wf["queue"], wf["id"])
                assert handle.result(timeout=60) == wf["result"], wf
        finally:
            reader.close()
    finally:
        space.close()
        fleet.close()
