"""Workflows as IO-free operations: compile a tree of steps into the arguments of
``workflow_submit.lua``, deliver outbox entries, read a workflow's status.

A workflow is a tree: steps (task calls) are the leaves, groups run their children in
parallel and chains one after another. Compiling numbers the nodes depth first (1, 2,
...), gives each node its *target* (what happens when it completes: count as a member
of the enclosing group's barrier, start the next element of the enclosing chain, or end
the workflow) and parks every step that does not start at once, with its payload split
around the place where its input goes. The engine that runs it is in Lua
(``lua/lib/workflows/fan_in.lua``); this module only prepares and reads.

Each submission draws a *run* tag: the steps' job ids are ``<workflow id>.<run>.<node>``
and the workflow's structure lives under keys named by the run, so a workflow id
submitted again once its summary expired starts afresh, whatever its earlier steps left.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import orjson

from durq import lua
from durq.errors import InvalidArgument
from durq.keys import (
    QueueKeys,
    vector_of,
    workflow_done_key,
    workflow_key,
    workflow_structure_key,
)
from durq.models import StepInfo, WorkflowInfo
from durq.protocol.calls import Arg, Command, Op, Pipeline, ScriptCall
from durq.protocol.record import STATE_NAMES, parse_record
from durq.protocol.status import Status

__all__ = [
    "MAX_NODES",
    "POLICIES",
    "ChainSpec",
    "Compiled",
    "GroupSpec",
    "NodeSpec",
    "StepSpec",
    "cancel",
    "compile_workflow",
    "counters",
    "deliver_call",
    "entry_target",
    "exists",
    "info",
    "new_run",
    "running",
    "send_submission",
    "step_job_id",
    "submit",
]

POLICIES = ("fail", "ignore", "wait")
MAX_NODES = 100_000
# Work per script call, so that none runs long at MAX_NODES (lua/lib/workflows/fan_in.lua, which
# has the same numbers): steps started, results gathered when a group fires, steps
# stopped when a workflow fails or is cancelled.
START_CHUNK = 100
FIRE_CHUNK = 500
STOP_CHUNK = 50
_STAGE_FIELDS = 1000  # structure fields per HSET of a submission
_READ_FIELDS = 100  # fields per HMGET of status()
_PART = 100  # items per field of a long list of the structure (lua/lib/workflows/fan_in.lua)
_PLAN_BYTES = 262_144  # bytes of the plan per field
_STAGE_TTL_MS = 600_000
_SEP = b"\0"


def new_run() -> str:
    """A submission's run tag: 8 hex characters (see the module's docstring)."""
    return secrets.token_hex(4)


def step_job_id(workflow_id: str, run: str, node: int) -> str:
    """The job id of node ``node`` of run ``run`` of workflow ``workflow_id`` (a
    workflow of durq 0.1.0 has no run: ``<workflow id>.<node>``)."""
    if not run:
        return f"{workflow_id}.{node}"
    return f"{workflow_id}.{run}.{node}"


@dataclass(frozen=True)
class StepSpec:
    """One task call of a workflow, ready to be stored.

    ``payload`` is the job payload (JSON) when the step gets no input; a step that gets
    one (``mutable``) is ``head + input + tail``."""

    queue: str
    prefix: str
    task: str
    payload: bytes
    head: bytes
    tail: bytes
    mutable: bool
    group: str = ""
    priority: int = 0
    max_attempts: int = 5
    delay_ms: int = 0
    expires: str = ""  # "" | "in:<ms after the step's start>" | "at:<epoch ms>"


@dataclass(frozen=True)
class GroupSpec:
    """Children run in parallel; the result is the list of their results, in order."""

    children: tuple[NodeSpec, ...]


@dataclass(frozen=True)
class ChainSpec:
    """Children run one after another; each gets the previous one's result."""

    children: tuple[NodeSpec, ...]


NodeSpec: TypeAlias = StepSpec | GroupSpec | ChainSpec


@dataclass
class Compiled:
    """The arguments of workflow_submit.lua, and what the client needs to know."""

    home: str  # the home queue's prefix
    home_queue: str
    plan: Any
    fields: list[tuple[str, Arg]] = field(default_factory=list)
    by_queue: dict[str, list[int]] = field(default_factory=dict)
    first: list[int] = field(default_factory=list)  # the steps that start at once
    steps: int = 0


