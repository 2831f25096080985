"""Where a durq worker's time goes per job, while it drains one kind of job.

    .venv/bin/python bench/worker_profile.py --task io_redis_async [-p 1 -c 100]
        [--jobs 40000] [--spy] [--cprofile] [--python OTHER/bin/python] [--bare]

On a fresh server (Valkey, no persistence): queues ``--jobs`` jobs of a task of
``bench/peers/durq.py`` (noop, io_redis_async/_sync, io_sleep_async/_sync,
cpu_async/_sync, or bulk_batch: a durq.Batch task's items, on its own queue), resets
``INFO commandstats``, starts ``durq worker`` and, over the window from the 10th to the
90th percent of the jobs done, measures:

- the rate, and the worker processes' CPU time per job (user and system, µs; psutil);
- the server's CPU time per job (``INFO cpu``) and the commands clients sent per job
  with their server time per call (``INFO commandstats``, over the whole drain);
- ``--spy``: py-spy samples of the worker (1 kHz, the thread holding the GIL) over
  that window, grouped by where the time went (see CATEGORIES) and by durq function,
  scaled to the measured CPU per job (so time in syscalls without the GIL is spread
  over the rest: read the shares as shares of Python time);
- ``--cprofile`` (1 process only): cProfile of the worker over the whole run, the top
  functions by own time, per job;
- ``--bare``: the bare io_redis body with the same processes and concurrency
  (``bench/bare.py``), its rate and CPU per job, for "durq's own cost" = worker CPU
  per job - bare CPU per job.

``--python`` runs the worker with another interpreter (e.g. a scratch venv with a
prototype change installed, or with uvloop): the jobs are queued by this one. Figures
are indicative: on a shared machine compare CPU per job more than rates.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# A py-spy stack of the worker's loop thread is the CLI's frames, then asyncio's
# run_forever -> _run_once, then either the selector's wait or one callback
# (Handle._run) and what it runs. Samples are attributed to the first category (in this
# order) that matches that callback's frames, so e.g. redis-py under the pump's round
# trip counts as durq's round trip and redis-py under the job body as the body.
CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("job body (bench/work.py, incl. its redis-py call)", ("work.py",)),
    ("durq: pump round trip (ack + fetch, incl. redis-py)", ("durq/worker/pump.py",)),
    ("durq: thread runner (hand-off to/from task threads)", ("durq/worker/threads.py",)),
    ("durq: run a job (executor, task, outcome, metrics)", ("durq/worker/executor.py",)),
    ("durq: worker bookkeeping (accept, start, finish)", ("durq/worker/runner.py",)),
    ("durq: leases, heartbeat, registry", ("durq/worker/leases.py", "durq/worker/registry.py")),
    ("durq: other", ("durq/",)),
    # a callback that starts in redis-py: a Task of wait_for() (redis-py >= 7 sends under
    # asyncio.wait_for when socket_timeout is set, and its default is 5 s)
    ("redis-py: send under wait_for (a Task per command)", ("_send_packed_command",)),
    ("redis-py (other)", ("redis/",)),
    ("asyncio: socket reads (any connection's replies)", ("_read_ready",)),
    ("asyncio: timers and wake-ups (wait_for, timeout, futures)", ("asyncio/",)),
    ("threading / queue", ("threading.py", "queue.py")),
]
_LOOP_ROOT = "Handle._run (asyncio/events.py"


def _category(stack: str) -> str:
    frames = stack.split(";")
    roots = [i for i, f in enumerate(frames) if f.startswith(_LOOP_ROOT)]
    if roots:
        callback = ";".join(frames[roots[0] + 1 :])
        if not callback:
            return "asyncio: running callbacks (Handle._run itself)"
    elif any("_run_once (asyncio/base_events.py" in f for f in frames):
        leaf = frames[-1]
        if "selectors.py" in leaf or "select" in leaf:
            return "asyncio: selector wait (epoll)"
        return "asyncio: _run_once itself (ready queue, timer heap)"
    else:
        callback = stack  # another thread, or a stack py-spy cut short
    for name, markers in CATEGORIES:
        if any(m in callback for m in markers):
            return name
    return "other"


def _leaf_area(frame: str) -> str:
    """Where a leaf frame's own time goes, by file."""
    for marker, area in (
        ("asyncio/", "asyncio"),
        ("selectors.py", "selector (epoll)"),
        ("redis/", "redis-py"),
        ("durq/", "durq"),
        ("work.py", "job body"),
        ("threading.py", "threading"),
        ("queue.py", "queue"),
        ("socket.py", "socket"),
    ):
        if marker in frame:
            return area
    return frame.split(" (")[0] if " (" in frame else frame


