"""The fault-injection harness: worker processes to kill, producers that keep a ledger,
and the checker that classifies every job at the end.

The ledger is one file per test, appended to by the producers (``faults.producer``) and
by the tasks (``faults.app``), one ``os.write`` per line on an ``O_APPEND`` descriptor::

    ENQ_OK seq id status time producer delay       the enqueue call returned
    ENQ_UNKNOWN seq - - time producer delay error  it raised a connection error: unknown
    ENQ_FAIL seq - - time producer delay error     it was refused
    START seq id attempt deliveries pid token time enqueued_at   a run began
    DONE  seq id attempt deliveries pid token time enqueued_at   a run finished

``token`` is the lease token ``<deliveries>.<dequeued_at ms, server clock>``.

``check`` reads the ledger and the queue once the queue is drained and returns a Report:

- **completed**: the queue accepted one completion (a stored result, written by the
  release it accepted), and the job ran once;
- **duplicated**: completed, but the task ran to DONE two or more times (at-least-once);
- **dead**: in the dead letters, with the reason;
- **lost**: enqueue returned (ENQ_OK), but the job neither completed nor is dead.

and the fencing checks: the completion accepted for each job is the one of its latest
delivery (a holder whose lease was taken over cannot complete it: ``zombie_accepted``),
``completed`` in the queue's counters equals the distinct jobs completed, no seq was
enqueued as two jobs, nothing is left pending, delayed, active or stuck (read from the
keys, not only from the counters). ``Fleet.fencing_alarms`` checks that each refusal a
worker logged as a lost lease was one (the job was handed out again).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

import durq
from faults.app import LEDGER_ENV, QUEUE_ENV
from faults.producer import LedgerFile, Seconds, produce
from helpers import eventually, in_ci

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = TESTS_DIR.parent
APP_TARGET = "faults.app:app"
FAKETIME_LIBS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)


def faketime_library() -> str:
    """The libfaketime preload library; skip the test without it (fail under CI)."""
    for path in FAKETIME_LIBS:
        if os.path.exists(path):
            return path
    reason = "libfaketime is not installed (Debian package `faketime`): clock-skew case skipped"
    if in_ci():
        pytest.fail(f"{reason} (failing instead of skipping because CI is set)", pytrace=False)
    pytest.skip(reason)


def skewed(offset: int) -> dict[str, str]:
    """The environment of a process whose clocks run ``offset`` seconds off (every
    clock, CLOCK_REALTIME and CLOCK_MONOTONIC alike, through libfaketime)."""
    return {"LD_PRELOAD": faketime_library(), "FAKETIME": f"{offset:+d}s"}


def python_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a test subprocess: ``tests/`` importable, unbuffered."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_producer(
    url: str, queue: str, ledger: Path, *args: str, env: dict[str, str] | None = None
) -> None:
    """``python -m faults.producer --url URL --queue Q --ledger PATH ARGS...`` to its end."""
    argv = [sys.executable, "-m", "faults.producer", "--url", url, "--queue", queue]
    done = subprocess.run(
        [*argv, "--ledger", str(ledger), *args],
        env=python_env(env),
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"producer {args} failed ({done.returncode}):\n{done.stderr}")


# ----------------------------------------------------------------------------- ledger


@dataclass(frozen=True)
class Enq:
    kind: str  # ENQ_OK, ENQ_UNKNOWN, ENQ_FAIL
    seq: int
    id: str | None
    status: str | None
    time: float
    producer: str
    delay: float


@dataclass(frozen=True)
class Run:
    kind: str  # START, DONE, CANCEL_IGNORED
    seq: int
    id: str
    attempt: int
    deliveries: int
    pid: int
    token: str
    time: float  # the worker's wall clock
    enqueued_at: float  # server clock

    @property
    def dequeued_at(self) -> float:
        """When this delivery was handed out, in server seconds (from the token)."""
        return int(self.token.split(".")[1]) / 1000

    @property
    def delivery(self) -> int:
        return int(self.token.split(".")[0])


@dataclass
class LedgerView:
    enqs: list[Enq]
    runs: list[Run]

    def of(self, kind: str) -> list[Run]:
        return [r for r in self.runs if r.kind == kind]


def read_ledger(path: Path) -> LedgerView:
    """Parse the ledger; a torn last line (a writer killed mid-write) is ignored."""
    enqs: list[Enq] = []
    runs: list[Run] = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        text = ""
    for line in text.splitlines():
        p = line.split()
        if not p:
            continue
        try:
            if p[0].startswith("ENQ_"):
                ok = p[0] == "ENQ_OK"
                enqs.append(
                    Enq(
                        p[0],
                        int(p[1]),
                        p[2] if ok else None,
                        p[3] if ok else None,
                        float(p[4]),
                        p[5],
                        float(p[6]),
                    )
                )
            else:
                kind, seq, job_id, attempt, deliveries, pid, token, at, enq = p[:9]
                numbers = (int(attempt), int(deliveries), int(pid))
                runs.append(Run(kind, int(seq), job_id, *numbers, token, float(at), float(enq)))
        except (IndexError, ValueError):
            continue
    return LedgerView(enqs, runs)


# --------------------------------------------------------------------------- producers


class Producer(threading.Thread):
    """``faults.producer.produce`` in a thread; ``stop()`` ends it after its current call."""

    def __init__(
        self,
        url: str,
        queue: str,
        ledger: Path,
        seqs: Sequence[int],
        *,
        name: str = "p",
        batch: int = 1,
        pause: float = 0.0,
        seconds: Seconds | None = None,
        delay: Seconds | None = None,
        task: str = "mark",
    ) -> None:
        super().__init__(name=f"producer-{name}", daemon=True)
        self.args = (url, queue, seqs)
        self.options: dict[str, Any] = {
            "name": name,
            "batch": batch,
            "pause": pause,
            "seconds": seconds,
            "delay": delay,
            "task": task,
        }
        self.ledger = ledger
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        ledger = LedgerFile(str(self.ledger))
        try:
            produce(*self.args[:2], ledger, self.args[2], stop=self.halt, **self.options)
        except BaseException as exc:  # reported by finish()
            self.error = exc
        finally:
            ledger.close()

    def stop(self) -> None:
        self.halt.set()

    def finish(self, timeout: float = 30.0) -> None:
        """Wait for the thread; fail the test if it crashed or hangs."""
        self.join(timeout)
        if self.is_alive():
            pytest.fail(f"{self.name} still running after {timeout:g} s", pytrace=False)
        if self.error is not None:
            raise AssertionError(f"{self.name} crashed: {self.error!r}") from self.error


# ----------------------------------------------------------------------------- workers


_REFUSED = re.compile(r"of job (\S+) on \S+ refused \(\w+\): its lease had expired")


class WorkerProc:
    """One ``durq worker faults.app:app`` process, its output in a file."""

    def __init__(self, popen: subprocess.Popen[bytes], log: Path, label: str) -> None:
        self.popen = popen
        self.log = log
        self.label = label
        self.started = time.time()
        self.killed_at: float | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def __repr__(self) -> str:
        return f"<worker {self.label} pid={self.pid}>"

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def ready(self) -> bool:
        """It logged that it is consuming."""
        return "consuming" in self.output()


class Fleet:
    """Starts, kills and stops the worker processes of one test."""

    def __init__(
        self,
        tmp_path: Path,
        url: str,
        queue: str,
        ledger: Path,
        *,
        concurrency: int = 10,
        lease: float = 1.0,
        args: Sequence[str] = (),
    ) -> None:
        self.tmp_path = tmp_path
        self.url = url
        self.queue = queue
        self.ledger = ledger
        self.concurrency = concurrency
        self.lease = lease
        self.args = list(args)
        self.procs: list[WorkerProc] = []

    def spawn(
        self,
        *,
        url: str | None = None,
        env: dict[str, str] | None = None,
        concurrency: int | None = None,
        label: str = "",
    ) -> WorkerProc:
        """Start a worker (``url``: e.g. through a proxy; ``env``: e.g. LD_PRELOAD)."""
        argv = [
            sys.executable, "-m", "durq", "worker", APP_TARGET,
            "-q", self.queue,
            "-c", str(concurrency or self.concurrency),
            "--url", url or self.url,
            "--lease", str(self.lease),
            "--grace", "2",
            "--heartbeat", "1",
            *self.args,
        ]  # fmt: skip
        full_env = python_env({LEDGER_ENV: str(self.ledger), QUEUE_ENV: self.queue, **(env or {})})
        index = len(self.procs)
        log = self.tmp_path / f"worker-{index}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                env=full_env,
                cwd=REPO_DIR,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = WorkerProc(popen, log, label or str(index))
        self.procs.append(proc)
        return proc

    def kill(self, proc: WorkerProc) -> float:
        """SIGKILL ``proc`` and reap it; returns the time of the kill."""
        at = time.time()
        if proc.alive():
            proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait()
        proc.killed_at = at
        return at

    def alive(self) -> list[WorkerProc]:
        return [p for p in self.procs if p.alive()]

    def wait_ready(self, procs: Iterable[WorkerProc], timeout: float = 30.0) -> None:
        procs = list(procs)
        eventually(lambda: all(p.ready() for p in procs), timeout, self.outputs)

    def stop(self, limit: float = 8.0) -> float:
        """SIGTERM every live worker and wait; each must drain and exit within ``limit``
        seconds (the queue is drained by then: nothing runs, nothing is left to send).
        Returns the longest stop."""
        live = self.alive()
        began = time.monotonic()
        for proc in live:
            proc.popen.send_signal(signal.SIGTERM)
        slow = []
        for proc in live:
            try:
                proc.popen.wait(max(began + limit - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                slow.append(proc)
        longest = time.monotonic() - began
        for proc in slow:
            proc.popen.kill()
            proc.popen.wait()
        if slow:
            pytest.fail(f"{slow} did not stop within {limit} s of SIGTERM:\n{self.outputs()}",
                        pytrace=False)  # fmt: skip
        return longest

    def close(self) -> None:
        """Kill whatever still runs (test teardown)."""
        for proc in self.procs:
            if proc.alive():
                proc.popen.kill()
            proc.popen.wait()

    def killed_pids(self) -> dict[int, float]:
        return {p.pid: p.killed_at for p in self.procs if p.killed_at is not None}

    def grep(self, text: str) -> int:
        """How many lines of all worker outputs contain ``text``."""
        return sum(1 for p in self.procs for line in p.output().splitlines() if text in line)

    def fencing_alarms(self, view: LedgerView) -> tuple[int, list[str]]:
        """The workers' warnings that an acknowledgement was refused because the job had
        been handed out again, and those among them that are false: the job never had a
        later delivery than the warning worker's own runs of it."""
        latest: dict[str, int] = {}
        mine: dict[tuple[int, str], int] = {}
        for r in view.runs:
            if r.kind == "START":
                latest[r.id] = max(latest.get(r.id, 0), r.delivery)
                # the earliest of its own runs: a refusal is true if any delivery of the
                # job came after it (the log line does not say which run it was about)
                mine[(r.pid, r.id)] = min(mine.get((r.pid, r.id), r.delivery), r.delivery)
        count, false = 0, []
        for p in self.procs:
            for line in p.output().splitlines():
                found = _REFUSED.search(line)
                if found:
                    count += 1
                    job_id = found.group(1)
                    if latest.get(job_id, 0) <= mine.get((p.pid, job_id), 0):
                        false.append(line)
        return count, false

    def outputs(self, tail: int = 40) -> str:
        parts = []
        for p in self.procs:
            lines = p.output().splitlines()[-tail:]
            state = "alive" if p.alive() else f"exit {p.popen.returncode}"
            parts.append(f"--- {p!r} ({state})\n" + "\n".join(lines))
        return "\n".join(parts)


