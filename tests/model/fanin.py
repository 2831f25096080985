"""The reference model of workflows (docs/workflows.md): a group of steps with a
callback, or a chain, whose steps are jobs of the model's queues; each submission a
run of its own; completions counted once, a callback started once, the policy "fail"
on a death, a cancel; steps in another Redis Cluster slot reached through outbox
entries delivered at least once. Plain Python, no IO.

The outboxes are modelled by the entries they hold: the model writes each entry when
the documents (and docs/design.md's script contracts) say one is written, and applies
it when a courier delivers it, as often as it is delivered. Each order must be
idempotent in the model too: a completion counts by membership, a start by its number
(per sending and target queue), a stop finds the step's link gone.

| entry | written by | orders |
|---|---|---|
| ``C`` | a step's queue (its release) | a completion for the run's home |
| ``D`` | a step's queue (any other end) | a death: the policy decides |
| ``S`` | the home (a start) | start steps in a queue of another slot, numbered |
| ``Q`` | the home (a stop) | consume the starts still on their way there (numbered) |
| ``X``, ``K`` | the home (a stop) | once its ``Q`` was applied, stop steps there (``K``: |
| | | flag the running ones too) |
| ``E`` | the home (a stop) | the next chunk of the stop (STOP_CHUNK steps a call) |
| ``R`` | the home (a start) | the next first steps (CHUNK_BYTES of payload a call) |
| ``F`` | the home (a fire) | the next results of a group (CHUNK_BYTES a call) |
| ``P`` | a shard (RateLimited) | pause another shard of the queue |
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from model.reference import (
    ACTIVE,
    CANCELLED,
    COMPLETED,
    DELAYED,
    PENDING,
    EnqueueM,
    JobM,
    ModelError,
    Ops,
)

Ident = tuple[Any, ...]  # an outbox entry: its kind and what it orders
STOP_CHUNK = 50  # steps looked at per call of a stop (durq.protocol.workflows)
START_CHUNK = 100  # steps per start entry
CHUNK_BYTES = 262_144  # payload started, results gathered, per call (lib/workflows/fan_in.lua)
BARRIER = 2  # the node of the group of a 'group' run: chain(group(members), callback)


@dataclass
class NodeM:
    n: int
    unit: str
    job_id: str
    group: str = ""
    parked: bool = True  # its parked spec is stored: no start consumed it yet
    linked: bool = False  # its job exists and reports to its run
    done: bool = False  # its completion counted
    passed: bool = False  # a stop of its run found it without a job (not started yet)
    size: int = 0  # its payload's bytes, about
    result: int = 0  # the bytes of its result, once it completed


@dataclass
class RunM:
    """One submission of a workflow id (its run)."""

    wid: str
    run: str
    home: str
    kind: str  # 'group' (members, then the callback) or 'chain'
    leaves: list[int]
    nodes: dict[int, NodeM]
    state: str = "running"
    ended_at: int = 0
    open: int = 0  # the group's members not counted yet
    #: target unit -> (sender unit, number) of the start entries sent there
    sent: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    q: dict[str, int] = field(default_factory=dict)  # target unit -> its consume's number
    cursor: int | None = 0  # where starting its first steps continues (None: done)
    gather: int | None = None  # where gathering its group's results continues
    stop: str = ""  # 'X' (failed) or 'K' (cancelled) once it stops
    x: int = 0  # the next chunk of its stop
    structure: bool = True  # its structure is stored
    heavy: bool = False  # large arguments and results: starts and gathers take two calls

    @property
    def sid(self) -> str:
        return f"{self.wid}.{self.run}"

    def first(self) -> list[int]:
        return self.leaves[:1] if self.kind == "chain" else self.leaves[:-1]

    def units(self) -> list[str]:
        """Its steps' queues, in the order of their first step (the 'P' field)."""
        return list(dict.fromkeys(self.nodes[n].unit for n in self.leaves))

    def chunks(self) -> list[tuple[str, bool, list[int]]]:
        """What its stop goes through: per queue, chunks of STOP_CHUNK steps (unit,
        whether it is that queue's last, its steps) (compile_workflow's Q<k>)."""
        out = []
        for unit in self.units():
            mine = [n for n in self.leaves if self.nodes[n].unit == unit]
            for i in range(0, len(mine), STOP_CHUNK):
                out.append((unit, i + STOP_CHUNK >= len(mine), mine[i : i + STOP_CHUNK]))
        return out


