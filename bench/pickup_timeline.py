"""Where each microsecond of an idle worker's pickup goes: one timeline per job.

    .venv/bin/python bench/pickup_timeline.py [--rounds 3] [--jobs 300] [--no-floors]
        [--path DIR]

On a fresh server (Valkey, no persistence), one ``durq worker`` at defaults
(``bench/pickup_timeline_app.py``) and a job sent every 10 ms, alternately to a plain
``def`` task and an ``async def`` one. Every stamp is ``time.time()`` (CLOCK_REALTIME in
the producer, the worker and the server alike):

- the producer, before ``task.enqueue`` (t0) and when it sends the request (its
  socket's ``sendall`` starts; a measurement-only wrap of the sync driver's exchange);
- the server, from a MONITOR connection (another process): when each top-level command
  starts (Valkey feeds MONITOR before it runs a command) and each command a script runs;
  with the slow log at 0 µs, each script's server time, so its end;
- the worker (patched by its app module): its event loop's wake-up, the fetch's reply
  parsed, and the body's start.

Each round, after the floors below, runs the jobs four times: with no observer (the
true total, and the stages the client stamps give), with the slow log alone (the
scripts' server times), with MONITOR, and with MONITOR and the slow log (every stage);
the totals show what each observer costs. Prints, per stage, the median over rounds of
its p50 and p99 (with their range), the sum of the stages' p50s, and the sum of their
means against the total's mean (equal when the stages leave no gap).

The floors (unless ``--no-floors``): the same few tens of µs of plain Python back to
back, after 10 ms asleep and after 10 ms spinning (what running cold costs); and a
redis-py client blocked on ``BRPOP`` in another process while this one does ``LPUSH``
every 10 ms, latency from before ``LPUSH`` to ``BRPOP``'s return, with a blocking and
with an asyncio client on the receiving side: the two wake-ups any Redis queue pays
(Huey's shape), without a queue's code (``bench/floor.py``, which ``make bench`` also
measures in its latency rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from durq._sync import driver as sync_driver
from durq.dev.server import RedisServer

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from floor import STYLES, floor_pairs

HERE = Path(__file__).resolve().parent
MODES = ("none", "slowlog", "monitor", "monitor+slowlog")
#: stage name, start stamp, end stamp (keys of a job's stamps)
STAGES = (
    ("1 producer: t0 -> request sent", "t0", "sent"),
    ("2 -> server starts the enqueue", "sent", "enq_start"),
    ("3 enqueue script (server)", "enq_start", "enq_end"),
    ("4 -> server starts the fetch (wait ends)", "enq_end", "deq_start"),
    ("5 fetch script (server)", "deq_start", "deq_end"),
    ("6a -> worker's event loop wakes", "deq_end", "woke"),
    ("6b -> loop hands the bytes to the stream", "woke", "fed"),
    ("6c -> fetch reply parsed", "fed", "parsed"),
    ("7 -> body starts", "parsed", "body"),
)
#: the stages the slow log alone gives: the scripts' server times, without start times
SLOWLOG_STAGES = (STAGES[2], STAGES[4])
#: the stages with no observer on the server: 2-6a in one
CLIENT_STAGES = (
    ("1 producer: t0 -> request sent", "t0", "sent"),
    ("2-6a sent -> worker's event loop wakes", "sent", "woke"),
    ("6b -> loop hands the bytes to the stream", "woke", "fed"),
    ("6c -> fetch reply parsed", "fed", "parsed"),
    ("7 -> body starts", "parsed", "body"),
)


# -- the pure parts (tests/test_bench_timeline.py) -------------------------------------


@dataclass(frozen=True)
class Event:
    """One MONITOR line: when the server started a command, whether a script ran it,
    the command and its first argument (a function's name for FCALL)."""

    ts: float
    lua: bool
    command: str
    name: str


def parse_monitor_line(line: bytes) -> Event | None:
    """``1700000000.123456 [0 127.0.0.1:5000] "FCALL" "name" ...`` as an Event; None for
    anything else (the ``OK`` that answers MONITOR)."""
    head, sep, rest = line.partition(b" [")
    if not sep:
        return None
    source, _, args = rest.partition(b"] ")
    words = args.split(b'" "', 2)
    command = words[0].strip(b'"').decode(errors="replace").upper()
    name = words[1].strip(b'"').decode(errors="replace") if len(words) > 1 else ""
    return Event(float(head), source.endswith(b" lua"), command, name)


def script_spans(
    events: Sequence[Event], durations: Sequence[int] | None = None
) -> list[tuple[str, float, float]]:
    """Each top-level FCALL as (function, start, end). Its end is the start plus its
    server time where ``durations`` (µs, one per FCALL in order, from the slow log)
    are given, else the start of its last inner command (a lower bound)."""
    spans: list[tuple[str, float, float]] = []
    for event in events:
        if event.lua:
            if spans:
                name, start, _ = spans[-1]
                spans[-1] = (name, start, event.ts)
        elif event.command == "FCALL":
            spans.append((event.name, event.ts, event.ts))
        else:
            spans.append(("", event.ts, event.ts))  # ends the previous script's inner run
    spans = [s for s in spans if s[0]]
    if durations is not None and len(durations) == len(spans):
        spans = [(n, s, s + d / 1e6) for (n, s, _), d in zip(spans, durations, strict=True)]
    return spans


def server_stamps(
    t0: float, spans: Sequence[tuple[str, float, float]]
) -> Iterator[tuple[str, float]]:
    """The server's stamps of the job whose producer started at ``t0``: the first
    enqueue script after t0 and the first fetch (``dequeue``) script after that."""
    enqueue = next((s for s in spans if "enqueue" in s[0] and s[1] >= t0), None)
    if enqueue is None:
        return
    yield "enq_start", enqueue[1]
    yield "enq_end", enqueue[2]
    fetch = next((s for s in spans if s[0].endswith("dequeue") and s[1] >= enqueue[2]), None)
    if fetch is not None:
        yield "deq_start", fetch[1]
        yield "deq_end", fetch[2]


def slowlog_stamps(seq: int, fcalls: Sequence[tuple[str, int]]) -> dict[str, float]:
    """With the slow log alone (no MONITOR, so no start times): the server times of the
    ``seq``-th enqueue script and of the first fetch after it, as stamps from 1.0 so
    that stages 3 and 5 read them."""
    enqueues = [i for i, (name, _) in enumerate(fcalls) if "enqueue" in name]
    if seq >= len(enqueues):
        return {}
    at = enqueues[seq]
    stamps = {"enq_start": 1.0, "enq_end": 1.0 + fcalls[at][1] / 1e6}
    fetch = next((d for name, d in fcalls[at + 1 :] if name.endswith("dequeue")), None)
    if fetch is not None:
        stamps.update(deq_start=1.0, deq_end=1.0 + fetch / 1e6)
    return stamps


def pct(values: Sequence[float]) -> tuple[float, float]:
    """p50 and p99 of ``values`` (the p99 as bench/latency.py takes it)."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[max(0, int(len(ordered) * 0.99) - 1)]


def stage_values(
    jobs: Sequence[dict[str, float]], stages: Sequence[tuple[str, str, str]]
) -> dict[str, list[float]]:
    """Each stage's durations (ms) over the jobs that have both of its stamps (a stamp
    of 0 is missing), and the total (t0 to the body)."""
    out: dict[str, list[float]] = {label: [] for label, _, _ in stages}
    out["total t0 -> body"] = []
    for job in jobs:
        for label, start, end in stages:
            if job.get(start) and job.get(end):
                out[label].append((job[end] - job[start]) * 1000)
        out["total t0 -> body"].append((job["body"] - job["t0"]) * 1000)
    return out


# -- the processes beside the producer ------------------------------------------------


def _stop_on_term() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


#: the ECHO that ends a MONITOR process once it has read everything before it
STOP = b"pickup-timeline-stop"


def _stop_monitor(client: redis.Redis, monitor: subprocess.Popen[bytes]) -> None:
    client.echo(STOP)
    try:
        monitor.wait(30)
    except subprocess.TimeoutExpired:
        monitor.terminate()
        monitor.wait(10)


def _monitor(url: str, out: str) -> None:
    """MONITOR ``url`` into ``out``, one raw line each, until the ECHO of STOP (or
    SIGTERM)."""
    _stop_on_term()
    conn = redis.Redis.from_url(url, protocol=2).connection_pool.get_connection()
    conn.send_command("MONITOR")
    with open(out, "wb") as f:
        while True:
            line = conn.read_response(disable_decoding=True)
            if STOP in line:  # all before it is read: MONITOR can lag behind the jobs
                return
            f.write(line + b"\n")


def _role(argv: Sequence[str]) -> None:
    role, url, out = argv[:3]
    if role == "monitor":
        _monitor(url, out)


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, "--role", *args])


# -- the producer's stamp ------------------------------------------------------------


class _StampedSocket:
    """The producer connection's socket, stamping when a ``sendall`` starts: after it
    the producer may be preempted by the very processes its write wakes (the server,
    then the worker, on 2 cores), so a stamp after it can come after the job's body."""

    def __init__(self, sock: Any, stamps: list[float]) -> None:
        self._sock, self._stamps = sock, stamps

    def sendall(self, data: Any) -> None:
        self._stamps[0] = time.time()
        self._sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _stamp_writes() -> list[float]:
    """Wrap the sync driver's exchange so each request's write is stamped; returns the
    list whose first item holds the last stamp."""
    stamps = [0.0]
    exchange = sync_driver.sync_exchange

    def stamped(conn: Any, packed: Sequence[bytes], count: int) -> list[Any]:
        sock = conn._sock
        conn._sock = _StampedSocket(sock, stamps)
        try:
            return exchange(conn, packed, count)
        finally:
            conn._sock = sock

    sync_driver.sync_exchange = stamped  # type: ignore[assignment]
    return stamps


