"""Benchmark durq against its peers on one freshly started Valkey.

    .venv/bin/python bench/run.py [--peers rq,huey] [--quick] [--repeat N]
        [--out bench/results.json] [--tune]

What it does, in one run:

1. starts ``durq.dev.server.RedisServer(flavor="valkey")`` on a free loopback port;
2. calibrates that server with ``redis-benchmark`` (installed from Debian's
   ``redis-tools`` with apt-get if missing, unless ``--no-install``);
3. for each peer: creates/reuses ``bench/.envs/<env>`` (pip install from PyPI) and
   starts ``bench/driver.py`` inside it, which it asks, one JSON command at a time, to
   measure; each command has a timeout, and a peer that fails or hangs is killed and
   recorded, never fatal;
4. the figures that drift with the machine's load and that the targets compare across
   frameworks, single enqueue and enqueue-to-start latency, round-robin: ``repeat``
   rounds in which every peer gets one run, in an order rotated each round
   (``measure_interleaved``), so that all frameworks share the same windows;
5. then each peer's own section in turn: bulk enqueue, Redis memory per queued job,
   drain rates (default worker and best 2-core settings), the real-work scenarios;
6. writes the JSON results and renders ``bench/RESULTS.md`` + ``bench/results.png``
   with ``bench/report.py`` in a bench-tools venv (matplotlib).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    BENCH_DIR,
    DEFAULT_PEERS,
    ENV_URL,
    ENVS_DIR,
    LOGS_DIR,
    PEERS,
    ROOT_DIR,
    SCENARIOS,
    PeerMeta,
    Settings,
    env_python,
    scenario_limit,
    summary,
)

TOOLS_ENV = ENVS_DIR / "bench-tools"
TOOLS_REQUIREMENTS = ("matplotlib",)
INSTALL_TIMEOUT = 900.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- venvs


def ensure_env(path: Path, requirements: tuple[str, ...]) -> str | None:
    """Create or reuse a venv with ``requirements``; return an error message or None."""
    stamp = path / ".bench-requirements.json"
    wanted = json.dumps(sorted(requirements))
    python = path / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return None
    LOGS_DIR.mkdir(parents=True, exist_ok=True)
    install_log = LOGS_DIR / f"install-{path.name}.log"
    log(f"  installing {', '.join(requirements)} into {path.relative_to(ROOT_DIR)}")
    with install_log.open("w") as out:
        try:
            if not python.exists():
                subprocess.run(
                    [sys.executable, "-m", "venv", "--clear", str(path)],
                    check=True,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=120,
                )
            subprocess.run(
                [str(python), "-m", "pip", "install", "--disable-pip-version-check", *requirements],
                check=True,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=INSTALL_TIMEOUT,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            return f"installing {requirements} failed ({exc}); see {install_log}"
    stamp.write_text(wanted)
    return None


# --------------------------------------------------------------------------- calibration


def find_benchmark_binary(allow_install: bool) -> tuple[str | None, str]:
    for name in ("redis-benchmark", "valkey-benchmark"):
        found = shutil.which(name)
        if found:
            return found, ""
    if not allow_install:
        return None, "redis-benchmark not found and --no-install given"
    if os.environ.get("CI"):
        return None, "redis-benchmark not found; not installing packages under CI"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "redis-benchmark not found and apt-get is not usable here (needs root)"
    log("redis-benchmark missing: apt-get install redis-tools")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=120", "update", "-qq"],
            check=True,
            env=env,
            timeout=300,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=120", "install", "-y", "-qq", "redis-tools"],
            check=True,
            env=env,
            timeout=300,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        stderr = getattr(exc, "stderr", b"") or b""
        return None, f"apt-get install redis-tools failed: {exc} {stderr.decode()[-300:]}"
    found = shutil.which("redis-benchmark")
    return found, "" if found else "redis-tools installed but redis-benchmark not on PATH"


def calibrate(port: int, quick: bool, allow_install: bool) -> dict[str, Any]:
    binary, note = find_benchmark_binary(allow_install)
    if binary is None:
        log(f"calibration skipped: {note}")
        return {"skipped": True, "note": note}
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    n = 50_000 if quick else 200_000
    configs = [
        ("50 clients", ["-c", "50"], n),
        ("50 clients, pipeline 16 (-P 16)", ["-c", "50", "-P", "16"], n * 4),
        ("1 client", ["-c", "1"], n // 4),
    ]
    rows: list[dict[str, Any]] = []
    for label, extra, requests in configs:
        argv = [
            binary,
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-t",
            "set,get,lpush,rpop",
            "-n",
            str(requests),
            "--csv",
            *extra,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        for line in proc.stdout.splitlines():
            parts = [p.strip('"') for p in line.split(",")]
            if len(parts) < 2 or parts[0] == "test":
                continue
            try:
                rps = float(parts[1])
            except ValueError:
                continue
            rows.append(
                {
                    "config": label,
                    "test": parts[0],
                    "rps": rps,
                    "requests": requests,
                    "argv": " ".join(argv[1:]),
                }
            )
    log("calibration: " + ", ".join(f"{r['test']} {r['config']}: {r['rps']:,.0f}/s" for r in rows))
    return {"skipped": False, "binary": binary, "version": version, "results": rows}


# --------------------------------------------------------------------------- driver


class DriverError(Exception):
    pass


def leftover_workers(url: str) -> set[int]:
    """Worker processes of this run whose driver is gone: every process carrying this
    run's server URL in its environment (drivers pass theirs on) that is not a driver.
    Only called when a driver is replaced or closed, when no other peer has workers
    running (one peer measures at a time, and a driver stops its workers after each
    command). Linux (/proc) only; elsewhere none are found."""
    mark = f"{ENV_URL}={url}".encode()
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if mark in env and b"driver.py" not in cmdline and int(entry.name) != os.getpid():
            found.add(int(entry.name))
    return found


class Driver:
    """One peer's driver process; every call has a deadline."""

    def __init__(self, meta: PeerMeta, url: str) -> None:
        self.meta = meta
        self.url = url
        LOGS_DIR.mkdir(parents=True, exist_ok=True)
        self.stderr = (LOGS_DIR / f"{meta.name}.driver.log").open("ab")
        env = dict(os.environ)
        env[ENV_URL] = url
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [str(env_python(meta)), str(BENCH_DIR / "driver.py"), meta.module],
            cwd=BENCH_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            start_new_session=True,
        )
        self._buf = b""
        self._read(60.0)  # "ready"

    def _read(self, timeout: float) -> Any:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise DriverError(f"timed out after {timeout:g} s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.kill()
                    raise DriverError(
                        f"driver exited (code {self.proc.wait()}); see "
                        f"{LOGS_DIR / (self.meta.name + '.driver.log')}"
                    )
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        reply = json.loads(line)
        if not reply.get("ok"):
            raise DriverError(reply.get("error", "unknown error"))
        return reply.get("result")

    def call(self, cmd: str, timeout: float, **kwargs: Any) -> Any:
        assert self.proc.stdin is not None
        if self.proc.poll() is not None:
            raise DriverError("driver is not running")
        try:
            self.proc.stdin.write((json.dumps({"cmd": cmd, **kwargs}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.kill()
            raise DriverError("driver exited") from None
        return self._read(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"cmd": "quit"}\n')
                self.proc.stdin.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20.0)
        self.kill()

    def children(self) -> set[int]:
        """Worker processes the driver started (each leads its own process group)."""
        try:
            out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True)
        except OSError:
            return set()
        kids = set()
        for line in out.stdout.splitlines():
            pid, ppid = (int(x) for x in line.split())
            if ppid == self.proc.pid:
                kids.add(pid)
        return kids

    def kill(self) -> None:
        # Find the driver's worker groups before the driver dies and they get reparented;
        # if it died first (a crash, the OOM killer), find them by this run's server URL.
        groups = self.children() if self.proc.poll() is None else leftover_workers(self.url)
        for pgid in [self.proc.pid, *groups]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        for pid in groups:  # pool children of a worker lead no group of their own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5.0)
        self.stderr.close()


# --------------------------------------------------------------------------- per peer


@dataclasses.dataclass
class PeerRun:
    """One peer through a run: its results so far and its driver while one is up."""

    meta: PeerMeta
    url: str
    res: dict[str, Any]
    driver: Driver | None = None
    hello: dict[str, Any] = dataclasses.field(default_factory=dict)
    busy_s: float = 0.0  # time spent on this peer: venv, driver start, its measurements
    interleaved_scenarios: set[str] = dataclasses.field(default_factory=set)

    @property
    def alive(self) -> bool:
        return self.driver is not None and self.driver.proc.poll() is None

    def step(self, label: str, fn: Any) -> bool:
        """Run one measurement; a failure is recorded, never raised. True while the
        driver still runs (a timeout kills it)."""
        try:
            fn()
            return True
        except DriverError as exc:
            log(f"  {self.meta.display}: {label}: FAILED: {exc}")
            self.res["errors"].append(f"{label}: {exc}")
            return self.alive

    def close(self) -> None:
        if self.driver is not None:
            self.driver.close()
            self.driver = None


def open_peer(pr: PeerRun) -> bool:
    """Start ``pr``'s driver (creating its venv if needed), say hello and set it up.
    On failure the error is recorded and False returned; the first failure marks the
    peer skipped."""
    started = time.monotonic()
    res = pr.res
    first = not pr.hello

    def fail(msg: str) -> bool:
        res["errors"].append(msg)
        log(f"  {pr.meta.display}: {msg}")
        if first:
            res["skipped"] = True
        pr.close()
        return False

    try:
        if pr.meta.env is not None:
            err = ensure_env(ENVS_DIR / pr.meta.env, pr.meta.requirements)
            if err:
                return fail(err)
        try:
            pr.driver = Driver(pr.meta, pr.url)
        except DriverError as exc:
            return fail(f"driver did not start: {exc}")
        try:
            hello = pr.driver.call("hello", 60)
        except DriverError as exc:
            return fail(f"hello failed: {exc}")
        if first:
            pr.hello = hello
            res.update(
                versions=hello["versions"],
                python=hello["python"],
                bulk_api=hello["bulk_api"],
                bulk_note=hello["bulk_note"],
                modes=hello["modes"],
            )
            res["notes"] += hello["notes"]
            log(f"  {pr.meta.display}: versions {hello['versions']}")
        try:
            pr.driver.call("setup", 60)
        except DriverError as exc:
            return fail(f"setup failed, peer skipped: {exc}")
        return True
    finally:
        pr.busy_s += time.monotonic() - started


def new_peer_run(meta: PeerMeta, url: str) -> PeerRun:
    res = {"name": meta.name, "display": meta.display, "errors": [], "notes": list(meta.notes)}
    return PeerRun(meta, url, res)


def harness_error(pr: PeerRun, exc: Exception, skip: bool) -> None:
    """A bug of the harness met while measuring ``pr``: recorded, and the run goes on."""
    traceback.print_exc()
    pr.res["errors"].append(f"harness error: {exc}")
    if skip:
        pr.res["skipped"] = True
    with contextlib.suppress(Exception):
        pr.close()


def round_order(names: list[str], i: int, repeat: int) -> list[str]:
    """Round ``i``'s order of the frameworks: the list rotated by ``i`` times
    ceil(k / repeat) places, so that over the rounds each one runs early, midway and
    late in a round (9 frameworks, 3 rounds: positions p, p - 3, p - 6 modulo 9)."""
    k = len(names)
    if not k:
        return []
    shift = i * -(-k // max(repeat, 1)) % k
    return names[shift:] + names[:shift]


ROW_TEXT = {
    "enqueue single": "single enqueue",
    "latency": "pickup latency (with its variants)",
    "io_redis": "the datastore-bound scenario's drains (with the bare-body runs of their limit)",
}


def interleaved_note(phases: list[str]) -> str:
    """The method, as results.json and RESULTS.md state it."""
    rows = [ROW_TEXT[p] for p in phases]
    if not rows:
        return ""
    listed = ", ".join(rows[:-1]) + (" and " if len(rows) > 1 else "") + rows[-1]
    return (
        f"{listed} were measured round-robin across the frameworks: in each round every "
        "framework got one run of each, in an order rotated each round, with FLUSHALL "
        "between runs; one row after the other (all rounds of the first, then all of the "
        "next). Their ratios compare runs made seconds to minutes apart, not one framework's "
        "section with another's half an hour later on a machine whose speed drifts. The "
        "other figures were measured framework by framework afterwards."
    )


Measure = Callable[[], tuple[dict[str, Any], str]]


@dataclasses.dataclass
class Phase:
    """One interleaved row (or group of rows): what a peer runs in its turn of a round
    (labelled calls, each giving a run and its log text), and how its runs are stored."""

    name: str
    rows: tuple[str, ...]  # the keys of results.json it fills
    turn: Callable[[PeerRun], list[tuple[str, Measure]]]
    store: Callable[[PeerRun, dict[str, list[dict[str, Any]]]], None]


def _call(pr: PeerRun, cmd: str, timeout: float, **kwargs: Any) -> Any:
    assert pr.driver is not None
    return pr.driver.call(cmd, timeout, **kwargs)


def enqueue_phase(s: Settings) -> Phase:
    """Single enqueue: one run of ``enqueue_n`` calls per turn."""
    timeout = 30 + s.enqueue_n / 50  # generous: 50 jobs/s is far below any peer

    def turn(pr: PeerRun) -> list[tuple[str, Measure]]:
        def run() -> tuple[dict[str, Any], str]:
            r = _call(pr, "enqueue", timeout, kind="single", n=s.enqueue_n, batch=s.bulk_batch)
            return r, f"{r['rate']:,.0f}/s"

        return [("enqueue single", run)]

    def store(pr: PeerRun, runs: dict[str, list[dict[str, Any]]]) -> None:
        if rs := runs.get("enqueue single"):
            pr.res["enqueue_single"] = {"runs": rs, "rate": summary([r["rate"] for r in rs])}

    return Phase("enqueue single", ("enqueue_single",), turn, store)


def latency_phase(s: Settings) -> Phase:
    """Pickup latency: one run per turn of the plain task and of each LATENCY_ALSO
    variant (durq's ``async def`` task) right after it, each with its own idle worker."""
    timeout = 120 + s.latency_n * s.latency_interval + 35

    def label(v: str | None) -> str:
        return "latency" + (f" ({v})" if v else "")

    def turn(pr: PeerRun) -> list[tuple[str, Measure]]:
        def run(v: str | None) -> tuple[dict[str, Any], str]:
            r = _call(
                pr,
                "latency",
                timeout,
                n=s.latency_n,
                interval=s.latency_interval,
                repeat=1,
                variant=v,
            )
            x = {**r["runs"][0], "desc": r["desc"]}
            return x, f"p50 {x['p50_ms']:.2f} / p99 {x['p99_ms']:.2f} / max {x['max_ms']:.1f} ms"

        return [
            (label(v), functools.partial(run, v)) for v in (None, *pr.hello.get("latency_also", []))
        ]

    def store(pr: PeerRun, runs: dict[str, list[dict[str, Any]]]) -> None:
        for v in (None, *pr.hello.get("latency_also", [])):
            rs = runs.get(label(v))
            if not rs:
                continue
            entry = {
                "runs": rs,
                "desc": rs[0]["desc"],
                **{k: summary([x[k] for x in rs]) for k in ("p50_ms", "p99_ms", "max_ms")},
            }
            if v is None:
                pr.res["latency"] = entry
            else:
                pr.res.setdefault("latency_also", {})[v] = entry

    return Phase("latency", ("latency", "latency_also"), turn, store)


def io_redis_phase(s: Settings, variant: str | None) -> Phase:
    """The datastore-bound scenario: per turn, one drain of each of the peer's variants
    (those matching ``variant``), then one bare-body run for each distinct limit."""
    n = s.work_n["io_redis"]
    bare_n = max(n, 20_000)  # as measure_work: at least ~1 s of bodies

    def entries(pr: PeerRun) -> list[dict[str, Any]]:
        return [
            e
            for e in pr.hello.get("work", {}).get("io_redis") or []
            if not variant or variant in e["label"] or variant == e["mode"]
        ]

    def bare_label(e: dict[str, Any]) -> str:
        return f"io_redis bare body {e['procs']} x {e['slots']} {e['style']}"

    def drain(pr: PeerRun, e: dict[str, Any]) -> tuple[dict[str, Any], str]:
        timeout = 60 + n / 100 + s.drain_cap + 60
        r = _call(pr, "drain", timeout, mode=e["mode"], n=n, cap=s.drain_cap, kind=e["task"])
        flag = "" if r["complete"] else f" (PARTIAL: {r['done']}/{r['target']} in cap)"
        return r, (
            f"{r['rate'] or 0:,.0f} jobs/s, startup {r['startup_s'] or 0:.2f} s, "
            f"drain {r['drain_s']:.2f} s{flag}"
        )

    def bare(pr: PeerRun, e: dict[str, Any]) -> tuple[dict[str, Any], str]:
        r = _call(pr, "bare", 660, procs=e["procs"], slots=e["slots"], style=e["style"], n=bare_n)
        return r, f"{r['rate']:,.0f}/s"

    def turn(pr: PeerRun) -> list[tuple[str, Measure]]:
        mine = entries(pr)
        bares = {bare_label(e): e for e in mine}  # one per distinct limit
        drains = [(f"io_redis [{e['label']}]", functools.partial(drain, pr, e)) for e in mine]
        return drains + [(label, functools.partial(bare, pr, e)) for label, e in bares.items()]

    def store(pr: PeerRun, runs: dict[str, list[dict[str, Any]]]) -> None:
        out = pr.res.setdefault("work", {}).setdefault("io_redis", [])
        pr.interleaved_scenarios.add("io_redis")
        for e in entries(pr):
            if rs := runs.get(f"io_redis [{e['label']}]"):
                out.append(io_redis_entry(pr, e, rs, runs.get(bare_label(e))))

    return Phase("io_redis", ("work.io_redis",), turn, store)


def io_redis_entry(
    pr: PeerRun,
    e: dict[str, Any],
    runs: list[dict[str, Any]],
    bare_runs: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """A datastore-bound variant's results, in the shape measure_work writes."""
    entry = dict(e)
    entry.update(
        runs=runs,
        rate=summary([r["rate"] for r in runs if r["rate"]]),
        complete=all(r["complete"] for r in runs),
    )
    bare_rate = None
    if bare_runs:
        entry["bare"] = {"runs": bare_runs, "rate": summary([r["rate"] for r in bare_runs])}
        bare_rate = (entry["bare"]["rate"] or {}).get("median")
    limit = scenario_limit("io_redis", e["procs"], e["slots"], os.cpu_count() or 1, bare_rate)
    rate = (entry["rate"] or {}).get("median")
    entry.update(limit=limit, ratio=rate / limit if rate and limit else None)
    if entry["ratio"] is not None:
        log(
            f"  {pr.meta.display}: io_redis [{e['label']}]: {rate:,.0f} jobs/s = "
            f"{entry['ratio'] * 100:.0f}% of its limit {limit:,.0f}/s ({e['desc']})"
        )
    return entry


def interleaved_phases(
    s: Settings, classic: bool, scenarios: tuple[str, ...], variant: str | None
) -> list[Phase]:
    """The rows measured round-robin: single enqueue and latency in a full run, and the
    datastore-bound scenario whenever it is asked for (its targets are ratios against
    the fastest peer too, and against the bare body, measured in the same turn)."""
    phases = [enqueue_phase(s), latency_phase(s)] if classic else []
    if "io_redis" in scenarios:
        phases.append(io_redis_phase(s, variant))
    return phases


def measure_interleaved(
    peers: list[PeerRun],
    s: Settings,
    url: str,
    classic: bool = True,
    scenarios: tuple[str, ...] = SCENARIOS,
    variant: str | None = None,
) -> dict[str, Any]:
    """The window-sensitive rows, round-robin across ``peers`` (see interleaved_note).

    One phase per row, not one round for all: a round of single enqueues takes seconds,
    a round of latency runs a minute or two (each starts an idle worker and sends jobs
    for ``latency_n`` x ``latency_interval``), so the enqueue runs being compared stay
    seconds apart instead of being spread across the latency runs. A row that fails for
    a peer is dropped for that peer (its error recorded, as when measured in its own
    section); a peer whose driver dies leaves the phase, and the others go on."""
    import redis

    by_name = {pr.meta.name: pr for pr in peers}
    names = [pr.meta.name for pr in peers]
    phases = interleaved_phases(s, classic, scenarios, variant)
    method: dict[str, Any] = {
        "rows": [row for ph in phases for row in ph.rows],
        "rounds": s.repeat,
        "note": interleaved_note([ph.name for ph in phases]),
        "phases": [],
    }
    gone: set[str] = set()
    with redis.Redis.from_url(url) as client:
        for phase in phases:
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in names}
            failed: dict[str, set[str]] = {name: set() for name in names}
            took_part: set[str] = set()
            orders = []
            for i in range(s.repeat):
                order = round_order(names, i, s.repeat)
                orders.append(order)
                log(f"-- {phase.name}, round {i + 1}/{s.repeat}: {', '.join(order)}")
                for pos, name in enumerate(order):
                    pr = by_name[name]
                    if not pr.alive and name not in gone:  # said once, whatever killed it
                        gone.add(name)
                        msg = f"{phase.name}: the driver had exited before its turn, round {i + 1}"
                        log(f"  {pr.meta.display}: {msg}; it leaves the interleaved phases")
                        pr.res["errors"].append(msg)
                    for label, measure in phase.turn(pr) if pr.alive else []:
                        if not pr.alive or label in failed[name]:
                            continue
                        took_part.add(name)
                        t0, wall = time.monotonic(), time.time()
                        try:
                            run, text = measure()
                        except Exception as exc:  # one peer's failure never stops the others
                            if not isinstance(exc, DriverError):
                                traceback.print_exc()
                            log(f"  {pr.meta.display}: {label} #{i + 1}: FAILED: {exc}")
                            pr.res["errors"].append(f"{label}: {exc}")
                            failed[name].add(label)
                            if not pr.alive:
                                gone.add(name)
                                log(f"  {pr.meta.display}: it leaves the interleaved phases")
                            continue
                        finally:
                            pr.busy_s += time.monotonic() - t0
                            client.flushall()
                        run.update(
                            started=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall))
                            + f".{int(wall % 1 * 1000):03d}Z",
                            call_s=time.monotonic() - t0,
                            round=i + 1,
                            position=pos + 1,
                        )
                        runs[name].setdefault(label, []).append(run)
                        log(f"  {pr.meta.display}: {label} #{i + 1}: {text}")
            method["phases"].append({"phase": phase.name, "orders": orders})
            for name in names:  # a peer that never had a turn measures it in its section
                if name in took_part:
                    ok = {k: v for k, v in runs[name].items() if k not in failed[name]}
                    phase.store(by_name[name], ok)
    return method


def measure_peer(  # noqa: C901
    pr: PeerRun,
    s: Settings,
    classic: bool = True,
    scenarios: tuple[str, ...] = SCENARIOS,
    variant: str | None = None,
) -> dict[str, Any]:
    """The rest of one peer's figures, in its own section: bulk enqueue, memory and the
    drains unless ``classic`` is false, then the "real work" ``scenarios`` (only the
    variants whose label contains ``variant``, when given). Single enqueue and latency
    were measured before, interleaved with the other peers (measure_interleaved)."""
    res = pr.res
    started = time.monotonic()
    if res.get("skipped"):
        return res
    if not pr.alive:  # the interleaved phase killed it (a timeout): a fresh one
        log("  the driver died in the interleaved phase: starting a new one")
        if not open_peer(pr):
            return res
    driver, hello, step = pr.driver, pr.hello, pr.step
    assert driver is not None
    try:
        alive = True

        def enqueue_bulk() -> None:
            runs = []
            for _ in range(s.repeat):
                r = driver.call(
                    "enqueue", 30 + s.enqueue_n / 50, kind="bulk", n=s.enqueue_n, batch=s.bulk_batch
                )
                runs.append(r)
            res["enqueue_bulk"] = {"runs": runs, "rate": summary([r["rate"] for r in runs])}
            log("  enqueue bulk: " + ", ".join(f"{r['rate']:,.0f}/s" for r in runs))

        if classic and hello["bulk_api"]:
            alive = step("enqueue bulk", enqueue_bulk)

        def memory() -> None:
            r = driver.call("memory", 60 + s.memory_n / 100, n=s.memory_n)
            res["memory"] = r
            log(
                f"  memory: {r['bytes_per_job']:,.0f} B/job ({r['queued']} queued, "
                f"{r['keys']} keys, fill {r['fill_s']:.1f} s)"
            )

        if classic and alive:
            alive = step("memory", memory)

        def drain(mode: str) -> None:
            runs = []
            for i in range(s.repeat):
                timeout = 60 + s.drain_n / 100 + s.drain_cap + 60
                r = driver.call("drain", timeout, mode=mode, n=s.drain_n, cap=s.drain_cap, run=i)
                runs.append(r)
                flag = "" if r["complete"] else f" (PARTIAL: {r['done']}/{r['target']} in cap)"
                log(
                    f"  drain {mode} #{i + 1}: {r['rate'] or 0:,.0f} jobs/s, startup "
                    f"{r['startup_s'] or 0:.2f} s, drain {r['drain_s']:.2f} s{flag}"
                )
            res[f"drain_{mode}"] = {
                "runs": runs,
                "rate": summary([r["rate"] for r in runs if r["rate"]]),
                "desc": runs[0]["desc"],
                "complete": all(r["complete"] for r in runs),
            }

        # "default" and "best" are every peer's columns; a peer module may list more
        # configurations (ALSO) to measure in the same run, shown in its details
        also = [m for m in hello["modes"] if m not in ("default", "best")]
        if also and classic:
            res["drain_also"] = also
        for mode in ("default", "best", *also):
            if alive and classic:
                alive = step(f"drain {mode}", lambda mode=mode: drain(mode))

        rest = tuple(x for x in scenarios if x not in pr.interleaved_scenarios)
        if alive and rest:
            res.setdefault("work", {})
            measure_work(driver, hello, s, res, rest, variant, step)
    except DriverError as exc:
        res["errors"].append(str(exc))
        log(f"  FAILED: {exc}")
    finally:
        pr.close()
        pr.busy_s += time.monotonic() - started
    res["loadavg_after"] = os.getloadavg()
    return res


def measure_work(
    driver: Driver,
    hello: dict[str, Any],
    s: Settings,
    res: dict[str, Any],
    scenarios: tuple[str, ...],
    variant: str | None,
    step: Any,
) -> None:
    """The "jobs that do real work" scenarios: drain ``s.work_n[scenario]`` jobs of the
    scenario's task with each configured variant, and relate the rate to its limit."""
    cpus = os.cpu_count() or 1
    bare_cache: dict[tuple[int, int, str], Any] = {}
    # at least ~1 s of bodies: shorter runs are dominated by the processes' start
    bare_n = max(s.work_n["io_redis"], 20_000)

    def bare(procs: int, slots: int, style: str) -> Any:
        key = (procs, slots, style)
        if key not in bare_cache:
            runs = [
                driver.call("bare", 660, procs=procs, slots=slots, style=style, n=bare_n)
                for _ in range(s.repeat)
            ]
            bare_cache[key] = {"runs": runs, "rate": summary([r["rate"] for r in runs])}
            log(
                f"  bare io_redis body, {procs} process(es) x {slots} {style}: "
                + ", ".join(f"{r['rate']:,.0f}/s" for r in runs)
            )
        return bare_cache[key]

    for scenario in scenarios:
        entries = hello.get("work", {}).get(scenario)
        if not entries:
            res["errors"].append(f"{scenario}: the peer module defines no WORK for it")
            continue
        out = res["work"].setdefault(scenario, [])
        n = s.work_n[scenario]
        for e in entries:
            if variant and variant not in e["label"] and variant != e["mode"]:
                continue
            entry = dict(e)

            def run_one(
                entry: dict[str, Any] = entry,
                scenario: str = scenario,
                n: int = n,
                out: list[dict[str, Any]] = out,
            ) -> None:
                runs = []
                for i in range(s.repeat):
                    timeout = 60 + n / 100 + s.drain_cap + 60
                    r = driver.call(
                        "drain",
                        timeout,
                        mode=entry["mode"],
                        n=n,
                        cap=s.drain_cap,
                        run=i,
                        kind=entry["task"],
                    )
                    runs.append(r)
                    flag = "" if r["complete"] else f" (PARTIAL: {r['done']}/{r['target']} in cap)"
                    log(
                        f"  {scenario} [{entry['label']}] #{i + 1}: {r['rate'] or 0:,.0f} jobs/s, "
                        f"startup {r['startup_s'] or 0:.2f} s, drain {r['drain_s']:.2f} s{flag}"
                    )
                entry.update(
                    runs=runs,
                    rate=summary([r["rate"] for r in runs if r["rate"]]),
                    complete=all(r["complete"] for r in runs),
                )
                bare_rate = None
                if scenario == "io_redis":
                    b = bare(entry["procs"], entry["slots"], entry["style"])
                    entry["bare"] = b
                    bare_rate = (b["rate"] or {}).get("median")
                limit = scenario_limit(scenario, entry["procs"], entry["slots"], cpus, bare_rate)
                entry["limit"] = limit
                rate = (entry["rate"] or {}).get("median")
                entry["ratio"] = rate / limit if rate and limit else None
                if entry["ratio"] is not None:
                    log(
                        f"  {scenario} [{entry['label']}]: {rate:,.0f} jobs/s = "
                        f"{entry['ratio'] * 100:.0f}% of its limit {limit:,.0f}/s "
                        f"({entry['desc']})"
                    )
                out.append(entry)

            if not step(f"{scenario} [{e['label']}]", run_one):
                return


# --------------------------------------------------------------------------- main


def tune_peer(meta: PeerMeta, url: str, n: int, cap: float, what: str = "noop") -> dict[str, Any]:
    """Drain n jobs once with every worker configuration the peer module lists for
    ``what`` ("noop", or a scenario: then with each of its task kinds)."""
    res: dict[str, Any] = {"name": meta.name, "display": meta.display, "runs": {}, "errors": []}
    if meta.env is not None:
        err = ensure_env(ENVS_DIR / meta.env, meta.requirements)
        if err:
            res["errors"].append(err)
            return res
    driver = Driver(meta, url)
    try:
        hello = driver.call("hello", 60)
        res["best"] = hello["best"] if what == "noop" else hello.get("work", {}).get(what)
        driver.call("setup", 60)
        plan = hello["tune"].get(what) or {"tasks": [what], "candidates": {}}
        if not plan["candidates"]:
            res["errors"].append(f"no configurations listed for {what} (TUNE)")
        for kind in plan["tasks"]:
            for name, desc in plan["candidates"].items():
                key = name if kind == what else f"{kind} {name}"
                try:
                    r = driver.call(
                        "drain", 60 + n / 100 + cap + 60, mode=name, n=n, cap=cap, kind=kind
                    )
                except DriverError as exc:
                    log(f"  {key}: FAILED {exc}")
                    res["errors"].append(f"{key}: {exc}")
                    if driver.proc.poll() is not None:
                        return res
                    continue
                res["runs"][key] = r
                flag = "" if r["complete"] else f" PARTIAL {r['done']}/{n}"
                log(f"  {key:34s} {r['rate'] or 0:8,.0f} jobs/s  {desc}{flag}")
    except DriverError as exc:
        res["errors"].append(str(exc))
    finally:
        driver.close()
    return res


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--peers",
        "--only",
        dest="peers",
        default=",".join(DEFAULT_PEERS),
        help=f"comma-separated, from: {', '.join(PEERS)} (default: all)",
    )
    p.add_argument(
        "--scenario",
        default=None,
        help=f"run only these 'real work' scenarios (comma-separated, from: "
        f"{', '.join(SCENARIOS)}, or 'all'),\nnot the enqueue/memory/drain/latency "
        "figures nor the calibration; results go to\nbench/.logs/work-results.json "
        "unless --out is given, and no report is rendered.\nWith --tune: sweep this "
        "scenario's configurations instead of the no-op drain's",
    )
    p.add_argument(
        "--variant",
        default=None,
        help="with --scenario: only the variants whose label contains this text or\n"
        "whose configuration is named so (durq: 'async def, 1 process', 'p2-c100', ...)",
    )
    p.add_argument("--work-n", type=int, default=None, help="jobs per scenario drain")
    p.add_argument(
        "--no-work", action="store_true", help="skip the 'real work' scenarios in a full run"
    )
    p.add_argument("--quick", action="store_true", help="small sizes, 1 repeat: a few minutes")
    p.add_argument(
        "--repeat", type=int, default=None, help="runs of each noisy figure (3; quick 1)"
    )
    p.add_argument(
        "--out",
        default=None,
        help="results file (default bench/results.json; with --tune bench/tune.json)",
    )
    p.add_argument("--no-calibration", action="store_true")
    p.add_argument(
        "--no-install",
        action="store_true",
        help="never apt-get install redis-tools for the calibration",
    )
    p.add_argument("--no-report", action="store_true", help="skip RESULTS.md / results.png")
    p.add_argument("--report-dir", default=str(BENCH_DIR))
    p.add_argument(
        "--tune",
        action="store_true",
        help="instead of the benchmark: drain once with every worker configuration\n"
        "each peer module lists, to choose its BEST (writes --out)",
    )
    p.add_argument("--tune-n", type=int, default=10_000)
    p.add_argument(
        "--drain-cap",
        type=float,
        default=None,
        help="seconds of draining before a drain stops with a partial rate\n"
        "(default 15; quick 10); raise it to always drain all jobs of slow peers",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:  # noqa: C901
    args = parse_args(argv)
    names = [n.strip() for n in args.peers.split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        print(f"unknown peers: {unknown}; known: {list(PEERS)}", file=sys.stderr)
        return 2
    s = Settings.quick(args.repeat or 1) if args.quick else Settings(repeat=args.repeat or 3)
    if args.drain_cap is not None:
        s = dataclasses.replace(s, drain_cap=args.drain_cap)
    scenarios: tuple[str, ...] = () if args.no_work else SCENARIOS
    only_work = args.scenario is not None
    if only_work:
        asked = [x.strip() for x in args.scenario.split(",") if x.strip()]
        scenarios = SCENARIOS if asked == ["all"] else tuple(asked)
        bad = [x for x in scenarios if x not in SCENARIOS]
        if bad:
            print(f"unknown scenarios: {bad}; known: {list(SCENARIOS)}", file=sys.stderr)
            return 2
        if not args.tune:
            args.no_calibration = args.no_report = True
            if args.repeat is None and not args.quick:
                s = dataclasses.replace(s, repeat=1)
    if args.work_n is not None:
        s = dataclasses.replace(s, work_n={k: args.work_n for k in SCENARIOS})

    from durq.dev.server import RedisServer

    t_start = time.monotonic()
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "settings": s.__dict__,
        "quick": args.quick,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "peers": {},
        "loadavg_start": os.getloadavg(),
    }
    peers: list[PeerRun] = []
    server = RedisServer(flavor="valkey")
    server.start()
    try:
        import redis

        with redis.Redis.from_url(server.url) as client:
            info = client.info("server")
        results["server"] = {
            "flavor": server.flavor,
            "version": ".".join(map(str, server.version)),
            "url": server.url,
            "binary": server.binary,
            "config": (
                "durq.dev.server.RedisServer defaults: no persistence (--save '', appendonly no)"
            ),
            "io_threads": info.get("io_threads_active"),
        }
        log(f"server: {server.flavor} {results['server']['version']} at {server.url}")
        if args.tune:
            what = scenarios[0] if only_work else "noop"
            results["tuned"] = what
            for name in names:
                log(f"== tune {PEERS[name].display} ({what})")
                n = args.tune_n
                if only_work:  # half a scenario's drain per configuration, or --work-n
                    n = s.work_n[what] if args.work_n else s.work_n[what] // 2
                results["peers"][name] = tune_peer(PEERS[name], server.url, n, 30.0, what)
            args.no_report = True
        elif args.no_calibration:
            results["calibration"] = {"skipped": True, "note": "--no-calibration"}
        else:
            try:
                results["calibration"] = calibrate(server.port, args.quick, not args.no_install)
            except Exception as exc:
                results["calibration"] = {"skipped": True, "note": f"failed: {exc}"}
        peers = [] if args.tune else [new_peer_run(PEERS[name], server.url) for name in names]
        if peers:
            log("== starting the drivers: " + ", ".join(names))
        for pr in peers:
            try:
                open_peer(pr)
            except Exception as exc:  # never let one peer stop the run
                harness_error(pr, exc, skip=True)
        if peers and (not only_work or "io_redis" in scenarios):
            try:
                results["interleaved"] = measure_interleaved(
                    [pr for pr in peers if pr.alive],
                    s,
                    server.url,
                    not only_work,
                    scenarios,
                    args.variant,
                )
            except Exception as exc:
                traceback.print_exc()
                results["interleaved"] = {"error": f"harness error: {exc}"}
        for pr in peers:
            log(f"== {pr.meta.display}")
            try:
                measure_peer(pr, s, not only_work, scenarios, args.variant)
            except Exception as exc:
                harness_error(pr, exc, skip=False)
            with redis.Redis.from_url(server.url) as client:
                client.flushall()
            pr.res["seconds"] = pr.busy_s
            results["peers"][pr.meta.name] = pr.res
            log(f"   {pr.meta.display} took {pr.busy_s:.0f} s")
    finally:
        for pr in peers:
            pr.close()
        server.close()
    results["seconds"] = time.monotonic() - t_start
    results["loadavg_end"] = os.getloadavg()
    default_out = BENCH_DIR / ("tune.json" if args.tune else "results.json")
    if only_work:
        default_out = LOGS_DIR / ("tune-work.json" if args.tune else "work-results.json")
    out = Path(args.out or default_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    log(f"wrote {out} ({results['seconds']:.0f} s in all)")
    if not args.no_report:
        render_report(out, Path(args.report_dir))
    return 0


def render_report(results: Path, report_dir: Path) -> None:
    err = ensure_env(TOOLS_ENV, TOOLS_REQUIREMENTS)
    python = str(TOOLS_ENV / "bin" / "python") if err is None else sys.executable
    if err:
        log(f"bench-tools venv unavailable ({err}); RESULTS.md without a chart")
    subprocess.run(
        [python, str(BENCH_DIR / "report.py"), str(results), "--dir", str(report_dir)], check=False
    )


if __name__ == "__main__":
    sys.exit(main())
