"""The checker of a fault case: once the queue is drained, ``check`` reads the ledger
(``faults.ledger``) and the queue and classifies every job in a Report:

- **completed**: the queue accepted one completion (a stored result, written by the
  release it accepted), and the job ran once;
- **duplicated**: completed, but the task ran to DONE two or more times (at-least-once);
- **dead**: in the dead letters, with the reason;
- **lost**: enqueue returned (ENQ_OK), but the job neither completed nor is dead.

and the fencing checks: the completion accepted for each job is the one of its latest
delivery (a holder whose lease was taken over cannot complete it: ``zombie_accepted``),
``completed`` in the queue's counters equals the distinct jobs completed, no seq was
enqueued as two jobs, nothing is left pending, delayed, active or stuck (read from the
keys, not only from the counters). ``record_results`` and ``assert_clean`` give the
verdict.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

import durq
from faults.ledger import LedgerView, Run, read_ledger
from helpers import eventually

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