@dataclass
class Workflows:
    """Every run of one example, the outbox entries written and not released yet, the
    numbering of start entries and the stop guards."""

    units: dict[str, Ops]
    slot_of: dict[str, str]  # unit -> its hash tag
    ttl: int
    by_id: dict[str, RunM] = field(default_factory=dict)  # the latest run of each id
    runs: dict[tuple[str, str], RunM] = field(default_factory=dict)
    step_of: dict[tuple[str, str], tuple[RunM, int]] = field(default_factory=dict)
    outbox: dict[str, Counter[Ident]] = field(default_factory=dict)  # owner -> entries
    last_seq: Counter[tuple[str, str]] = field(default_factory=Counter)  # (sender, target)
    seen: dict[tuple[str, str], set[int]] = field(default_factory=dict)  # (target, sender)
    guards: dict[str, dict[str, str]] = field(default_factory=dict)  # unit -> sid -> kind
    count: dict[str, Counter[str]] = field(default_factory=dict)  # home -> wf counters
    delivered: Counter[str] = field(default_factory=Counter)  # entry kind -> deliveries

    def __post_init__(self) -> None:
        for name, unit in self.units.items():
            unit.on_end = self._hook(name)
            unit.guard = self._guard(name)
            unit.on_guard = self._guarded(name)

    def _hook(self, unit: str) -> Any:
        return lambda job, state, now: self.ended(unit, job, state, now)

    def _guard(self, unit: str) -> Any:
        def guard(job: JobM) -> str | None:
            found = self.step_of.get((unit, job.id))
            if found is None or not found[0].nodes[found[1]].linked:
                return None
            return self.guards.get(unit, {}).get(found[0].sid)

        return guard

    def _guarded(self, unit: str) -> Any:
        def unlink(job: JobM) -> None:
            run, n = self.step_of[(unit, job.id)]
            run.nodes[n].linked = False
            job.must_cancel = True
            if self.guards[unit][run.sid] == "X":
                self.units[unit].count["wf_steps_cancelled"] += 1

        return unlink

    # -- entries -----------------------------------------------------------------------

    def heavy(self, unit: str, job_id: str) -> bool:
        """Whether ``job_id`` is a step of a heavy run (its result is large)."""
        found = self.step_of.get((unit, job_id))
        return found is not None and found[0].heavy

    def push(self, owner: str, ident: Ident) -> None:
        self.outbox.setdefault(owner, Counter())[ident] += 1
        self.delivered[f"written {ident[0]}"] += 1

    def held(self, owner: str) -> int:
        return sum(self.outbox.get(owner, Counter()).values())

    def same_slot(self, a: str, b: str) -> bool:
        return self.slot_of[a] == self.slot_of[b]

    def counters(self, home: str) -> Counter[str]:
        return self.count.setdefault(home, Counter())

    # -- submit and start --------------------------------------------------------------

    def submit(self, run: RunM, now: int) -> None:
        self.by_id[run.wid] = run
        self.runs[(run.wid, run.run)] = run
        for node in run.nodes.values():
            self.step_of[(node.unit, node.job_id)] = (run, node.n)
        if run.kind == "group":
            run.open = len(run.leaves) - 1
        self.counters(run.home)["started"] += 1
        self.start_first(run, run.home, now)

    def start_first(self, run: RunM, here: str, now: int) -> None:
        """Start its first steps (the list L0) from where the last call stopped, as many
        as CHUNK_BYTES of payload allow (the first always): the rest continues through
        an 'R' entry (wf_start with its cursor)."""
        first, i = run.first(), run.cursor
        if i is None:
            return
        taken: list[int] = []
        size = 0
        while i < len(first):
            node = run.nodes[first[i]]
            if node.parked:
                if taken and size + node.size > CHUNK_BYTES:
                    break
                size += node.size
                taken.append(first[i])
            i += 1
        self.start(run, taken, here, now)
        if i < len(first):
            run.cursor = i
            self.push(run.home, ("R", run.home, run.wid, 0, run.run))
        else:
            run.cursor = None

    def start(self, run: RunM, leaves: list[int], here: str, now: int) -> None:
        """Start ``leaves`` (their parked specs consumed) from a script of queue
        ``here``: in its slot at once, else through its outbox, one numbered 'S' entry
        per queue and START_CHUNK steps (wf_start, wf_flush)."""
        remote: dict[str, list[str]] = {}
        for n in leaves:
            node = run.nodes[n]
            if not node.parked:
                continue
            node.parked = False
            if self.same_slot(node.unit, here):
                self.create(node, now)
            else:
                remote.setdefault(node.unit, []).append(node.job_id)
        for unit, ids in remote.items():
            for i in range(0, len(ids), START_CHUNK):
                self.last_seq[(here, unit)] += 1
                seq = self.last_seq[(here, unit)]
                self.push(here, ("S", unit, here, seq, *ids[i : i + START_CHUNK]))
                run.sent.setdefault(unit, []).append((here, seq))

    def fire(self, run: RunM, here: str, now: int) -> None:
        """Its group has no open member left: gather the members' results, as many as
        CHUNK_BYTES allow (the first always), the rest through 'F' entries; then its
        callback starts (wf_fire)."""
        members, i = run.leaves[:-1], run.gather or 0
        size = 0
        while i < len(members):
            result = run.nodes[members[i]].result
            if i > (run.gather or 0) and size + result > CHUNK_BYTES:
                break
            size += result
            i += 1
        if i < len(members):
            run.gather = i
            self.push(run.home, ("F", run.home, run.wid, run.run, BARRIER))
        else:
            run.gather = None
            self.start(run, run.leaves[-1:], here, now)

    def create(self, node: NodeM, now: int) -> None:
        """Node ``node``'s job is enqueued in its queue, linked to its run."""
        unit = self.units[node.unit]
        if unit.taken(node.job_id, now) is not False:
            raise ModelError(f"step {node.job_id} starts, but its id is taken already")
        run, _ = self.step_of[(node.unit, node.job_id)]
        if node.passed:
            raise ModelError(
                f"step {node.job_id} of workflow {run.wid} ({run.state}) starts after the "
                "stop of its queue's steps passed: nothing will ever stop it (its start "
                "came later than the stop, and before the entry that consumes it)"
            )
        e = EnqueueM(node.job_id, group=node.group, max_attempts=3, origin="step")
        status, _ = unit.enqueue(e, now)
        if status != "created":
            raise ModelError(f"step {node.job_id} could not be created ({status})")
        node.linked = True

    # -- what a step's end reports -----------------------------------------------------

    def ended(self, unit: str, job: JobM, state: str, now: int) -> None:
        """Job ``job`` of ``unit`` reached a terminal state (Ops.end)."""
        found = self.step_of.get((unit, job.id))
        if found is None:
            return
        run, n = found
        node = run.nodes[n]
        if not node.linked:
            return
        node.linked = False
        if state == COMPLETED:
            node.result = job.result_size
            if self.same_slot(unit, run.home):
                self.completed(run, n, unit, now)
            else:
                self.push(unit, ("C", run.home, run.wid, n, run.run))
        else:  # dead, cancelled, expired: deaths always go through the outbox
            self.push(unit, ("D", run.home, run.wid, n, run.run))

    def current(self, run: RunM, now: int) -> bool:
        """Whether ``run``'s header is stored (it is the latest run of its id and its
        summary is kept): reports for any other run change nothing."""
        return self.by_id.get(run.wid) is run and self.summary_kept(run, now)

    def completed(self, run: RunM, n: int, here: str, now: int) -> None:
        if not self.current(run, now) or run.state != "running":
            return  # an ended run only notes it for status()
        node = run.nodes[n]
        if node.done:
            return
        node.done = True
        if n == run.leaves[-1]:
            run.state, run.ended_at, run.structure = "completed", now, False
            self.counters(run.home)["completed"] += 1
            return
        if run.kind == "chain":
            i = run.leaves.index(n)
            self.start(run, run.leaves[i + 1 : i + 2], here, now)
        else:
            run.open -= 1
            if run.open == 0:
                self.fire(run, here, now)

    def died(self, run: RunM, now: int) -> None:
        """Policy "fail": the run fails; its steps stop (running ones finish)."""
        if self.current(run, now) and run.state == "running":
            self.counters(run.home)["failed"] += 1
            self.stop(run, "failed", now)

    def cancel(self, wid: str, now: int) -> str:
        run = self.by_id.get(wid)
        if run is None or not self.summary_kept(run, now):
            return "not_found"
        if run.state != "running":
            return "finished"
        self.counters(run.home)["cancelled"] += 1
        self.stop(run, "cancelled", now)
        return "cancelled"

    # -- a stop ------------------------------------------------------------------------

    def stop(self, run: RunM, state: str, now: int) -> None:
        """The run ends early (wf_stop_begin): guards go up in the queues of the home's
        slot, its starts on their way elsewhere are consumed ('Q'), the first chunk
        stops."""
        run.state, run.ended_at = state, now
        run.stop, run.x = ("K" if state == "cancelled" else "X"), 1
        for unit in run.units():
            here = self.same_slot(unit, run.home)
            if here:
                self.guards.setdefault(unit, {})[run.sid] = run.stop
            sent = run.sent.get(unit)
            if not sent:
                continue
            if here:
                for sender, seq in sent:
                    self.seen.setdefault((unit, sender), set()).add(seq)
            else:  # numbered itself: the stop entries for that queue wait for it
                self.last_seq[(run.home, unit)] += 1
                run.q[unit] = self.last_seq[(run.home, unit)]
                self.push(run.home, ("Q", unit, run.home, run.q[unit], *sent))
        self.stop_next(run, now)

    def stop_next(self, run: RunM, now: int) -> None:
        """The next chunks of the stop, STOP_CHUNK steps a call (wf_stop_next): the
        steps that started stop in their queue (here) or through 'X'/'K' entries; the
        rest continues through an 'E' entry."""
        chunks = run.chunks()
        if not run.structure or not run.stop or run.x > len(chunks):
            return
        buckets: dict[str, tuple[list[str], list[bool]]] = {}
        k, looked = run.x, 0
        while k <= len(chunks) and looked < STOP_CHUNK:
            unit, last, leaves = chunks[k - 1]
            items, clear = buckets.setdefault(unit, ([], []))
            items += [run.nodes[n].job_id for n in leaves if not run.nodes[n].parked]
            if last and self.same_slot(unit, run.home):
                clear.append(True)
            looked += len(leaves)
            k += 1
        if k > len(chunks):
            run.structure = False
        else:
            run.x = k
            self.push(run.home, ("E", run.home, run.wid, run.run))
        for unit, (items, clear) in buckets.items():
            if self.same_slot(unit, run.home):
                for job_id in items:
                    self.stop_one(unit, job_id, run.stop, now)
                if clear:
                    self.guards.get(unit, {}).pop(run.sid, None)
            elif items:
                q = run.q.get(unit)
                self.push(run.home, (run.stop, unit, run.wid, run.home if q else "", q or "",
                                     *items))  # fmt: skip

    def stop_one(self, unit: str, job_id: str, kind: str, now: int) -> None:
        """Stop one step in its queue (wf_cancel_one): one that did not start ends
        cancelled; a running one is flagged (kind 'K') or finishes ('X')."""
        run, n = self.step_of[(unit, job_id)]
        node = run.nodes[n]
        if not node.linked:
            node.passed = node.passed or unit_job(self.units[unit], job_id) is None
            return
        job = self.units[unit].jobs[job_id]
        if job.state == ACTIVE:
            if kind == "K":
                job.cancel = job.must_cancel = True
            return
        node.linked = False
        if job.state in (PENDING, DELAYED):
            self.units[unit].cancel(job_id, now)
            if kind == "X":
                self.units[unit].count["wf_steps_cancelled"] += 1

    # -- the courier -------------------------------------------------------------------

    def waits(self, ident: Ident) -> bool:
        """Whether entry ``ident`` must wait (a stop whose consume was not applied)."""
        if ident[0] not in ("X", "K") or ident[4] == "":
            return False
        return ident[4] not in self.seen.get((ident[1], ident[3]), set())

    def deliver(self, owner: str, ident: Ident, now: int) -> None:
        """A courier of ``owner``'s outbox applies entry ``ident`` (again, maybe)."""
        if self.outbox.get(owner, Counter())[ident] <= 0:
            raise ModelError(f"the outbox of {owner} held {ident}, which nothing wrote")
        kind = ident[0]
        self.delivered[kind] += 1
        if kind in ("C", "D", "E", "R", "F"):
            self._apply_home(ident, now)
        elif kind in ("S", "Q", "X", "K"):
            self._apply_there(ident, now)
        elif kind == "P":
            unit, till = self.units[ident[1]], ident[2]
            if till > now:
                unit.flow.pause("queue", "", now, till - now)
                unit.qfan = max(unit.qfan, till)
        else:
            raise ModelError(f"an outbox entry of a kind the model does not know: {ident}")

    def _apply_home(self, ident: Ident, now: int) -> None:
        """An entry for a run's home: a completion, a death, the next chunk of a stop, a
        start or a gathering."""
        kind, home = ident[0], ident[1]
        run = self.runs.get((ident[2], ident[3] if kind in ("E", "F") else ident[-1]))
        if run is None:
            return
        if kind == "C":
            self.completed(run, ident[3], home, now)
        elif kind == "D":
            self.died(run, now)
        elif kind == "E":
            self.stop_next(run, now)
        elif self.current(run, now) and run.state == "running":
            if kind == "R":
                self.start_first(run, home, now)
            elif run.gather is not None:
                self.fire(run, home, now)

    def _apply_there(self, ident: Ident, now: int) -> None:
        """An entry for the steps' queue: a start, a consume, a stop."""
        kind, target = ident[0], ident[1]
        if kind == "S":
            seen = self.seen.setdefault((target, ident[2]), set())
            if ident[3] not in seen:
                seen.add(ident[3])
                for job_id in ident[4:]:
                    run, n = self.step_of[(target, job_id)]
                    self.create(run.nodes[n], now)
        elif kind == "Q":
            for sender, seq in (*ident[4:], (ident[2], ident[3])):
                self.seen.setdefault((target, sender), set()).add(seq)
        else:
            if self.waits(ident):
                raise ModelError(f"{ident} was applied before the consume it waits for")
            for job_id in ident[5:]:
                self.stop_one(target, job_id, kind, now)

    def released(self, owner: str, ident: Ident) -> None:
        self.outbox[owner][ident] -= 1

    def summary_kept(self, run: RunM, now: int) -> bool:
        """Whether the run's summary (its header) is still stored."""
        return run.state == "running" or now <= run.ended_at + self.ttl


def unit_job(unit: Ops, job_id: str) -> JobM | None:
    return unit.jobs.get(job_id)


__all__ = ["CANCELLED", "NodeM", "RunM", "Workflows"]