# ----------------------------------------------------------------------------- checker


@dataclass
class Report:
    """Every job classified, and the fencing and emptiness checks."""

    case: str
    jobs: int = 0  # ENQ_OK seqs
    unknown: int = 0  # ENQ_UNKNOWN seqs
    recovered: int = 0  # ENQ_UNKNOWN seqs that ran anyway
    failed_enqueues: int = 0
    completed: int = 0  # completed, run once
    duplicated: int = 0  # completed, run to DONE two or more times
    extra_runs: int = 0  # DONE lines beyond the first, over all jobs
    dead: dict[str, int] = field(default_factory=dict)  # reason -> jobs
    lost: int = 0
    lost_sample: list[str] = field(default_factory=list)
    unexpected: int = 0  # runs of seqs never enqueued
    double_enqueued: int = 0  # seqs that became two jobs
    enq_exists: int = 0  # ENQ_OK whose call found the job already there (a retry)
    zombie_accepted: int = 0  # completions accepted from a superseded delivery
    no_result: int = 0  # released jobs without the result of their release
    stats_completed: int = 0
    distinct_completed: int = 0
    stats_enqueued: int = 0
    stats_reclaimed: int = 0
    leftover: dict[str, int] = field(default_factory=dict)  # non-empty structures
    refused_acks: int = 0  # acks/extends refused by fencing, from the workers' logs
    figures: dict[str, Any] = field(default_factory=dict)  # case-specific numbers

    @property
    def dead_total(self) -> int:
        return sum(self.dead.values())

    def line(self) -> str:
        head = [f"{self.case}", f"jobs={self.jobs}"]
        for key in ("kills", "pauses", "cuts"):
            if key in self.figures:
                head.append(f"{key}={self.figures[key]}")
        head += [
            f"lost={self.lost}",
            f"dup={self.duplicated}",
            f"dead={self.dead_total}",
            f"zombie_accepted={self.zombie_accepted}",
            f"unknown={self.unknown}",
            f"recovered={self.recovered}",
        ]
        for key, value in self.figures.items():
            if key not in ("kills", "pauses", "cuts"):
                head.append(f"{key}={value}")
        return " ".join(head)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["dead_total"] = self.dead_total
        out["line"] = self.line()
        return out

    def problems(self) -> list[str]:
        """The invariants every case asserts (cases add their own)."""
        out = []
        if self.lost:
            out.append(f"lost={self.lost} (e.g. {self.lost_sample})")
        if self.unexpected:
            out.append(f"unexpected={self.unexpected}")
        if self.double_enqueued:
            out.append(f"double_enqueued={self.double_enqueued}")
        if self.zombie_accepted:
            out.append(f"zombie_accepted={self.zombie_accepted}")
        if self.no_result:
            out.append(f"no_result={self.no_result}")
        if self.stats_completed != self.distinct_completed:
            out.append(
                f"stats.completed={self.stats_completed} != distinct completed "
                f"{self.distinct_completed}"
            )
        created = self.distinct_completed + self.dead_total
        if self.stats_enqueued != created:
            out.append(f"stats.enqueued={self.stats_enqueued} != jobs that ended {created}")
        if self.leftover:
            out.append(f"left in the queue: {self.leftover}")
        return out