def spy_report(raw: Path, cpu_per_job: float) -> list[str]:
    """Collapsed py-spy stacks -> lines: categories and leaf areas, as shares of the
    samples and as µs per job (the share of the worker's measured CPU per job: py-spy
    attaches late and may drop samples, so its own clock is not used)."""
    cats: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    durq_fns: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        cats[_category(stack)] += n
        frames = stack.split(";")
        leaves[_leaf_area(frames[-1])] += n
        for frame in reversed(frames):  # the innermost durq frame: durq's own functions
            if "durq/" in frame:
                durq_fns[frame.split(" (")[0] + " " + frame.split("durq/")[-1].split(":")[0]] += n
                break
    per_job = cpu_per_job / max(total, 1)  # µs per job per sample
    out = [f"py-spy: {total} samples; µs below = share x {cpu_per_job:.1f} µs CPU/job"]
    out.append("  by category (inclusive, first match):")
    out += [f"    {n * per_job:7.1f} µs  {n / total:5.1%}  {c}" for c, n in cats.most_common()]
    out.append("  by the leaf frame's file (own time):")
    out += [f"    {n * per_job:7.1f} µs  {n / total:5.1%}  {c}" for c, n in leaves.most_common(12)]
    out.append("  innermost durq function on the stack (top 15):")
    out += [
        f"    {n * per_job:7.1f} µs  {n / total:5.1%}  {c}" for c, n in durq_fns.most_common(15)
    ]
    return out


def cprofile_report(path: Path, jobs: int) -> list[str]:
    stats = pstats.Stats(str(path))
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((tt, ct, nc, f"{Path(file).name}:{line}({fn})"))
    rows.sort(reverse=True)
    out = [f"cProfile (whole run, {jobs} jobs; profiled code runs ~2x slower): own time per job"]
    for tt, ct, nc, name in rows[:30]:
        out.append(
            f"    {tt / jobs * 1e6:7.2f} µs own {ct / jobs * 1e6:8.2f} µs cum "
            f"{nc / jobs:6.2f} calls/job  {name}"
        )
    return out


def _cpu(procs: list[psutil.Process]) -> tuple[float, float]:
    user = system = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        user += t.user
        system += t.system
    return user, system


def _worker_procs(top: psutil.Process) -> list[psutil.Process]:
    try:
        kids = top.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [top, *kids]


