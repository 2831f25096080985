"""The driver's commands for the feature rows (``common.ROWS``), mixed into
``bench/driver.py``'s ``Driver``: a peer module's row variants as hello reports them,
fresh starts of a worker (``startup``), jobs parked asleep (``asleep``) and the server's
counters around a drain.

Runs inside a peer's venv: standard library and redis-py only. The peer module may
provide, besides the ``Peer`` methods of driver.py:

    rows() -> {row: [variant, ...]}     # or a ROWS dict; a variant is a dict with
                                        # part, label, kind (task), mode (worker_specs
                                        # name), optional send (latency: the Peer method
                                        # sending one job) and skip (why it cannot run)
    Peer.asleep_state(kind) -> dict     # asleep, waiting (not started), slots_held
    Peer.asleep_idle(processes) -> float | None  # when (time.time()) the last worker
                                        # process said it is idle (durq: its registry
                                        # beat), None until all have; the asleep window
                                        # begins IDLE_SETTLE after it (its last look)
    Peer.store_size() -> int            # bytes in a store of its own (DBOS: PostgreSQL)
    Peer.store_counters() -> dict       # its store's cumulative statements and exec_us

Peers without a ``startup`` row get one: their default worker and the one their
datastore-bound drain uses, each starting on queued jobs of their io_redis task.
"""

from __future__ import annotations

import time
from typing import Any

#: commands a client sends itself (every other command in INFO commandstats ran inside a
#: script): what the rows count as a durq worker's commands, a bound on its round trips
CLIENT_COMMANDS = (
    "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro", "bzpopmin",
    "bzmpop", "blpop", "brpop", "blmove", "blmpop", "script|load", "ping", "client|setinfo",
)  # fmt: skip
SETTLE_POLL = 0.5
SETTLE_STEADY = 3.0  # seconds the count asleep must hold (a worker process may start late)
# after a peer's last worker said it is idle (Peer.asleep_idle): a durq worker says so in
# its beat, and its upkeep looks, each a heartbeat (5 s) at most after its last job left,
# and then stretch (the beat comes after the job left: a heartbeat and a second past it
# is after the look)
IDLE_SETTLE = 6.0


def default_startup(mod: Any) -> list[dict[str, Any]]:
    """A peer's startup variants when its module names none: its default worker and its
    datastore-bound configuration, on its io_redis task (each job one INCR of bench:done,
    so the first completion shows without the probe's flush interval)."""
    work = getattr(mod, "WORK", {}).get("io_redis")
    if not isinstance(work, str):
        return []
    out = [{"part": "start", "label": "default", "kind": "io_redis", "mode": "default"}]
    procs = mod.worker_specs()[work]["procs"]
    if work != "default" and procs > 1:
        label = f"{procs} processes (its io_redis configuration)"
        out.append({"part": "start", "label": label, "kind": "io_redis", "mode": work})
    return out