def raw_leftovers(client: redis.Redis, queue: durq.Queue) -> dict[str, int]:
    """Non-empty structures once drained, read from the keys themselves (not only from
    the counters): ready lists, rotation, leases, delayed, records not dead."""
    keys = queue.keys
    p = keys.prefix
    pipe = client.pipeline(transaction=False)
    pipe.llen(p + "pending")
    pipe.zcard(p + "prio")
    pipe.llen(p + "rr")
    pipe.zcard(p + "active")
    pipe.zcard(p + "delayed")
    pipe.hlen(p + "jobs")
    pipe.zcard(p + "dead")
    pending, prio, rr, active, delayed, records, dead = pipe.execute()
    stats = queue.stats()
    found = {
        "pending_list": pending,
        "prio": prio,
        "rotation": rr,
        "active": active,
        "delayed": delayed,
        "stuck_records": records - dead,
        "ready_gauge": stats.pending,
        "stats_active": stats.active,
        "stats_delayed": stats.delayed,
    }
    return {k: v for k, v in found.items() if v}


def kill_recovery(runs: list[Run], killed: dict[int, float]) -> tuple[list[float], int]:
    """Seconds from each kill to the next start, elsewhere, of a job the killed worker
    had started; and the duplicates not explained by a kill (no run of the job to DONE
    was by a killed worker)."""
    by_id: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_id[r.id].append(r)
    delays = []
    unexplained = 0
    for job_runs in by_id.values():
        job_runs.sort(key=lambda r: r.time)
        for r in job_runs:
            if r.kind == "START" and r.pid in killed:
                later = [x for x in job_runs if x.kind == "START" and x.delivery > r.delivery]
                if later:
                    delays.append(min(x.time for x in later) - killed[r.pid])
        dones = [r for r in job_runs if r.kind == "DONE"]
        if len(dones) > 1 and not any(d.pid in killed for d in dones):
            unexplained += 1
    return delays, unexplained


