"""Enqueue jobs of every kind into the upgrade test's queues, with whichever durq runs
this module (the previous release, or this tree), and write what each should give to a
JSON file: ``python -m deploy.upgrade_writer OUT.json [--base N]``; ``--workflows OUT.json
BASE`` (this tree) submits the workflows of the mixed-fleet test only.

Kinds: plain jobs, delayed ones, jobs of groups under a group limit of 1 (strict order),
prioritized, keyed and expiring jobs, jobs that fail their first attempt (their retry
waits in the delayed set), jobs dead-lettered by the previous release, chains across the
two queues' slots, groups with a callback, a rate limit on one queue; the App declares a
periodic schedule, upserted by its workers.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import durq
from deploy.upgrade_app import (
    QA,
    QB,
    QC,
    add,
    app,
    doomed,
    double,
    flaky,
    later_task,
    mark,
    mark_b,
    total,
)

PLAIN, DELAYED, GROUPED, PRIO, KEYED, EXPIRING, FLAKY, DOOMED, LATER = (
    0,
    400,
    500,
    600,
    700,
    800,
    900,
    1000,
    1100,
)
GROUPS = 5
PER_GROUP = 10


def write(base: int) -> dict[str, Any]:
    """Enqueue everything (seqs offset by ``base``); returns the expectations."""
    qa, qb = app.queue(QA), app.queue(QB)
    qb.configure(group_limit=1)
    qa.configure(rate=durq.Rate(400, per=1.0))
    seqs: list[int] = []

    def s(n: int) -> int:
        seqs.append(base + n)
        return base + n

    for i in range(10):  # first: the previous release dead-letters them
        doomed.enqueue(s(DOOMED + i))
    mark.enqueue_many([(s(PLAIN + i), 0.05) for i in range(400)])
    for i in range(50):
        mark.options(delay=3.0).enqueue(s(DELAYED + i))
    order: dict[str, list[int]] = {}
    for i in range(GROUPS * PER_GROUP):
        group = f"g{base}-{i % GROUPS}"
        order.setdefault(group, []).append(s(GROUPED + i))
        mark_b.options(group=group).enqueue(base + GROUPED + i, 0.01)
    for i in range(30):
        mark.options(priority=(i % 5) - 2).enqueue(s(PRIO + i))
    for i in range(20):
        mark.options(key=f"k{base}-{i}").enqueue(s(KEYED + i))
    for i in range(20):
        mark.options(expires=3600.0).enqueue(s(EXPIRING + i))
    for i in range(30):
        flaky.enqueue(s(FLAKY + i))
    workflows = write_workflows(base)
    # for the queue of `later`, whose jobs the test has held by a worker of this tree that
    # lacks the task, while a worker of the previous release runs
    assert later_task is not None
    held = [
        {"seq": base + LATER + i, "id": later_task.enqueue(base + LATER + i).id} for i in range(10)
    ]
    return {
        "held": held,
        "seqs": seqs,
        "doomed": [base + DOOMED + i for i in range(10)],
        "group_order": order,
        "workflows": workflows,
    }


def write_workflows(base: int, chains: int = 10, groups: int = 5) -> list[dict[str, Any]]:
    """Chains across the two queues' slots and groups with a callback; what each gives.
    ``run``: the run tag of its submission ("" for a workflow in 0.1.0's layout, None
    for a release whose handles have none)."""
    workflows = []
    for i in range(chains):
        x = base + i
        handle = durq.chain(add.s(x, 1), double.s(), add.s(100)).enqueue()
        workflows.append({"id": handle.id, "queue": handle.queue, "result": (x + 1) * 2 + 100,
                          "nodes": 3, "run": getattr(handle, "run", None)})  # fmt: skip
    for _ in range(groups):
        handle = durq.group([double.s(j) for j in range(6)]).then(total.s()).enqueue()
        workflows.append({"id": handle.id, "queue": handle.queue, "result": 30, "nodes": 7,
                          "run": getattr(handle, "run", None)})  # fmt: skip
    return workflows


def write_fleet(base: int) -> dict[str, Any]:
    """The workflows of the mixed-fleet test (this tree's producer), and what a workflow
    that 0.1.0's layout cannot hold (a step with ``expires``) meets: the error's text, or
    its handle's run when it was submitted."""
    workflows = write_workflows(base, chains=6, groups=3)
    refused: str | None = None
    try:
        handle = durq.chain(add.s(base, 1), double.options(expires=600).s()).enqueue()
        refused = f"submitted, run {handle.run!r}"
    except durq.FleetTooOld as exc:
        refused = str(exc)
    return {"workflows": workflows, "refused": refused}


def poke(held: list[dict[str, Any]]) -> dict[str, Any]:
    """What this durq makes of held jobs: each one's state; then it cancels the first."""
    queue = app.queue(QC)
    states = [getattr(queue.job(h["id"]), "state", None) for h in held]
    (cancelled,) = queue.cancel(held[0]["id"])
    return {
        "states": [str(getattr(s, "value", s)) for s in states],
        "cancel": str(cancelled.status.value),
    }


def main() -> None:
    if sys.argv[1] == "--poke":  # --poke IN.json OUT.json
        with open(sys.argv[2]) as f:
            result = poke(json.load(f)["held"])
        with open(sys.argv[3], "w") as f:
            json.dump(result, f)
        app.close()
        return
    if sys.argv[1] == "--workflows":  # --workflows OUT.json BASE
        with open(sys.argv[2], "w") as f:
            json.dump(write_fleet(int(sys.argv[3])), f)
        app.close()
        return
    out = sys.argv[1]
    base = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    expected = write(base)
    expected["version"] = durq.__version__
    with open(out, "w") as f:
        json.dump(expected, f)
    app.close()


if __name__ == "__main__":
    main()