def _flatten(node: NodeSpec) -> NodeSpec:
    """Chains inside chains are one chain; a chain of one element is that element."""
    if isinstance(node, StepSpec):
        return node
    children = tuple(_flatten(c) for c in node.children)
    if isinstance(node, ChainSpec):
        flat: list[NodeSpec] = []
        for c in children:
            flat.extend(c.children if isinstance(c, ChainSpec) else (c,))
        return flat[0] if len(flat) == 1 else ChainSpec(tuple(flat))
    return GroupSpec(children)


def _home(steps: list[StepSpec]) -> StepSpec:
    """The home of a workflow: a queue of the slot (hash tag) that holds most of its
    steps, so that most completions count in one script, without the outbox."""
    tags = Counter(s.prefix.partition("{")[2].partition("}")[0] for s in steps)
    best = max(tags.values())
    return next(s for s in steps if tags[s.prefix.partition("{")[2].partition("}")[0]] == best)


def _leaves(node: NodeSpec, out: list[StepSpec]) -> list[StepSpec]:
    if isinstance(node, StepSpec):
        out.append(node)
    else:
        for c in node.children:
            _leaves(c, out)
    return out


def _parts(name: str, items: list[int]) -> list[tuple[str, Arg]]:
    """A list the engine walks with a cursor, in fields of at most _PART items
    (``name``, ``name:2``, ...): a call reads the part it needs, never the whole list."""
    return [
        (name if i == 0 else f"{name}:{i // _PART + 1}", ",".join(map(str, items[i : i + _PART])))
        for i in range(0, len(items), _PART)
    ]


def compile_workflow(root: NodeSpec, home: QueueKeys | None = None) -> Compiled:
    """Number the nodes, assign targets, park what does not start at once. ``home``:
    the queue the workflow lives in (default: one of the slot holding most steps)."""
    root = _flatten(root)
    steps = _leaves(root, [])
    if len(steps) > MAX_NODES:
        raise InvalidArgument(f"a workflow has at most {MAX_NODES} steps, not {len(steps)}")
    if home is None:
        most = _home(steps)
        out = Compiled(home=most.prefix, home_queue=most.queue, plan=None)
    else:
        out = Compiled(home=home.prefix, home_queue=home.name, plan=None)
    counter = [0]

    def walk(node: NodeSpec, later: bool) -> tuple[int, list[int], Any]:
        """Number ``node`` and its descendants; returns the index of the node whose
        completion is ``node``'s (a chain's is its last element's), the leaves that
        start it, and its plan. The caller sets that node's target."""
        counter[0] += 1
        n = counter[0]
        if isinstance(node, StepSpec):
            out.by_queue.setdefault(node.prefix, []).append(n)
            out.steps += 1
            # every step is parked; those that start later get the input (if mutable)
            mutable = later and node.mutable
            spec = _SEP.join(
                (
                    node.prefix.encode(), node.group.encode(), b"%d" % node.priority,
                    b"%d" % node.max_attempts, b"%d" % node.delay_ms,
                    b"1" if mutable else b"0",
                    node.head if mutable else node.payload,
                    node.tail if mutable else b"",
                    node.expires.encode(),
                )
            )  # fmt: skip
            out.fields.append((f"p{n}", spec))
            plan = {"k": "step", "n": n, "task": node.task, "queue": node.queue, "p": node.prefix}
            return n, [n], plan
        if isinstance(node, GroupSpec):
            members: list[int] = []
            starts: list[int] = []
            plans = []
            for child in node.children:
                done, first, plan = walk(child, later)
                out.fields.append((f"t{done}", f"m:{n}"))
                members.append(done)
                starts.extend(first)
                plans.append(plan)
            out.fields += _parts(f"B{n}", members)
            out.fields.append((f"N{n}", len(members)))
            out.fields += _parts(f"L{n}", starts)
            return n, starts, {"k": "group", "n": n, "c": plans}
        # a chain (numbered, though no field names it): element i completes into the
        # start of element i + 1, which is that element's own node (a step, or a group
        # whose L field lists its leaves: chains in chains were flattened)
        walked = [walk(child, later or i > 0) for i, child in enumerate(node.children)]
        for (done, _, _), (nxt, _, _) in itertools.pairwise(walked):
            out.fields.append((f"t{done}", f"s:{nxt}"))
        return walked[-1][0], walked[0][1], {"k": "chain", "n": n, "c": [w[2] for w in walked]}

    done, out.first, out.plan = walk(root, False)
    out.fields.append((f"t{done}", "e"))
    out.fields += _parts("L0", out.first)  # started by the submit
    # what stopping it (a failure, a cancel) goes through, STOP_CHUNK steps per call:
    # Q<k> = prefix, whether it is that queue's last chunk, its steps; P the queues
    chunks: list[bytes] = []
    for prefix, leaves in out.by_queue.items():
        for i in range(0, len(leaves), STOP_CHUNK):
            last = b"1" if i + STOP_CHUNK >= len(leaves) else b"0"
            part = ",".join(map(str, leaves[i : i + STOP_CHUNK])).encode()
            chunks.append(_SEP.join((prefix.encode(), last, part)))
    out.fields += [(f"Q{k}", chunk) for k, chunk in enumerate(chunks, 1)]
    out.fields.append(("Q", len(chunks)))
    out.fields.append(("P", _SEP.join(p.encode() for p in out.by_queue)))
    return out