def main() -> None:  # noqa: C901
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="io_redis_async")
    ap.add_argument("-p", "--processes", type=int, default=1)
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=40_000)
    ap.add_argument("--spy", action="store_true", help="py-spy the worker (needs py-spy)")
    ap.add_argument(
        "--spy-all",
        action="store_true",
        help="with --spy: sample every thread py-spy deems active, not only the one\n"
        "holding the GIL (on this VM threads blocked in epoll or a lock count as active)",
    )
    ap.add_argument("--cprofile", action="store_true", help="cProfile the worker (-p 1)")
    ap.add_argument("--python", default=sys.executable, help="interpreter of the worker")
    ap.add_argument(
        "--path",
        action="append",
        default=[],
        help="prepend to the worker's PYTHONPATH (repeatable): e.g. a scratch copy's src/\n"
        "with a prototype change, or a --target dir with uvloop",
    )
    ap.add_argument("--bare", action="store_true", help="also run bench/bare.py alike")
    ap.add_argument("--keep", default=None, help="directory to keep the raw profiles in")
    ap.add_argument("--url", default=None, help="use this server instead of starting one")
    args = ap.parse_args()
    if args.spy and not (Path(sys.executable).parent / "py-spy").exists():
        # checked first: a failure to start it mid-drain left the worker running
        ap.error(f"--spy needs py-spy in {Path(sys.executable).parent} (pip install py-spy)")

    server = None
    url = args.url
    if url is None:
        from durq.dev.server import RedisServer

        server = RedisServer(flavor="valkey").start()
        url = server.url
    os.environ["BENCH_REDIS_URL"] = url
    keep = Path(args.keep or tempfile.mkdtemp(prefix="durq-prof-"))
    keep.mkdir(parents=True, exist_ok=True)
    client = redis.Redis.from_url(url)
    lines: list[str] = []
    try:
        client.flushall()
        from peers import durq as peer

        bench = peer.Peer()
        bench.setup()
        bench.fill(args.jobs, args.task)
        time.sleep(0.5)
        client.config_resetstat()
        from peers.durq_features import BATCH_QUEUE

        queue = BATCH_QUEUE if args.task == "bulk_batch" else "bench"  # a batch task's own
        worker_argv = [
            "-m", "durq", "worker", "peers.durq:app", "-q", queue, "--url", url,
            "-p", str(args.processes), "-c", str(args.concurrency), "--log-level", "warning",
        ]  # fmt: skip
        prof = keep / "worker.prof"
        if args.cprofile:
            if args.processes != 1:
                raise SystemExit("--cprofile needs -p 1 (the worker runs in the CLI's process)")
            worker_argv = ["-m", "cProfile", "-o", str(prof), *worker_argv]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*args.path, str(HERE)])}
        worker = subprocess.Popen([args.python, *worker_argv], env=env, cwd=HERE)
        top = psutil.Process(worker.pid)
        n = args.jobs
        lo_mark, hi_mark = int(n * 0.1), int(n * 0.9)
        spy = None
        t_lo = t_hi = None
        cpu_lo = cpu_hi = (0.0, 0.0)
        srv_lo: dict[str, Any] = {}
        srv_hi: dict[str, Any] = {}
        done_lo = done_hi = 0
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done = int(client.get("bench:done") or 0)
            if t_lo is None and done >= lo_mark:
                t_lo, done_lo = time.perf_counter(), done
                cpu_lo, srv_lo = _cpu(_worker_procs(top)), client.info("cpu")
                if args.spy:
                    targets = _worker_procs(top)[1:] if args.processes > 1 else [top]
                    spy = [
                        subprocess.Popen(
                            [
                                str(Path(sys.executable).parent / "py-spy"),
                                "record",
                                "-r",
                                "1000",
                                "-f",
                                "raw",
                                "-o",
                                str(keep / f"spy-{p.pid}.txt"),
                                "--pid",
                                str(p.pid),
                                "--nonblocking",
                                *([] if args.spy_all else ["--gil"]),
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                        for p in targets
                    ]
            if t_hi is None and done >= hi_mark:
                t_hi, done_hi = time.perf_counter(), done
                cpu_hi, srv_hi = _cpu(_worker_procs(top)), client.info("cpu")
                for s in spy or []:
                    s.send_signal(signal.SIGINT)
            if done >= n:
                break
            time.sleep(0.002)
        for s in spy or []:
            s.wait(30)
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
        stats = client.info("commandstats")
        if t_lo is None or t_hi is None:
            raise SystemExit("the drain did not pass 10% and 90% of the jobs")
        window_jobs = done_hi - done_lo
        rate = window_jobs / (t_hi - t_lo)
        u = (cpu_hi[0] - cpu_lo[0]) / window_jobs * 1e6
        s_ = (cpu_hi[1] - cpu_lo[1]) / window_jobs * 1e6
        srv = (
            (srv_hi["used_cpu_user"] + srv_hi["used_cpu_sys"])
            - (srv_lo["used_cpu_user"] + srv_lo["used_cpu_sys"])
        ) / window_jobs * 1e6  # fmt: skip
        lines.append(
            f"task {args.task}, durq worker -p {args.processes} -c {args.concurrency}, "
            f"{n:,} jobs, worker python {args.python}"
            + (f", path {args.path}" if args.path else "")
        )
        lines.append(f"rate (10%-90% window): {rate:,.0f} jobs/s; {1e6 / rate:.1f} µs wall per job")
        lines.append(
            f"worker CPU per job: {u + s_:.1f} µs (user {u:.1f}, system {s_:.1f}); "
            f"server CPU per job: {srv:.1f} µs"
        )
        lines.append("commands sent by clients over the whole drain (per job; µs per call):")
        for name, st in sorted(stats.items(), key=lambda kv: -kv[1]["calls"]):
            cmd = name.removeprefix("cmdstat_")
            if cmd in ("info", "get", "config|resetstat", "flushall"):
                continue  # this script's own polling
            lines.append(
                f"    {cmd:18s} {st['calls'] / n:8.4f}/job  {st['usec_per_call']:7.2f} µs/call"
            )
        if args.spy:
            raws = sorted(keep.glob("spy-*.txt"))
            merged = keep / "spy-all.txt"
            merged.write_text("".join(p.read_text() for p in raws))
            lines += spy_report(merged, u + s_)
        if args.cprofile:
            lines += cprofile_report(prof, n)
        if args.bare and args.task.startswith("io_redis"):
            style = "async" if args.task.endswith("async") else "sync"
            out = subprocess.run(
                [args.python, str(HERE / "bare.py"), "--procs", str(args.processes),
                 "--slots", str(args.concurrency), "--style", style, "--n", "20000"],
                capture_output=True, text=True, env=env, check=True,
            )  # fmt: skip
            b = json.loads(out.stdout.strip().splitlines()[-1])
            own = (u + s_) - b["cpu_us_per_job"]
            lines.append(
                f"bare body ({args.processes} x {args.concurrency} {style}): {b['rate']:,.0f}/s, "
                f"CPU {b['cpu_us_per_job']:.1f} µs/job -> durq's own CPU per job {own:.1f} µs; "
                f"worker rate = {rate / b['rate']:.0%} of bare"
            )
    finally:
        client.close()
        if server is not None:
            server.close()
    print("\n".join(lines))
    (keep / "summary.txt").write_text("\n".join(lines) + "\n")
    print(f"(raw profiles and this summary in {keep})")


if __name__ == "__main__":
    main()