# -- a round --------------------------------------------------------------------------


def _monitor_events(path: Path) -> list[Event]:
    events = []
    for line in path.read_bytes().splitlines():
        try:
            event = parse_monitor_line(line)
        except ValueError:
            continue  # a line cut at SIGTERM
        if event is not None:
            events.append(event)
    return events


def _fcall_durations(client: redis.Redis) -> list[tuple[str, int]]:
    """The function and server time (µs) of each FCALL in the slow log, oldest first."""
    entries = client.slowlog_get(1_000_000)
    return [
        (e["command"].split(b" ")[1].decode(), int(e["duration"]))
        for e in reversed(entries)
        if e["command"].startswith(b"FCALL ")
    ]


def _run(
    url: str, tmp: Path, tasks: dict[str, Any], stamps: list[float], mode: str, jobs: int
) -> dict[str, list[dict[str, float]]]:
    """Send ``jobs`` jobs per task kind, alternating, one every 10 ms; each job's stamps."""
    out = Path(os.environ["BENCH_TIMELINE_OUT"])
    out.write_text("")
    client = redis.Redis.from_url(url)
    monitor = None
    if "monitor" in mode:
        mon_out = tmp / "monitor.txt"
        monitor = _spawn("monitor", url, str(mon_out))
        time.sleep(0.5)
    if "slowlog" in mode:
        client.config_set("slowlog-max-len", 1_000_000)
        client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    sent: dict[int, dict[str, float]] = {}
    for seq in range(2 * jobs):
        task = tasks["def" if seq % 2 else "async"]
        t0 = time.time()
        task.enqueue(seq, t0)
        sent[seq] = {"t0": t0, "sent": stamps[0]}
        time.sleep(0.01)
    time.sleep(0.5)
    client.config_set("slowlog-log-slower-than", 10000)
    fcalls = _fcall_durations(client) if "slowlog" in mode else []
    durations = [d for _, d in fcalls] if mode == "monitor+slowlog" else None
    events: list[Event] = []
    if monitor is not None:
        _stop_monitor(client, monitor)
        events = _monitor_events(mon_out)
    client.close()
    spans = script_spans(events, durations)
    if durations is not None and len(durations) != sum(1 for s in spans if s[0]):
        print(f"  (slow log: {len(durations)} FCALLs, MONITOR {len(spans)}: ends from MONITOR)")
    by_kind: dict[str, list[dict[str, float]]] = {"def": [], "async": []}
    for line in out.read_text().splitlines():
        kind, seq, _t0, woke, fed, parsed, body = line.split()
        got = {"woke": woke, "fed": fed, "parsed": parsed, "body": body}
        job = dict(sent[int(seq)], **{k: float(v) for k, v in got.items()})
        job.update(server_stamps(job["t0"], spans))
        if mode == "slowlog":
            job.update(slowlog_stamps(int(seq), fcalls))
        by_kind[kind].append(job)
    return by_kind