def submit(
    home: QueueKeys, workflow_id: str, run: str, policy: str, ttl_ms: int, compiled: Compiled
) -> Op[tuple[bool, str]]:
    """Create the workflow, in one round trip to its home slot: HSETs of its header and
    structure into staging keys, the commit (workflow_submit.lua), then one call per
    further START_CHUNK first steps. Returns (created, run): created False when a
    workflow with this id exists already (nothing changed; run is that one's)."""
    if policy not in POLICIES:
        raise InvalidArgument(f"on_failure must be one of {', '.join(POLICIES)}, not {policy!r}")
    staged = f"{home.prefix}wfn:{os.urandom(6).hex()}"  # this submission's own
    head, body = f"{staged}:h", f"{staged}:s"
    # the plan (status' view of the structure), in fields of at most _PLAN_BYTES: no
    # command reads or writes much at once
    plan = orjson.dumps(compiled.plan)
    parts = [plan[i : i + _PLAN_BYTES] for i in range(0, len(plan), _PLAN_BYTES)]
    calls: list[ScriptCall | Command] = [
        Command(("HSET", head, "plan", parts[0], "plans", len(parts))),
        Command(("PEXPIRE", head, _STAGE_TTL_MS)),
    ]
    calls += [Command(("HSET", head, f"plan{i}", part)) for i, part in enumerate(parts[1:], 2)]
    for i in range(0, len(compiled.fields), _STAGE_FIELDS):
        chunk = compiled.fields[i : i + _STAGE_FIELDS]
        calls.append(Command(("HSET", body, *(v for pair in chunk for v in pair))))
        if not i:  # a client dying before the commit leaves nothing that stays
            calls.append(Command(("PEXPIRE", body, _STAGE_TTL_MS)))
    args: list[Arg] = [workflow_id, policy, ttl_ms, run, head, body]
    calls.append(ScriptCall(lua.load("workflow_submit"), home.vector, args))
    return (yield from send_submission(home, workflow_id, run, calls, compiled))


def send_submission(
    home: QueueKeys,
    workflow_id: str,
    run: str,
    calls: list[ScriptCall | Command],
    compiled: Compiled,
) -> Op[tuple[bool, str]]:
    """Send a submission's ``calls`` (the staging, then the commit, last) in one round
    trip, with one call per further START_CHUNK first steps; (created, run) from the
    commit's reply (``submit``, ``workflows_legacy.submit_legacy``)."""
    commit = len(calls) - 1
    # the rest of the first steps, in calls of their own (no script runs long); if this
    # client dies before they ran, the outbox entry the submit wrote continues them
    resume = _SEP.join((b"R", home.prefix.encode(), workflow_id.encode(), b"0", b"0", run.encode()))
    more = (len(compiled.first) - 1) // START_CHUNK
    calls = [*calls, *(deliver_call(resume) for _ in range(more))]
    replies = yield Pipeline(tuple(calls))
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    status, used = replies[commit]
    return Status(status) is Status.CREATED, used.decode()