def drain(queue: durq.Queue, timeout: float, what: Callable[[], str]) -> float:
    """Wait until nothing is pending, delayed or active; returns the seconds it took."""
    began = time.monotonic()
    eventually(lambda: queue.stats().size == 0, timeout, lambda: f"{queue.stats()}\n{what()}")
    return time.monotonic() - began


def _dead_letters(queue: durq.Queue) -> dict[str, str]:
    out: dict[str, str] = {}
    offset = 0
    while True:
        page = queue.dead_letters(limit=500, offset=offset)
        for info in page:
            out[info.id] = str((info.reason or {}).get("reason", "?"))
        if len(page) < 500:
            return out
        offset += len(page)


def _results(client: redis.Redis, queue: durq.Queue, ids: Iterable[str]) -> dict[str, str]:
    ids = list(ids)
    out: dict[str, str] = {}
    for start in range(0, len(ids), 1000):
        chunk = ids[start : start + 1000]
        pipe = client.pipeline(transaction=False)
        for job_id in chunk:
            pipe.lindex(queue.keys.result(job_id), 0)
        for job_id, raw in zip(chunk, pipe.execute(), strict=True):
            if raw is not None:
                out[job_id] = str(orjson.loads(raw)["value"])
    return out


def _enqueued(view: LedgerView, report: Report) -> tuple[dict[int, set[str]], set[int]]:
    """The ids each acknowledged seq was given, and the seqs whose enqueue is unknown."""
    ok_ids: dict[int, set[str]] = defaultdict(set)
    unknown: set[int] = set()
    for e in view.enqs:
        if e.kind == "ENQ_OK" and e.id is not None:
            ok_ids[e.seq].add(e.id)
            report.enq_exists += e.status == "exists"
        elif e.kind == "ENQ_UNKNOWN":
            unknown.add(e.seq)
        else:
            report.failed_enqueues += 1
    unknown -= set(ok_ids)
    report.jobs = len(ok_ids)
    report.unknown = len(unknown)
    return ok_ids, unknown