def summarize(rounds: Sequence[dict[str, list[float]]]) -> list[tuple[str, list[float]]]:
    """Per stage: its p50 and p99 in each round (ms), as [p50s..., p99s...]; stages in
    the order of the first round."""
    rows = []
    for label in rounds[0]:
        got = [pct(r[label]) for r in rounds if r.get(label)]
        rows.append((label, [p for p, _ in got] + [p for _, p in got]))
    return rows


def _spread(values: Sequence[float]) -> str:
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 2]:6.3f} ({ordered[0]:.3f}-{ordered[-1]:.3f})"


def _table(title: str, rounds: Sequence[dict[str, list[float]]]) -> None:
    """The median over rounds of each stage's p50 and p99, with their range."""
    print(f"\n{title} (n per round: {len(next(iter(rounds[0].values()), []))})")
    print(f"  {'stage':44s} {'p50 ms, median (range)':>24s} {'p99 ms, median (range)':>24s}")
    p50s = 0.0
    rows = summarize(rounds)
    # with the slow log alone the scripts' times are inside stage 2-6a: not summed twice
    nested = ("total", "3 ", "5 ") if any(r[0].startswith("2-6a") for r in rows) else ("total",)
    for label, values in rows:
        half = len(values) // 2
        if not half:
            print(f"  {label:44s} {'n/a':>24s}")
            continue
        if not label.startswith(nested):
            p50s += sorted(values[:half])[half // 2]
        print(f"  {label:44s} {_spread(values[:half]):>24s} {_spread(values[half:]):>24s}")
    print(f"  {'sum of the stages p50s':44s} {p50s:6.3f}")
    # means add up exactly where every job has every stamp: the stages leave no gap
    means = {
        label: statistics.fmean(v for r in rounds for v in r.get(label, []))
        for label, _ in rows
        if any(r.get(label) for r in rounds)
    }
    totals = [label for label in means if label.startswith("total")]
    if totals and len(means) > 2:
        total = means.pop(totals[0])
        summed = sum(m for label, m in means.items() if not label.startswith(nested))
        print(f"  {'mean: sum of the stages / total':44s} {summed:6.3f} / {total:.3f}")


# -- the floors ----------------------------------------------------------------------


def _floor(url: str, tmp: Path, style: str, jobs: int, watch: bool) -> dict[str, list[float]]:
    """bench/floor.py's LPUSH -> BRPOP floor, with MONITOR splitting it at the server's
    start of each LPUSH when ``watch``."""
    monitor = _spawn("monitor", url, str(tmp / "floor-monitor.txt")) if watch else None
    if monitor is not None:
        time.sleep(0.5)
    got, _ = floor_pairs(url, style, jobs, 0.01)
    values: dict[str, list[float]] = {
        "total t0 -> BRPOP returned": [(r - t) * 1000 for t, r in got]
    }
    if monitor is not None:
        with redis.Redis.from_url(url) as stopper:
            _stop_monitor(stopper, monitor)
        starts = sorted(t for t, _ in got)
        pushes = [  # the measured values' LPUSHes: not the warm-up's
            e.ts
            for e in _monitor_events(tmp / "floor-monitor.txt")
            if e.command == "LPUSH" and e.ts >= starts[0]
        ]
        split = list(zip(starts, pushes, strict=False))  # one LPUSH per value, in order
        returned = dict(got)
        values = {
            "t0 -> server starts LPUSH": [(p - t) * 1000 for t, p in split],
            "-> BRPOP returned": [(returned[t] - p) * 1000 for t, p in split],
            **values,
        }
    return values


def _producer_warm(tasks: dict[str, Any], stamps: list[float], jobs: int) -> list[float]:
    """Stage 1 (t0 to the request's send) with enqueues back to back: the producer's
    Python warm, against the same code once every 10 ms."""
    values = []
    for seq in range(jobs):
        t0 = time.time()
        tasks["async"].enqueue(-1 - seq, t0)
        values.append((stamps[0] - t0) * 1000)
    time.sleep(0.5)  # the worker drains them
    return values


def _python_work() -> None:
    """Some tens of µs of ordinary Python: calls, a dataclass, a dict, JSON, an id."""
    job = Event(time.time(), False, "FCALL", uuid.uuid4().hex)
    fields = {f"k{i}": (job.name, i, job.ts * i) for i in range(8)}
    json.loads(json.dumps(fields))


def _cold_python(count: int) -> dict[str, list[float]]:
    """The same Python (``_python_work``) back to back, after 10 ms asleep, and after
    10 ms of spinning: what a process pays for running after an idle wait on this
    machine (caches, the CPU's idle state), apart from any wake-up."""
    values: dict[str, list[float]] = {"back to back": [], "after 10 ms asleep": []}
    values["after 10 ms spinning"] = []
    for label, pause in (("back to back", 0.0), ("after 10 ms asleep", 0.01)):
        for _ in range(count):
            time.sleep(pause)
            t = time.perf_counter()
            _python_work()
            values[label].append((time.perf_counter() - t) * 1000)
    for _ in range(count):
        until = time.perf_counter() + 0.01
        while time.perf_counter() < until:
            pass
        t = time.perf_counter()
        _python_work()
        values["after 10 ms spinning"].append((time.perf_counter() - t) * 1000)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=300, help="per task kind, mode and round")
    parser.add_argument("--no-floors", action="store_true", help="skip the BRPOP floors")
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        help="prepend to the worker's PYTHONPATH (repeatable): a prototype's src/",
    )
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"the observer passes of each round, in order (default {','.join(MODES)})",
    )
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        _role(args.role)
        return
    if not set(args.modes.split(",")) <= set(MODES):
        parser.error(f"--modes: each of {', '.join(MODES)}")
    with RedisServer(flavor="valkey") as server, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        os.environ.update(BENCH_REDIS_URL=server.url, BENCH_TIMELINE_OUT=str(tmp / "jobs.txt"))
        sys.path.insert(0, str(HERE))
        from pickup_timeline_app import app, tl_async, tl_sync

        stamps = _stamp_writes()
        worker = subprocess.Popen(
            [sys.executable, "-m", "durq", "worker", "pickup_timeline_app:app", "-q", "timeline",
             "--url", server.url, "--log-level", "error"],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([*args.path, str(HERE)])},
        )  # fmt: skip
        try:
            time.sleep(2)  # the worker's start
            tasks = {"def": tl_sync, "async": tl_async}
            _run(server.url, tmp, tasks, stamps, "none", 50)  # warm-up, not reported
            # every round measures the floors and durq's pickup minutes apart at most, so
            # that each sees the same load of the shared machine
            results: dict[str, list[dict[str, list[float]]]] = {}
            for _ in range(args.rounds):
                if not args.no_floors:
                    title = "floor: the same Python, warm and cold"
                    results.setdefault(title, []).append(_cold_python(args.jobs))
                    for style in STYLES:
                        for watch in (False, True):
                            title = f"floor: LPUSH -> {style} BRPOP, " + (
                                "MONITOR" if watch else "no observer"
                            )
                            values = _floor(server.url, tmp, style, args.jobs, watch)
                            results.setdefault(title, []).append(values)
                title = "producer's stage 1 warm (enqueues back to back)"
                warm = _producer_warm(tasks, stamps, 200)
                results.setdefault(title, []).append({"1 producer, back to back": warm})
                for mode in args.modes.split(","):
                    by_kind = _run(server.url, tmp, tasks, stamps, mode, args.jobs)
                    stages = {"none": CLIENT_STAGES, "slowlog": CLIENT_STAGES + SLOWLOG_STAGES}
                    for kind, jobs in by_kind.items():
                        title = f"{kind} task, observers: {mode}"
                        values = stage_values(jobs, stages.get(mode, STAGES))
                        results.setdefault(title, []).append(values)
            for title, rounds in results.items():
                _table(f"{title}, {len(rounds)} rounds", rounds)
        finally:
            worker.terminate()
            worker.wait(30)
            app.close()


if __name__ == "__main__":
    main()