def commandstats_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Per command, the calls and server microseconds between two INFO commandstats."""
    out = {}
    for key, now in after.items():
        was = before.get(key, {})
        calls = int(now.get("calls", 0)) - int(was.get("calls", 0))
        if calls:
            usec = int(now.get("usec", 0)) - int(was.get("usec", 0))
            out[key.removeprefix("cmdstat_")] = {"calls": calls, "usec": usec}
    return out


def client_cost(delta: dict[str, Any]) -> dict[str, float]:
    """The client-sent commands of a commandstats delta: their calls and server µs."""
    mine = [v for k, v in delta.items() if k in CLIENT_COMMANDS]
    return {"calls": sum(v["calls"] for v in mine), "usec": sum(v["usec"] for v in mine)}


class RowCommands:
    """The commands of the feature rows; ``Driver`` provides r, mod, peer, call, flush,
    start_worker, stop_worker, wait_done and check_workers."""

    r: Any
    mod: Any
    peer: Any

    def call(self, fn: Any, *args: Any) -> Any:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def start_worker(self, mode: str, tag: str) -> dict[str, Any]:
        raise NotImplementedError

    def stop_worker(self, grace: float = 1.5) -> None:
        raise NotImplementedError

    def check_workers(self) -> None:
        raise NotImplementedError

    def wait_done(
        self, target: int, startup_timeout: float, cap: float, t_spawn: float | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    # ------------------------------------------------------------------ hello

    def row_entries(self) -> dict[str, list[dict[str, Any]]]:
        """Per row, the module's variants with their worker's description, processes and
        slots (``skip`` variants as declared: their worker may not exist yet)."""
        source = getattr(self.mod, "rows", None)
        rows = dict(source() if callable(source) else getattr(self.mod, "ROWS", {}))
        rows.setdefault("startup", default_startup(self.mod))
        specs = self.mod.worker_specs() if hasattr(self.mod, "worker_specs") else {}
        out: dict[str, list[dict[str, Any]]] = {}
        for row, variants in rows.items():
            out[row] = []
            for v in variants:
                entry = dict(v)
                spec = specs.get(v.get("mode"))
                if spec is not None:
                    entry.update(desc=spec["desc"], procs=spec["procs"], slots=spec["slots"])
                out[row].append(entry)
        return out

    # ------------------------------------------------------------------ counters

    def server_counters(self) -> dict[str, Any]:
        """The Redis server's command statistics and CPU seconds, and the peer's own
        store's counters where it has one (DBOS: PostgreSQL's statements)."""
        cpu = self.r.info("cpu")
        return {
            "commandstats": self.r.info("commandstats"),
            "cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
            "store": self.store_counters(),
        }

    def store_counters(self) -> dict[str, float] | None:
        fn = getattr(self.peer, "store_counters", None)
        return dict(self.call(fn)) if fn else None

    @staticmethod
    def counters_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """What the server (and the peer's store) did between two server_counters()."""
        delta = commandstats_delta(before["commandstats"], after["commandstats"])
        out: dict[str, Any] = {
            "commands": delta,
            "client": client_cost(delta),
            "cpu_s": after["cpu_s"] - before["cpu_s"],
        }
        if before["store"] is not None and after["store"] is not None:
            out["store"] = {k: after["store"][k] - before["store"][k] for k in after["store"]}
        return out

    def store_size(self) -> int:
        fn = getattr(self.peer, "store_size", None)
        return int(self.call(fn)) if fn else 0

    def total_commands(self) -> int:
        return int(self.r.info("stats")["total_commands_processed"])

    # ------------------------------------------------------------------ commands

    def cmd_startup(self, mode: str, kind: str, starts: int, jobs: int = 10) -> dict[str, Any]:
        """``starts`` fresh starts of worker ``mode``, each on ``jobs`` queued jobs of
        ``kind``: seconds from just before its command is launched to the first job seen
        completed. The worker is killed at once after each (no grace: its shutdown is not
        measured)."""
        runs = []
        for _ in range(starts):
            self.flush()
            self.call(self.peer.fill, jobs, kind)
            t0 = time.perf_counter()
            try:
                self.start_worker(mode, f"startup-{mode}")
                r = self.wait_done(1, startup_timeout=60.0, cap=0.0, t_spawn=t0)
            finally:
                self.stop_worker(grace=0.0)
            runs.append(r["startup_s"])
        return {"starts": runs, "mode": mode, "kind": kind}

    def cmd_asleep(self, mode: str, kind: str, n: int, window: float) -> dict[str, Any]:
        """``n`` jobs of ``kind`` (each sleeps for an hour as soon as it starts), a worker
        ``mode`` started on them; once they are parked or held (the peer's
        asleep_state holds still): bytes per job in Redis and in the peer's own store,
        the slots the sleeping jobs hold, and the commands the store receives per second
        over ``window`` seconds while the workers have nothing to do (from when they say
        so, ``Peer.asleep_idle``, and IDLE_SETTLE more, for a peer that can)."""
        self.flush()
        time.sleep(0.2)
        mem0, store0 = int(self.r.info("memory")["used_memory"]), self.store_size()
        t0 = time.perf_counter()
        self.call(self.peer.fill, n, kind)
        fill_s = time.perf_counter() - t0
        try:
            self.start_worker(mode, f"asleep-{mode}")
            state, settle_s = self._settle(kind, n, timeout=60.0 + n / 200)
            procs = int(self.call(self.peer.worker, mode).get("procs", 1))
            idle_s = self._until_idle(procs, timeout=30.0)
            mem1, store1 = int(self.r.info("memory")["used_memory"]), self.store_size()
            c0, s0 = self.total_commands(), self.store_counters()
            time.sleep(window)
            c1, s1 = self.total_commands(), self.store_counters()
            self.check_workers()
        finally:
            self.stop_worker()
        stored = (s1 or {}).get("statements", 0) - (s0 or {}).get("statements", 0)
        return {
            "n": n,
            **state,
            "settle_s": settle_s,
            "idle_s": idle_s,
            "fill_s": fill_s,
            "redis_bytes_per_job": (mem1 - mem0) / n,
            "store_bytes_per_job": (store1 - store0) / n if store1 or store0 else None,
            # the INFO that reads the second count is one command of the window's
            "redis_commands_per_s": (c1 - c0 - 1) / window,
            "store_statements_per_s": stored / window if s0 is not None else None,
            "window_s": window,
        }

    def _until_idle(self, processes: int, timeout: float) -> float | None:
        """Wait until IDLE_SETTLE after the last of the peer's workers said it is idle
        (``Peer.asleep_idle``): the seconds waited, None for a peer without the hook (its
        window begins once the jobs settled)."""
        idle = getattr(self.peer, "asleep_idle", None)
        if idle is None:
            return None
        t0 = time.perf_counter()
        while (said := self.call(idle, processes)) is None:
            if time.perf_counter() - t0 > timeout:
                self.check_workers()
                raise TimeoutError(f"the workers did not say they idle within {timeout:g} s")
            time.sleep(SETTLE_POLL)
        time.sleep(max(said + IDLE_SETTLE - time.time(), 0.0))
        return time.perf_counter() - t0

    def _settle(self, kind: str, n: int, timeout: float) -> tuple[dict[str, Any], float]:
        """Poll the peer's asleep_state until every job is accounted for (asleep or
        waiting for a slot) and the count asleep has held for SETTLE_STEADY seconds."""
        t0 = time.perf_counter()
        last: dict[str, Any] | None = None
        steady = 0
        while True:
            state = dict(self.call(self.peer.asleep_state, kind))
            full = state["asleep"] > 0 and state["asleep"] + state["waiting"] >= n
            steady = steady + 1 if full and last and last["asleep"] == state["asleep"] else 0
            if steady >= round(SETTLE_STEADY / SETTLE_POLL):
                return state, time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                self.check_workers()
                raise TimeoutError(f"the jobs did not settle asleep within {timeout:g} s: {state}")
            last = state
            time.sleep(SETTLE_POLL)