def _zombies(
    results: dict[str, str], done_by_id: dict[str, list[Run]], latest_start: dict[str, int]
) -> int:
    """Jobs whose accepted completion is not that of their latest delivery, or not of a
    run that reached its end: a superseded holder's release was accepted."""
    count = 0
    for job_id, value in results.items():
        token = value.split()[1]
        delivery = int(token.split(".")[0])
        dones = {r.token for r in done_by_id.get(job_id, [])}
        if delivery < latest_start.get(job_id, 0) or token not in dones:
            count += 1
    return count


def _classify(
    report: Report,
    ids_of_seq: dict[int, set[str]],
    acknowledged: set[int],
    done_by_id: dict[str, list[Run]],
    results: dict[str, str],
    dead: dict[str, str],
) -> None:
    reasons: Counter[str] = Counter()
    for seq, ids in ids_of_seq.items():
        for job_id in ids:
            runs = len(done_by_id.get(job_id, []))
            report.extra_runs += max(runs - 1, 0) if job_id in results else 0
            if job_id in results:
                report.duplicated += runs >= 2
                report.completed += runs < 2
            elif job_id in dead:
                reasons[dead[job_id]] += 1
            elif seq in acknowledged:
                report.lost += 1
                report.no_result += runs > 0  # it ran, yet its completion is nowhere
                if len(report.lost_sample) < 5:
                    report.lost_sample.append(f"seq {seq} id {job_id} runs={runs}")
    report.dead = dict(reasons)


