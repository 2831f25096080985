"""Known bugs the model finds, each behind a named switch so that CI stays green until
its fix merges. While a name is in KNOWN_BUGS the driver never makes its trigger; once
the fix is in, delete the name from KNOWN_BUGS (nothing else), and the model drives
that crossing too.

``DURQ_MODEL_BUGS`` overrides the set for one run: ``none`` (every trigger on: the run
must find the bugs), or a comma list of the names to keep gated.
"""

from __future__ import annotations

import os

KNOWN_BUGS: set[str] = {
    "ratelimited-undoes-cancel",  # issue 30, bug 1
    "workflow-cancel-strands-group",  # bug 2
    "workflow-resubmit-hangs",  # bug 3
    "callback-twice-after-courier-crash",  # bug 4
    "schedule-moved-fires-twice",  # bug 5
    "timing-change-lifts-pause",  # bug 6
    "sharded-queue-pause-one-shard",  # bug 7
    "debounce-vs-expiry",  # bug 9
    # found by the model (not in issue 30's list)
    "workflow-id-unique-per-home-only",
}
"""The gated bugs (delete a name once its fix merged): the driver avoids their triggers."""

#: every switch the driver knows -> the trigger it gates (its `gated` calls: machine.py)
TRIGGERS: dict[str, str] = {
    # 1: rate_limited.lua gives a cancelled (CANCELLING) job back to pending
    "ratelimited-undoes-cancel": "RateLimited on a job whose cancel was asked",
    # 2: lib/fan_in.lua wf_flush's cancel loop frees a group slot without offering the group
    "workflow-cancel-strands-group": "workflow steps in a group with a concurrency limit",
    # 3: workflow_submit.lua checks only the workflow's own key
    "workflow-resubmit-hangs": "submitting a workflow id again after its result_ttl",
    # 4: an 'S' outbox entry is idempotent only while the step's tombstone lasts
    "callback-twice-after-courier-crash": "an 'S' outbox entry delivered again",
    # 5: schedule_control.py reports a stored schedule only when declared nowhere
    "schedule-moved-fires-twice": "moving a schedule to another queue",
    # 6: schedule_upsert.lua resets `paused` when the timing changes
    "timing-change-lifts-pause": "changing the timing of a paused schedule",
    # 7: rate_limited.lua pauses the shard of the job only
    "sharded-queue-pause-one-shard": "RateLimited(scope='queue') on a sharded queue",
    # 9: updates of a debounced job move its start past its expiry
    "debounce-vs-expiry": "debounce together with expires",
    # found by the model: workflow_submit.lua looks for the id in the home's slot only,
    # and the home is where most steps live: the same id with steps placed elsewhere
    # (a task moved to another queue between two deploys) makes a second workflow
    "workflow-id-unique-per-home-only": "the same workflow id with its steps elsewhere",
}

ENV = "DURQ_MODEL_BUGS"


def _active() -> set[str]:
    raw = os.environ.get(ENV)
    if raw is None:
        return set(KNOWN_BUGS)
    if raw.strip().lower() == "none":
        return set()
    names = {n.strip() for n in raw.split(",") if n.strip()}
    unknown = names - set(TRIGGERS)
    if unknown:
        raise ValueError(f"{ENV}: unknown bug names {sorted(unknown)}; known: {sorted(TRIGGERS)}")
    return names


_ACTIVE = _active()


def gated(name: str) -> bool:
    """True while the trigger of known bug ``name`` must be avoided."""
    if name not in TRIGGERS:
        raise KeyError(name)
    return name in _ACTIVE
