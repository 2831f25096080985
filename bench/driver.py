"""Per-peer driver: runs inside the peer's venv and measures one peer.

Started by the orchestrator as ``<venv>/bin/python bench/driver.py <module>`` with
``BENCH_REDIS_URL`` set. Protocol: one JSON object per line on stdin
(``{"cmd": "...", ...}``), one JSON line back on the original stdout
(``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ..., "traceback": ...}``).
Anything the peer libraries print goes to stderr, which the orchestrator logs.

A peer module (``bench/peers/<module>.py``) provides a ``Peer`` class with:

    bulk_api: str | None                 # name of the bulk API, None if the library has none
    bulk_note: str                       # e.g. "one pipeline per batch" / "loop of single calls"
    setup()                              # connect; may be async
    after_flush()                        # re-create state FLUSHALL removed (e.g. consumer groups)
    enqueue_single(n)                    # n calls of the single-job API, one at a time
    enqueue_bulk(n, batch)               # n jobs through the bulk API, `batch` jobs per call
    fill(n, kind="noop")                 # queue n jobs of a task (untimed): "noop", or a
                                         # "real work" task named in WORK (bench/work.py)
    send_latency()                       # enqueue one latency job carrying time.time()
    queued() -> int                      # jobs waiting in Redis (sanity check)
    worker(mode) -> dict                 # {"argv": [[...], ...], "env": {...}, "desc": "..."}
    close()

and module-level ``worker_specs()`` (every worker configuration by name: "default" plus
the candidates of the 2-core sweep, ``run.py --tune``; each with ``procs`` processes
running ``slots`` jobs at a time) and ``BEST`` (the name that ``worker("best")`` uses,
chosen from that sweep). For the "jobs that do real work" scenarios: ``WORK``
(scenario -> worker configuration, or a list of ``(label, task kind, configuration,
style)`` for several variants), ``STYLE`` ("async" or "sync": how the peer's tasks run
the body) and ``TUNE`` (scenario, or "noop" -> the configurations its sweep tries;
durq: ``(task kinds, configurations)``).

Any method may be a coroutine function; the driver runs it on one persistent loop.
The feature rows' commands and hooks (``rows()``, startup, asleep) are in
``driver_rows.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import inspect
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from common import (  # noqa: E402
    ENV_URL,
    ENV_WORKER,
    KEY_DONE,
    KEY_LAT,
    LOGS_DIR,
    SCENARIOS,
    latency_run,
    marked_processes,
)
from driver_rows import RowCommands  # noqa: E402

POLL = 0.002


class Driver(RowCommands):
    def __init__(self, module: str) -> None:
        self.module_name = module
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        import redis

        self.url = os.environ[ENV_URL]
        self.r = redis.Redis.from_url(self.url)
        self.mod = importlib.import_module(f"peers.{module}")
        self.peer = self.mod.Peer()
        self.workers: list[subprocess.Popen[bytes]] = []
        self.starts = 0  # workers started: each start's ENV_WORKER tag
        self.worker_mark = ""
        self.worker_log: Path | None = None
        self.worker_desc = ""

    # ------------------------------------------------------------------ helpers

    def call(self, fn: Any, *args: Any) -> Any:
        result = fn(*args)
        if inspect.isawaitable(result):
            result = self.loop.run_until_complete(result)
        return result

    def flush(self) -> None:
        self.r.flushall()
        self.call(self.peer.after_flush)

    def used_memory(self) -> int:
        return int(self.r.info("memory")["used_memory"])

    def done_count(self) -> int:
        value = self.r.get(KEY_DONE)
        return int(value) if value else 0

    # ------------------------------------------------------------------ workers

    def start_worker(self, mode: str, tag: str) -> dict[str, Any]:
        self.stop_worker()
        spec = self.call(self.peer.worker, mode)
        bindir = Path(sys.executable).parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(BENCH_DIR), env.get("PYTHONPATH", "")) if p
        )
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("BENCH_PROBE_SYNC", None)
        env.update(spec.get("env", {}))
        self.starts += 1
        self.worker_mark = f"{ENV_WORKER}={os.getpid()}.{self.starts}"
        env[ENV_WORKER] = self.worker_mark.split("=", 1)[1]
        LOGS_DIR.mkdir(parents=True, exist_ok=True)
        self.worker_log = LOGS_DIR / f"{self.module_name}.{tag}.worker.log"
        log = self.worker_log.open("ab")
        log.write(f"\n==== {time.strftime('%H:%M:%S')} {spec['desc']}\n".encode())
        log.flush()
        for argv in spec["argv"]:
            exe = bindir / argv[0]
            argv = [str(exe) if exe.exists() else argv[0], *argv[1:]]
            log.write(f"$ {' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                argv,
                cwd=BENCH_DIR,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.workers.append(proc)
        log.close()
        self.worker_desc = spec["desc"]
        return {"pgids": [p.pid for p in self.workers], "desc": spec["desc"]}

    def check_workers(self) -> None:
        for proc in self.workers:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"worker exited with code {proc.returncode}; log tail:\n{self.log_tail()}"
                )

    def log_tail(self, lines: int = 25) -> str:
        if self.worker_log is None or not self.worker_log.exists():
            return ""
        text = self.worker_log.read_bytes()[-8000:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop_worker(self, grace: float = 1.5) -> None:
        """SIGTERM, ``grace`` seconds, then SIGKILL to each worker's process group, then
        to every process of that start (its ENV_WORKER tag: `durq worker -p N`'s children
        and RQ's work horses leave the group) until none is left (await_gone)."""
        if not self.workers:
            return
        for proc in self.workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        for proc in self.workers:
            # Kill the whole group: pool children of a worker that already exited too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5.0)
        self.workers = []
        self.await_gone()

    def await_gone(self, timeout: float = 10.0) -> None:
        """Kill what is left of the last start until nothing is, then wait until the
        server holds no blocked client. Else a process left would take the next run's
        jobs; and a killed worker's connection outlives it by up to a few hundred ms (its
        exit path): a fetch queued behind its blocking read would lease the next run's
        jobs to a consumer that is gone (durq's come back a lease later)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = marked_processes(self.worker_mark)
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if not alive and not int(self.r.info("clients").get("blocked_clients", 0)):
                return
            time.sleep(0.01)

    def wait_done(
        self, target: int, startup_timeout: float, cap: float, t_spawn: float | None = None
    ) -> dict[str, Any]:
        """Poll bench:done until it reaches target; time from first job seen to the last.
        ``t_spawn``: when the worker's command was launched (default: now); start-up is
        counted from it, and ``wall_s`` (the drain overall) too."""
        t_spawn = time.perf_counter() if t_spawn is None else t_spawn
        t_first = c_first = None
        count = 0
        while True:
            count = self.done_count()
            now = time.perf_counter()
            if count and t_first is None:
                t_first, c_first = now, count
            if count >= target:
                break
            if t_first is None and now - t_spawn > startup_timeout:
                self.check_workers()
                raise TimeoutError(
                    f"no job ran within {startup_timeout:g} s of starting the worker; "
                    f"log tail:\n{self.log_tail()}"
                )
            if t_first is not None and now - t_first > cap:
                break
            if int(now * 10) % 10 == 0:
                self.check_workers()
            time.sleep(POLL)
        t_end = time.perf_counter()
        window = (t_end - t_first) if t_first is not None else 0.0
        rate = (count - c_first) / window if c_first is not None and window > 0 else None
        return {
            "done": count,
            "target": target,
            "complete": count >= target,
            "startup_s": (t_first - t_spawn) if t_first is not None else None,
            "drain_s": window,
            "wall_s": t_end - t_spawn,
            "rate": rate,
        }

    # ------------------------------------------------------------------ commands

    def work_entries(self) -> dict[str, list[dict[str, Any]]]:
        """WORK normalised: per scenario, the variants to drain and their settings."""
        out: dict[str, list[dict[str, Any]]] = {}
        specs = self.mod.worker_specs()
        for scenario, entry in getattr(self.mod, "WORK", {}).items():
            variants = (
                [("best", scenario, entry, self.mod.STYLE)] if isinstance(entry, str) else entry
            )
            out[scenario] = [
                {
                    "label": label,
                    "task": task,
                    "mode": mode,
                    "style": style,
                    "desc": specs[mode]["desc"],
                    "procs": specs[mode]["procs"],
                    "slots": specs[mode]["slots"],
                }
                for label, task, mode, style in variants
            ]
        return out

    def tune_plan(self) -> dict[str, dict[str, Any]]:
        """Per sweep ("noop" or a scenario): the task kinds drained and the configurations."""
        specs = self.mod.worker_specs()
        tune = getattr(self.mod, "TUNE", {})
        plan = {}
        for what in dict.fromkeys(("noop", *SCENARIOS, *tune)):  # and the rows' "row.part"
            entry = tune.get(what, tuple(specs) if what == "noop" else ())
            kinds, names = entry if entry and isinstance(entry[0], tuple) else ((what,), entry)
            if names:
                plan[what] = {
                    "tasks": list(kinds),
                    "candidates": {k: specs[k]["desc"] for k in names},
                }
        return plan

    def cmd_hello(self) -> dict[str, Any]:
        versions: dict[str, str | None] = {}
        for dist in self.mod.DISTS:
            try:
                versions[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                versions[dist] = None
        return {
            "versions": versions,
            "python": sys.version.split()[0],
            "bulk_api": self.peer.bulk_api,
            "bulk_note": getattr(self.peer, "bulk_note", ""),
            "notes": list(getattr(self.mod, "NOTES", [])),
            "modes": {
                m: self.call(self.peer.worker, m)["desc"]
                for m in ("default", "best", *getattr(self.mod, "ALSO", ()))
            },
            "best": getattr(self.mod, "BEST", None),
            "candidates": {k: v["desc"] for k, v in self.mod.worker_specs().items()},
            "tune": self.tune_plan(),
            "work": self.work_entries(),
            "latency_also": list(getattr(self.mod, "LATENCY_ALSO", {})),
            "rows": self.row_entries(),
        }

    def cmd_setup(self) -> None:
        self.call(self.peer.setup)
        self.flush()

    def cmd_enqueue(self, kind: str, n: int, batch: int = 1000) -> dict[str, Any]:
        self.flush()
        if kind == "single":
            t0 = time.perf_counter()
            self.call(self.peer.enqueue_single, n)
        else:
            t0 = time.perf_counter()
            self.call(self.peer.enqueue_bulk, n, batch)
        elapsed = time.perf_counter() - t0
        queued = self.call(self.peer.queued)
        if queued != n:
            raise RuntimeError(f"expected {n} queued jobs after enqueue, found {queued}")
        return {"n": n, "seconds": elapsed, "rate": n / elapsed, "loadavg": os.getloadavg()[0]}

    def cmd_memory(self, n: int) -> dict[str, Any]:
        self.flush()
        time.sleep(0.2)
        before = self.used_memory()
        t0 = time.perf_counter()
        self.call(self.peer.fill, n)
        fill_s = time.perf_counter() - t0
        after = self.used_memory()
        queued = self.call(self.peer.queued)
        keys = self.r.dbsize()
        return {
            "n": n,
            "queued": queued,
            "before": before,
            "after": after,
            "keys": keys,
            "bytes_per_job": (after - before) / n,
            "fill_s": fill_s,
        }

    def cmd_drain(
        self, mode: str, n: int, cap: float, run: int = 0, kind: str = "noop", stats: bool = False
    ) -> dict[str, Any]:
        """Queue n jobs of ``kind``, start worker ``mode``, wait until they ran (or the cap).
        ``stats``: also what the server (and the peer's own store) did meanwhile."""
        self.flush()
        t0 = time.perf_counter()
        if kind == "noop":
            self.call(self.peer.fill, n)
        else:
            self.call(self.peer.fill, n, kind)
        fill_s = time.perf_counter() - t0
        queued = self.call(self.peer.queued)
        if queued != n:
            raise RuntimeError(f"expected {n} queued jobs before draining, found {queued}")
        before = self.server_counters() if stats else None
        t_spawn = time.perf_counter()
        try:
            self.start_worker(mode, f"drain-{mode}")
            result = self.wait_done(n, startup_timeout=60.0, cap=cap, t_spawn=t_spawn)
            if before is not None:
                result["server"] = self.counters_delta(before, self.server_counters())
        finally:
            self.stop_worker()
        result.update(
            {
                "mode": mode,
                "kind": kind,
                "fill_s": fill_s,
                "desc": self.worker_desc,
                "loadavg": os.getloadavg()[0],
            }
        )
        return result

    def cmd_latency(
        self,
        n: int,
        interval: float,
        repeat: int,
        variant: str | None = None,
        mode: str = "default",
        kind: str = "noop",
        send: str | None = None,
    ) -> dict[str, Any]:
        """Pickup latency with an idle worker ``mode`` warmed up on jobs of ``kind``; a
        variant (LATENCY_ALSO) or ``send`` (a Peer method) sends them to another task."""
        if variant:
            send = self.mod.LATENCY_ALSO[variant]
        sender = getattr(self.peer, send) if send else self.peer.send_latency
        self.flush()
        warmup = 20
        runs = []
        try:
            self.start_worker(mode, "latency" if mode == "default" else f"latency-{mode}")
            self.call(self.peer.fill, warmup, kind)
            self.wait_done(warmup, startup_timeout=60.0, cap=60.0)
            for _ in range(repeat):
                time.sleep(1.0)  # let the worker go idle
                self.r.delete(KEY_LAT)
                t0 = time.perf_counter()
                for i in range(n):
                    delay = t0 + i * interval - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    self.call(sender)
                send_s = time.perf_counter() - t0
                deadline = time.monotonic() + 30.0
                while self.r.llen(KEY_LAT) < n:
                    if time.monotonic() > deadline:
                        self.check_workers()
                        got = self.r.llen(KEY_LAT)
                        raise TimeoutError(f"only {got}/{n} latency jobs started within 30 s")
                    time.sleep(0.01)
                lat_ms = []
                for entry in self.r.lrange(KEY_LAT, 0, -1):
                    enq, start = entry.split()
                    lat_ms.append((float(start) - float(enq)) * 1000.0)
                runs.append(latency_run(lat_ms, n, send_s))
        finally:
            self.stop_worker()
        return {"runs": runs, "desc": self.worker_desc}

    def cmd_bare(self, procs: int, slots: int, style: str, n: int) -> dict[str, Any]:
        """The bare io_redis body, no queue, with this venv's redis-py (bench/bare.py)."""
        self.flush()
        argv = [sys.executable, str(BENCH_DIR / "bare.py"), "--procs", str(procs),
                "--slots", str(slots), "--style", style, "--n", str(n)]  # fmt: skip
        out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        if out.returncode:
            raise RuntimeError(f"bare.py failed ({out.returncode}): {out.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        result["loadavg"] = os.getloadavg()[0]
        return result

    def cmd_stop(self) -> None:
        self.stop_worker()

    # ------------------------------------------------------------------ main loop

    def serve(self, out: Any) -> None:
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            cmd = req.pop("cmd")
            if cmd == "quit":
                break
            try:
                result = getattr(self, f"cmd_{cmd}")(**req)
                reply = {"ok": True, "result": result}
            except Exception as exc:  # reported to the orchestrator, which moves on
                reply = {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(),
                }
                print(reply["traceback"], file=sys.stderr, flush=True)
            out.write(json.dumps(reply) + "\n")
            out.flush()
        self.stop_worker()
        try:
            self.call(self.peer.close)
        except Exception:
            traceback.print_exc()


def main() -> None:
    # Keep the protocol on a private copy of stdout; everything else goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        driver = Driver(sys.argv[1])
    except Exception as exc:
        out.write(
            json.dumps(
                {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(),
                }
            )
            + "\n"
        )
        out.flush()
        traceback.print_exc()
        sys.exit(1)
    out.write(json.dumps({"ok": True, "result": "ready"}) + "\n")
    out.flush()
    try:
        driver.serve(out)
    finally:
        driver.stop_worker()


if __name__ == "__main__":
    main()