def check(
    case: str, ledger: Path, queue: durq.Queue, client: redis.Redis, *, results: bool = True
) -> Report:
    """Classify every job of the (drained) queue from the ledger and the queue.

    ``results=False``: the jobs ran a task that stores no result (``mark_plain``), so no
    stored result names the delivery the queue accepted: a job that ran to DONE and is
    not dead counts as completed (that nothing is left in the queue is checked from the
    keys), and the zombie check is not made."""
    view = read_ledger(ledger)
    report = Report(case)
    ok_ids, unknown = _enqueued(view, report)
    ids_of_seq: dict[int, set[str]] = defaultdict(set)
    for seq, ids in ok_ids.items():
        ids_of_seq[seq] |= ids
    done_by_id: dict[str, list[Run]] = defaultdict(list)
    latest_start: dict[str, int] = {}
    for r in view.runs:
        ids_of_seq[r.seq].add(r.id)
        if r.kind == "DONE":
            done_by_id[r.id].append(r)
        elif r.kind == "START":
            latest_start[r.id] = max(latest_start.get(r.id, 0), r.delivery)
    report.unexpected = sum(1 for s in ids_of_seq if s not in ok_ids and s not in unknown)
    report.double_enqueued = sum(1 for ids in ids_of_seq.values() if len(ids) > 1)

    dead = _dead_letters(queue)
    if results:
        stored = _results(client, queue, {i for ids in ids_of_seq.values() for i in ids})
        report.zombie_accepted = _zombies(stored, done_by_id, latest_start)
    else:
        stored = {job_id: "" for job_id in done_by_id if job_id not in dead}
    report.distinct_completed = len(stored)
    report.recovered = sum(
        1 for seq in unknown if ids_of_seq.get(seq, set()) & (set(stored) | set(dead))
    )
    _classify(report, ids_of_seq, set(ok_ids), done_by_id, stored, dead)

    stats = queue.stats()
    report.stats_completed = stats.completed
    report.stats_enqueued = stats.enqueued
    report.stats_reclaimed = stats.reclaimed
    report.leftover = raw_leftovers(client, queue)
    return report


# ----------------------------------------------------------------------------- results


RECORDED: list[tuple[str, Path]] = []
"""(line, JSON path) of each case run in this session, for the terminal summary."""


def record_results(tmp_path: Path, report: Report, results_file: Path) -> Path:
    """Print the case's line, write its JSON next to the test and append it to the
    session's results file; returns the test's JSON path."""
    path = tmp_path / f"{report.case}.json"
    path.write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    with results_file.open("a") as out:
        out.write(json.dumps(report.as_dict(), sort_keys=True) + "\n")
    print(f"\n{report.line()}\nresults: {path}")
    RECORDED.append((report.line(), path))
    return path


def assert_clean(report: Report, logs: Callable[[], str], *extra: str) -> None:
    """Fail with every broken invariant, the report and the worker logs."""
    problems = report.problems() + [e for e in extra if e]
    if problems:
        pytest.fail(
            f"{report.case}: " + "; ".join(problems) + f"\n{report.line()}\n{logs()}",
            pytrace=False,
        )


def jitter(mean: float, spread: float, rng: random.Random) -> float:
    return max(0.05, rng.uniform(mean - spread, mean + spread))