def exists(home: QueueKeys, workflow_id: str) -> Op[bool]:
    """True when home queue ``home`` holds workflow ``workflow_id`` (running, or ended
    and its summary kept)."""
    reply = yield Command(("EXISTS", workflow_key(home.prefix, workflow_id)))
    return bool(reply)


def cancel(home: QueueKeys, workflow_id: str) -> Op[tuple[Status, str | None]]:
    """Cancel workflow ``workflow_id`` of home queue ``home`` (workflow_cancel.lua):
    (CANCELLED, "cancelled") when it was running and ended now; (FINISHED, its state)
    when it had ended; (NOT_FOUND, None) when it is unknown or its summary expired."""
    reply = yield ScriptCall(lua.load("workflow_cancel"), home.vector, (workflow_id,))
    status = Status(reply[0])
    return status, (reply[1].decode() if reply[1] else None)


def entry_target(entry: bytes) -> str:
    """The prefix of the queue an outbox entry is for (its second field)."""
    parts = entry.split(_SEP, 2)
    if len(parts) < 3:
        raise ValueError("not a workflow outbox entry")
    return parts[1].decode()


def deliver_call(entry: bytes) -> ScriptCall:
    """The script call that applies outbox ``entry`` in its target slot."""
    return ScriptCall(lua.load("workflow_deliver"), vector_of(entry_target(entry)), (entry,))


# -- reading ------------------------------------------------------------------------


