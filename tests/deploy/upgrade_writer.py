"""Enqueue jobs of every kind into the upgrade test's queues, with whichever durq runs
this module (the previous release, or this tree), and write what each should give to a
JSON file: ``python -m deploy.upgrade_writer OUT.json [--base N]``.

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
from deploy.upgrade_app import QA, QB, add, app, doomed, double, flaky, mark, mark_b, total

PLAIN, DELAYED, GROUPED, PRIO, KEYED, EXPIRING, FLAKY, DOOMED = (
    0,
    400,
    500,
    600,
    700,
    800,
    900,
    1000,
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
    workflows = []
    for i in range(10):
        x = base + i
        handle = durq.chain(add.s(x, 1), double.s(), add.s(100)).enqueue()
        workflows.append({"id": handle.id, "queue": handle.queue, "result": (x + 1) * 2 + 100})
    for _ in range(5):
        handle = durq.group([double.s(j) for j in range(6)]).then(total.s()).enqueue()
        workflows.append({"id": handle.id, "queue": handle.queue, "result": 30})
    return {
        "seqs": seqs,
        "doomed": [base + DOOMED + i for i in range(10)],
        "group_order": order,
        "workflows": workflows,
    }


def main() -> None:
    out = sys.argv[1]
    base = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    expected = write(base)
    expected["version"] = durq.__version__
    with open(out, "w") as f:
        json.dump(expected, f)
    app.close()


if __name__ == "__main__":
    main()
