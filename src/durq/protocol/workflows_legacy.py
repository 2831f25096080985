"""A workflow written in durq 0.1.0's layout (data format 1, ``durq.data_format``), for
a fleet where workers of 0.1.0 still consume its queues (``durq.app.fleet``): both
versions' workers then run its steps, this tree through ``lua/lib/workflows/legacy.lua``
and 0.1.0 through its own scripts (docs/workflows.md, "Upgrading").

The structure is the one ``compile_workflow`` makes, rewritten as 0.1.0 stored it: each
list (``L<x>``, ``B<b>``, ``L0``) in one field, a parked spec without the expiry, no open
counts (0.1.0 counts a member by taking it out of its barrier's open set), no stop
chunks (0.1.0 stops a workflow's steps from the header's ``Q``); the commit is
``workflow_submit_legacy.lua``. Its steps' ids have no run: ``<workflow id>.<node>``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import orjson

from durq import lua
from durq.keys import QueueKeys
from durq.protocol.calls import Arg, Command, Op, ScriptCall
from durq.protocol.workflows import (
    _SEP,
    _STAGE_FIELDS,
    _STAGE_TTL_MS,
    POLICIES,
    Compiled,
    send_submission,
)

__all__ = ["LEGACY_MAX_STEPS", "legacy_problems", "submit_legacy"]

# The most steps a workflow this version writes in 0.1.0's layout may have: that layout
# stops a workflow (a cancel, a failure under the policy "fail") in one call over all
# its steps, which past this size runs beyond durq's 10 ms per call
# (docs/decisions/fleet-workflows.md has the measurement).
LEGACY_MAX_STEPS = 500

_LIST = re.compile(r"^([LB]\d+)(?::\d+)?$")  # a list's part: L<x>, L<x>:2, B<b>...
_DROPPED = re.compile(r"^(N\d+|Q\d*|P)$")  # open counts, stop chunks: not in 0.1.0's


def _tasks(plan: Any, out: dict[int, str]) -> dict[int, str]:
    if plan.get("k") == "step":
        out[plan["n"]] = plan["task"]
    for child in plan.get("c", ()):
        _tasks(child, out)
    return out


def legacy_problems(compiled: Compiled) -> list[str]:
    """What of ``compiled`` 0.1.0's layout cannot hold, one line each (empty: all of
    it): a step's ``expires`` (0.1.0's steps have no expiry), more than
    ``LEGACY_MAX_STEPS`` steps (that layout stops them all in one call)."""
    tasks = _tasks(compiled.plan, {})
    problems = []
    if len(tasks) > LEGACY_MAX_STEPS:
        problems.append(
            f"{len(tasks)} steps, over the {LEGACY_MAX_STEPS} that 0.1.0's layout stops in "
            "one call within durq's 10 ms per call"
        )
    for name, value in compiled.fields:
        if name.startswith("p") and isinstance(value, bytes):
            expiry = value.rsplit(_SEP, 1)[1]
            if expiry:
                n = int(name[1:])
                problems.append(f"step {n} ({tasks.get(n, '?')}) has an expiry (expires=)")
    return problems


def _fields(compiled: Compiled) -> tuple[list[tuple[str, Arg]], list[int]]:
    """The structure's fields as 0.1.0 stored them, and its barriers."""
    out: list[tuple[str, Arg]] = []
    lists: dict[str, list[str]] = {}
    for name, value in compiled.fields:
        if _DROPPED.match(name):
            continue
        part = _LIST.match(name)
        if part:
            text = value.decode() if isinstance(value, bytes) else str(value)
            lists.setdefault(part.group(1), []).append(text)
        elif name.startswith("p") and isinstance(value, bytes):
            out.append((name, value.rsplit(_SEP, 1)[0]))  # without the expiry
        else:
            out.append((name, value))
    out += [(name, ",".join(parts)) for name, parts in lists.items()]
    bars = sorted(int(name[1:]) for name in lists if name.startswith("B"))
    return out, bars


def submit_legacy(
    home: QueueKeys, workflow_id: str, policy: str, ttl_ms: int, compiled: Compiled
) -> Op[tuple[bool, str]]:
    """``durq.protocol.workflows.submit`` in 0.1.0's layout: HSETs of the structure into
    a staging hash, the commit (``workflow_submit_legacy.lua``), then one call per
    further START_CHUNK first steps (``send_submission``). Returns (created, run): the
    run is ``""`` (none), or the existing workflow's when one has this id (created
    False, nothing changed). The caller checked ``legacy_problems``."""
    assert policy in POLICIES, policy
    fields, bars = _fields(compiled)
    staged = f"{home.prefix}wfn:{os.urandom(6).hex()}:s"  # this submission's own
    calls: list[ScriptCall | Command] = []
    for i in range(0, len(fields), _STAGE_FIELDS):
        chunk = fields[i : i + _STAGE_FIELDS]
        calls.append(Command(("HSET", staged, *(v for pair in chunk for v in pair))))
        if not i:  # a client dying before the commit leaves nothing that stays
            calls.append(Command(("PEXPIRE", staged, _STAGE_TTL_MS)))
    args: list[Arg] = [
        workflow_id,
        policy,
        ttl_ms,
        orjson.dumps(compiled.plan),
        orjson.dumps(compiled.by_queue),
        ",".join(map(str, bars)),
        staged,
    ]
    calls.append(ScriptCall(lua.load("workflow_submit_legacy"), home.vector, args))
    return (yield from send_submission(home, workflow_id, "", calls, compiled))
