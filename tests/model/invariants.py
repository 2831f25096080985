"""What must hold after every step, read from the server and compared with the model:

- every job is in exactly one state, the model's, and in the one structure of that
  state (ready list or priority set of its group, ``delayed``, ``active``, ``dead``),
  with the model's due time or lease deadline: no job lost, none in two states;
- each group hands its ready jobs out in the model's order;
- the counters equal the membership: ``stats()`` against what the keys hold and what
  the model counted (completed, dead-lettered, cancelled, expired, ticks fired...);
- group slots (``gactive``) equal the jobs holding one, and the dedup keys point where
  the model says;
- each named group's ready jobs (the backlog ``Queue.groups`` reports) are the
  model's (its slots, limit and weight: ``check_groups``, after the rules that change
  them);
- the schedules stored in each queue, their state and counts, are the model's.

What the documents leave open is observed rather than predicted: which doomed ready
jobs (past their expiry, or guarded by their workflow's stop) a dequeue reached on its
way (``sync_doomed``), which over-rate groups it parked (``sync_parked``), and how far
its budget of server time took its upkeep (``delayed_left``, ``follow_schedules``).
"""

from __future__ import annotations

from typing import Any

from durq.protocol import admin
from durq.protocol import schedules as ops
from durq.protocol import workflows as wf_ops
from durq.protocol.record import STATE_NAMES, parse_record
from model.fanin import Workflows
from model.periodic import Schedules
from model.reference import ACTIVE, DEAD, DELAYED, HELD, LIVE, PENDING, JobM, ModelError, Ops
from model.world import World

GROUPS = ("", "g1", "g2")
COUNTERS = (
    "enqueued", "completed", "dead_lettered", "cancelled", "expired", "superseded",
    "reclaimed", "deferred", "retried", "failed", "deduplicated", "replayed", "purged",
    "ticks_fired", "ticks_skipped", "ticks_missed",
)  # fmt: skip


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _zset(world: World, key: str) -> dict[str, int]:
    rows: Any = world.raw.zrange(key, 0, -1, withscores=True)
    return {_text(m): int(s) for m, s in rows}


def _states(found: dict[Any, bytes]) -> dict[str, str]:
    out = {}
    for job_id, raw in found.items():
        rec = parse_record(raw)
        out[_text(job_id)] = STATE_NAMES[rec.state] if rec else "unreadable"
    return out


def records(world: World, prefix: str) -> dict[str, str]:
    """Job id -> the state its record holds."""
    found: Any = world.raw.hgetall(prefix + "jobs")
    return _states(found)


def _ready_keys(prefix: str, group: str) -> tuple[str, str]:
    """Group ``group``'s FIFO list and its priority set."""
    if group:
        return f"{prefix}g:{group}", f"{prefix}gp:{group}"
    return f"{prefix}pending", f"{prefix}prio"


def ready_order(rows: Any, fifo: Any, states: dict[str, str]) -> list[str]:
    """A group's ready jobs in the order dequeue hands them out (lib/groups/pop.lua),
    from its priority set's ``rows`` and its list ``fifo``: higher priorities, the
    default list, lower priorities; stale ids left out."""
    scored = sorted((int(s), _text(i)) for i, s in rows)
    ids = [i for s, i in scored if s < 0] + [_text(i) for i in fifo]
    ids += [i for s, i in scored if s >= 0]
    seen: set[str] = set()
    out = []
    for job_id in ids:
        if states.get(job_id) == PENDING and job_id not in seen:
            seen.add(job_id)
            out.append(job_id)
    return out


def _expect(what: str, seen: Any, expected: Any, unit: str) -> None:
    if seen != expected:
        raise ModelError(f"{unit}: {what}: the server holds {seen!r}, the model {expected!r}")


def _scores(rows: Any) -> dict[str, int]:
    return {_text(m): int(s) for m, s in rows}