def _walk_steps(plan: Any, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if plan.get("k") == "step":
        out.append(plan)
    for child in plan.get("c", ()):
        _walk_steps(child, out)
    return out


def _bars(plan: Any, out: list[int]) -> list[int]:
    if plan.get("k") == "group":
        out.append(plan["n"])
    for child in plan.get("c", ()):
        _bars(child, out)
    return out


def info(home: QueueKeys, workflow_id: str) -> Op[WorkflowInfo | None]:
    """Read workflow ``workflow_id`` of home queue ``home`` (None if unknown or expired):
    a few round trips to its home (commands of at most a thousand fields each), then
    one per queue of its steps."""
    wk = workflow_key(home.prefix, workflow_id)
    head = yield Command(
        ("HMGET", wk, "state", "policy", "created", "finished", "error", "plan", "run", "plans")
    )
    if head[0] is None:
        return None
    more = [f"plan{i}" for i in range(2, int(head[7] or 1) + 1)]
    rest = yield from _chunked(("HMGET", wk), more, 1)
    plan = orjson.loads(b"".join([head[5] or b"{}", *rest]))
    leaves = _walk_steps(plan, [])
    state = head[0].decode()
    run = (head[6] or b"").decode()
    parked: list[Any] = [None] * len(leaves)
    dead: dict[int, Any] = {}
    open_counts: dict[int, int] = {}
    done: list[bool] = [False] * len(leaves)
    if state == "running" and leaves:
        ws = workflow_structure_key(home.prefix, workflow_id, run)
        parked, dead, open_counts = yield from _progress(ws, leaves, _bars(plan, []))
    if state != "completed" and leaves:
        # a step without a record completed (and counted), or did not (yet)
        wd = workflow_done_key(home.prefix, workflow_id, run)
        nodes = [str(s["n"]) for s in leaves]
        done = [bool(x) for x in (yield from _chunked(("SMISMEMBER", wd), nodes))]
    ids = [step_job_id(workflow_id, run, s["n"]) for s in leaves]
    states = yield from _step_states(ids, leaves, parked, done, state)
    return WorkflowInfo(
        id=workflow_id,
        queue=home.name,
        state=state,
        policy=(head[1] or b"fail").decode(),
        created_at=int(head[2] or 0) / 1000,
        finished_at=int(head[3]) / 1000 if head[3] else None,
        error=orjson.loads(head[4]) if head[4] else None,
        steps=[
            StepInfo(s["n"], s["task"], s["queue"], ids[i], states[i]) for i, s in enumerate(leaves)
        ],
        waiting_on=open_counts,
        dead=dead,
        plan=plan,
        run=run,
    )


def _chunked(command: tuple[str, ...], args: list[str], size: int = _READ_FIELDS) -> Op[list[Any]]:
    """``command`` with ``args`` appended, in pipelined commands of at most ``size``
    arguments each (no one command runs long); the replies joined."""
    calls = tuple(Command((*command, *args[i : i + size])) for i in range(0, len(args), size))
    if not calls:
        return []
    replies = yield Pipeline(calls)
    out: list[Any] = []
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
        out.extend(reply)
    return out


def _progress(
    ws: str, leaves: list[dict[str, Any]], bars: list[int]
) -> Op[tuple[list[Any], dict[int, Any], dict[int, int]]]:
    """A running workflow's parked steps, dead steps waited for, open barriers."""
    fields = [f"p{s['n']}" for s in leaves] + [f"w{s['n']}" for s in leaves]
    fields += [f"N{b}" for b in bars]
    values = yield from _chunked(("HMGET", ws), fields)
    n = len(leaves)
    dead = {
        s["n"]: orjson.loads(reason)
        for s, reason in zip(leaves, values[n : 2 * n], strict=True)
        if reason is not None
    }
    open_counts = {b: int(v) for b, v in zip(bars, values[2 * n :], strict=True) if v and int(v)}
    # a parked spec is only tested for presence: its payload is not kept
    return [v is not None or None for v in values[:n]], dead, open_counts


def _step_states(
    ids: list[str], leaves: list[dict[str, Any]], parked: list[Any], done: list[bool], state: str
) -> Op[list[str]]:
    """Each step's state: from its job record, a few requests per queue (one slot
    each). A step with neither record nor parked spec finished (its record is gone) if
    it counted; if not: its workflow ended early and it never ran (``cancelled``), or
    the workflow runs and its start is on its way to its queue (``starting``), unless
    its tombstone says it finished (its completion is then on its way back)."""
    by_queue: dict[str, list[int]] = {}
    for i, s in enumerate(leaves):
        by_queue.setdefault(s["p"], []).append(i)
    gone = {"running": "starting", "completed": "done"}.get(state, "cancelled")
    states: list[str] = [gone] * len(leaves)
    for prefix, indexes in by_queue.items():
        records = yield from _chunked(("HMGET", prefix + "jobs"), [ids[i] for i in indexes])
        unknown: list[int] = []
        for i, raw in zip(indexes, records, strict=True):
            rec = parse_record(raw, errors="replace") if raw is not None else None
            if parked[i] is not None:
                states[i] = "waiting"
            elif rec is not None:
                # a step cancelled by its failed workflow in an earlier version ended
                # superseded (its record stays for the dedup window): cancelled all the same
                name = STATE_NAMES[rec.state]
                states[i] = "cancelled" if name == "superseded" else name
            elif done[i]:
                states[i] = "done"
            elif state == "running":
                unknown.append(i)
        if unknown:
            tombs = yield from _chunked(("ZMSCORE", prefix + "done"), [ids[i] for i in unknown])
            for i, tomb in zip(unknown, tombs, strict=True):
                if tomb is not None:
                    states[i] = "done"
    return states


def running(home: QueueKeys, limit: int = 100) -> Op[list[tuple[str, float]]]:
    """The running workflows of home queue ``home``, oldest first: (id, started at)."""
    reply = yield Command(("ZRANGE", home.prefix + "wfr", 0, limit - 1, "WITHSCORES"))
    return [(reply[i].decode(), float(reply[i + 1]) / 1000) for i in range(0, len(reply), 2)]


COUNTERS = ("started", "completed", "failed", "cancelled", "steps_cancelled")
"""The workflow counters the scripts keep in a queue's stats hash, as ``wf_<name>``."""


def counters(home: QueueKeys) -> Op[dict[str, int]]:
    """The queue's workflow counters (``COUNTERS``): workflows started, completed and
    failed with this queue as their home, and steps cancelled because theirs failed."""
    reply = yield Command(("HMGET", home.prefix + "stats", *(f"wf_{n}" for n in COUNTERS)))
    return {n: int(v or 0) for n, v in zip(COUNTERS, reply, strict=True)}