class Reads:
    """The reads of one check after a step, sent together: raw commands in one
    pipeline, durq's script calls (stats, outbox stats, schedule pages) in another. On
    a frozen server every round trip costs a clock read from a file (model/clock.py),
    and the check runs after every step: two round trips, not forty."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.pipe = world.raw.pipeline(transaction=False)
        self.ops: list[Any] = []
        self.raw: list[Any] = []
        self.scripts: list[Any] = []

    def command(self, name: str, *args: Any, **options: Any) -> int:
        """Queue a raw read; returns where its reply will be."""
        getattr(self.pipe, name)(*args, **options)
        return len(self.pipe) - 1

    def op(self, op: Any) -> int:
        """Queue a protocol op whose first request is a script call."""
        self.ops.append(op)
        return len(self.ops) - 1

    def send(self) -> None:
        self.raw = self.pipe.execute()
        front = next(iter(self.world.fronts.values()))  # every unit is on this server
        self.scripts = front._run_all(self.ops) if self.ops else []
        for reply in self.scripts:
            if isinstance(reply, Exception):
                raise reply


UNIT_KEYS = 7 + 2 * len(GROUPS)  # the raw reads of one unit (read_unit)
NAMED = tuple(g for g in GROUPS if g)


def read_unit(reads: Reads, unit: str) -> tuple[int, int]:
    """Queue every key of ``unit`` that check_unit compares, and its stats()."""
    keys = reads.world.fronts[unit].keys
    prefix = keys.prefix
    first = reads.command("hgetall", prefix + "jobs")
    for name in ("active", "delayed", "dead"):
        reads.command("zrange", prefix + name, 0, -1, withscores=True)
    for group in GROUPS:
        fifo_key, prio_key = _ready_keys(prefix, group)
        reads.command("zrange", prio_key, 0, -1, withscores=True)
        reads.command("lrange", fifo_key, 0, -1)
    reads.command("hgetall", prefix + "gactive")
    reads.command("hgetall", prefix + "keys")
    # the ready jobs of each named group, as Queue.groups reports them (raw: the
    # check runs after every step, and a script call costs ten reads of the clock)
    last = reads.command("zrange", prefix + "groups", 0, -1, withscores=True)
    assert last - first + 1 == UNIT_KEYS
    return first, reads.op(admin.stats(keys))


def first_ready(rows: Any, fifo: Any) -> str | None:
    """The first id a group's turn pops (lib/groups/pop.lua), stale or not: its highest
    priority, else the head of its list, else its lowest priority."""
    scored = sorted((int(s), _text(i)) for i, s in rows)
    if scored and scored[0][0] < 0:
        return scored[0][1]
    if fifo:
        return _text(fifo[0])
    return scored[0][1] if scored else None


def read_heads(world: World, unit: str) -> dict[str, str | None]:
    """Each group's first ready id (``first_ready``), read now."""
    pipe = world.raw.pipeline(transaction=False)
    prefix = world.fronts[unit].keys.prefix
    for group in GROUPS:
        fifo_key, prio_key = _ready_keys(prefix, group)
        pipe.zrange(prio_key, 0, 0, withscores=True)
        pipe.lrange(fifo_key, 0, 0)
    rows = pipe.execute()
    return {g: first_ready(rows[2 * i], rows[2 * i + 1]) for i, g in enumerate(GROUPS)}


def check_unit(reads: Reads, at: tuple[int, int], unit: str,
               m: Ops) -> dict[str, str | None]:  # fmt: skip
    """Compare ``unit`` with the model; returns each group's first ready id (stale or
    not: ``turns.Turns``)."""
    first, stats_at = at
    jobs, active, delayed, dead, *rest = reads.raw[first : first + UNIT_KEYS]
    per_group, (gactive, dedup, backlog) = rest[: 2 * len(GROUPS)], rest[2 * len(GROUPS) :]
    stats = reads.scripts[stats_at]
    states = _states(jobs)
    for job in m.jobs.values():
        if job.state in (*LIVE, DEAD, HELD):
            _expect(f"the state of {job.id}", states.get(job.id), job.state, unit)
    for job_id, state in states.items():
        if state in (*LIVE, DEAD, HELD) and (job_id not in m.jobs or m.jobs[job_id].state != state):
            known = getattr(m.jobs.get(job_id), "state", None)
            raise ModelError(f"{unit}: {job_id} is {state} on the server, {known} in the model")
    by_state = {s: {j.id: j for j in m.in_state(s)} for s in (ACTIVE, DELAYED, DEAD)}
    _expect("active leases", _scores(active),
            {i: j.deadline for i, j in by_state[ACTIVE].items()}, unit)  # fmt: skip
    _expect("delayed jobs", _scores(delayed),
            {i: j.due for i, j in by_state[DELAYED].items()}, unit)  # fmt: skip
    _expect("dead letters", set(_scores(dead)), set(by_state[DEAD]), unit)
    ready = 0
    heads: dict[str, str | None] = {}
    for i, group in enumerate(GROUPS):
        order = ready_order(per_group[2 * i], per_group[2 * i + 1], states)
        _expect(f"the ready order of group {group!r}", order,
                m.order_of(group).order(), unit)  # fmt: skip
        ready += len(order)
        heads[group] = first_ready(per_group[2 * i], per_group[2 * i + 1])
    slots = {_text(g): int(n) for g, n in gactive.items()}
    _expect("group slots", slots,
            {g: n for g in GROUPS if (n := m.slots_held(g))}, unit)  # fmt: skip
    keys = {_text(k): _text(v) for k, v in dedup.items()}
    _expect("dedup keys", keys, m.keys, unit)
    check_stats(stats, m, ready, unit)
    _expect("the named groups' ready jobs (Queue.groups)",
            {g: n for g, n in _scores(backlog).items() if n},
            {g: n for g in NAMED if (n := len(m.order_of(g)))}, unit)  # fmt: skip
    return heads


def check_groups(world: World, unit: str, m: Ops) -> None:
    """``Queue.groups``: each named group's ready jobs, slots held, limit and weight."""
    infos = world.fronts[unit].groups(names=NAMED)
    gauges = {i.name: (i.ready, i.active, i.limit, i.weight) for i in infos}
    _expect("the groups (ready, slots held, limit, weight)", gauges,
            {g: (len(m.order_of(g)), m.slots_held(g), m.glimit.get(g), m.weights.get(g))
             for g in NAMED}, unit)  # fmt: skip


def check_stats(stats: Any, m: Ops, ready: int, unit: str) -> None:
    """The counters equal the membership, and the model's counts."""
    _expect("stats().pending vs the ready jobs listed", stats.pending, ready, unit)
    sizes = (stats.pending, stats.delayed, stats.active, stats.dead)
    _expect("stats() sizes", sizes, tuple(len(m.in_state(s)) for s in (*LIVE, DEAD)), unit)
    _expect("stats().held", stats.held, len(m.in_state(HELD)), unit)
    seen = {name: getattr(stats, name) for name in COUNTERS}
    _expect("stats() counters", seen, {name: m.count[name] for name in COUNTERS}, unit)


def _marks(world: World, unit: str, name: str) -> tuple[int, int]:
    """Schedule ``name``'s watermark and catch-up mark (lib/sched_keys.lua)."""
    prefix = world.fronts[unit].keys.prefix
    wm, cu = world.raw.hmget(f"{prefix}sch:{name}", "wm", "cu")
    return int(wm or 0), int(cu or 0)


def read_schedules(reads: Reads, unit: str, model: Schedules) -> tuple[int, int]:
    keys = reads.world.fronts[unit].keys
    first = len(reads.pipe)
    for name in model.by_name:
        reads.command("hmget", f"{keys.prefix}sch:{name}", "wm", "cu")
    return first, reads.op(ops.list_page(keys, 0, 100))


def check_schedules(reads: Reads, at: tuple[int, int], unit: str, model: Schedules) -> None:
    first, page_at = at
    _, stored = reads.scripts[page_at]
    seen = {s.name: (s.state == "paused", s.fired, s.skipped, s.missed) for s in stored}
    expected = {n: (s.paused, s.fired, s.skipped, s.missed) for n, s in model.by_name.items()}
    _expect("schedules (paused, fired, skipped, missed)", seen, expected, unit)
    marks = reads.raw[first : first + len(model.by_name)]
    for (name, s), (wm, cu) in zip(model.by_name.items(), marks, strict=True):
        _expect(f"schedule {name} (watermark, catch-up)", (int(wm or 0), int(cu or 0)),
                (s.wm, s.cu), unit)  # fmt: skip


def follow_schedules(
    world: World, unit: str, model: Schedules, due: list[str], now: int, max_attempts: int
) -> bool:
    """The schedules ``due`` when a dequeue began: whether it decided each (its policy
    picks the ticks that fire) and how far it fired them is read from the server (its
    budget of processor time); the model decides and fires as much. Returns whether some
    are left for another call."""
    left = False
    for name in due:
        s = model.by_name[name]
        marks = _marks(world, unit, name)
        if s.wm >= s.cu:
            if marks == (s.wm, s.cu):
                left = True  # not decided in this call: its budget was spent
                continue
            model.decide(s, now)
        model.fire_upto(s, marks[0], now, max_attempts)
        _expect(f"schedule {name} (watermark, catch-up) after a dequeue", marks, (s.wm, s.cu),
                unit)  # fmt: skip
        left = left or s.wm < s.cu
    return left


def delayed_left(world: World, unit: str, now: int) -> set[str]:
    """The delayed jobs due at ``now`` that a dequeue left for another call."""
    key = world.fronts[unit].keys.prefix + "delayed"
    return {_text(i) for i in world.raw.zrangebyscore(key, "-inf", now)}


def sync_doomed(world: World, unit: str, m: Ops, now: int) -> None:
    """Doomed ready jobs (past their expiry, or guarded by their workflow's stop) end
    when a dequeue reaches them, which may be on its way to another group's job: read
    which ended."""
    doomed = [j for j in m.in_state(PENDING) if m.doomed(j, now)]
    if not doomed:
        return
    states = records(world, world.fronts[unit].keys.prefix)
    for job in doomed:
        if states.get(job.id) in ("expired", "cancelled"):
            m.doom_reached(job, now)


def sync_parked(world: World, unit: str, m: Ops) -> None:
    """The groups dequeue parked (over their rate when it reached them): once one was,
    the queue looks at every group's limiter (lib/limits/park.lua 'parks') until every limit is
    removed."""
    m.flow.park = _zset(world, world.fronts[unit].keys.prefix + "park")
    m.flow.parks = m.flow.parks or bool(m.flow.park)


def sync_woken(world: World, unit: str, m: Ops, woken: list[JobM]) -> None:
    """Jobs of one group (priority 0) that one signal woke are all at its list's head,
    in the order the server woke them (the documents leave it open): read it."""
    for group in {j.group for j in woken if j.prio == 0}:
        ids = [j.id for j in woken if j.group == group and j.prio == 0]
        if len(ids) < 2:
            continue
        order = m.order_of(group)
        head = order.fifo[: len(ids)]
        raw: Any = world.raw.lrange(_ready_keys(world.fronts[unit].keys.prefix, group)[0],
                                    0, len(ids) - 1)  # fmt: skip
        seen = [_text(i) for i in raw]
        if sorted(seen) != sorted(head) or sorted(head) != sorted(ids):
            raise ModelError(f"{unit}: a signal woke {ids} of group {group!r}; the head of "
                             f"its list is {seen}, the model's {head}")  # fmt: skip
        order.fifo[: len(ids)] = seen


def debounce_start_before_expiry(world: World, unit: str, job: JobM) -> None:
    """An update of a debounced job never moves its start past its expiry: its burst's
    newest arguments must run (docs/job-control.md), or the enqueue be refused."""
    due = world.raw.zscore(world.fronts[unit].keys.prefix + "delayed", job.id)
    if due is not None and job.expires is not None and due > job.expires:
        raise ModelError(
            f"{unit}: debounced {job.id} was moved to start at {int(due)}, after its "
            f"expiry at {job.expires}: the burst's newest arguments will never run"
        )


def read_workflows(reads: Reads, workflows: Workflows) -> tuple[int, list[int]]:
    fronts = reads.world.fronts
    first = len(reads.pipe)
    for run in workflows.by_id.values():
        reads.command("hmget", f"{fronts[run.home].keys.prefix}wf:{run.wid}", "state", "run")
    for front in fronts.values():
        reads.command("hkeys", front.keys.prefix + "wfx")
        reads.command("hmget", front.keys.prefix + "stats",
                      *(f"wf_{n}" for n in wf_ops.COUNTERS))  # fmt: skip
    return first, [reads.op(admin.outbox_stats(front.keys)) for front in fronts.values()]


def check_workflows(
    reads: Reads, at: tuple[int, list[int]], workflows: Workflows, now: int
) -> None:
    """Each workflow's state and run are the model's while its summary is kept
    (result_ttl after it ended), and gone after; each outbox holds the entries not
    released yet; the workflow counters of each home are the model's; the stop guards
    up are the model's."""
    first, outbox_at = at
    runs = len(workflows.by_id)
    replies = reads.raw[first : first + runs + 2 * len(reads.world.fronts)]
    for run, (state, tag) in zip(workflows.by_id.values(), replies, strict=False):
        if workflows.summary_kept(run, now):
            _expect(f"the state and run of workflow {run.wid}",
                    (state and _text(state), tag and _text(tag)), (run.state, run.run),
                    run.home)  # fmt: skip
        else:
            _expect(f"workflow {run.wid}, {now - run.ended_at} ms after it ended", state, None,
                    run.home)  # fmt: skip
    for i, unit in enumerate(reads.world.fronts):
        found, values = replies[runs + 2 * i], replies[runs + 2 * i + 1]
        stats = reads.scripts[outbox_at[i]]
        held = stats.pending + stats.delayed + stats.active
        _expect("outbox entries not released", held, workflows.held(unit), unit)
        guards = {_text(k) for k in found}
        _expect("workflow stop guards", guards, set(workflows.guards.get(unit, {})), unit)
        counters = {n: int(v or 0) for n, v in zip(wf_ops.COUNTERS, values, strict=True)}
        expected = workflows.counters(unit)
        _expect("workflow counters", counters,
                {n: expected[n] if n != "steps_cancelled" else
                 workflows.units[unit].count["wf_steps_cancelled"] for n in counters},
                unit)  # fmt: skip
