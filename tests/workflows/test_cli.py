"""``durq workflow show``: a workflow by id, found among the registered queues."""

from __future__ import annotations

import durq
from worker.support import Durq, running_worker


def test_show_a_workflow(wapp: durq.App, log: str, durq_cli: Durq) -> None:
    t = wapp.tasks
    handle = (
        durq.group([t["square"].s(log, i) for i in range(3)]).then(t["collect"].s(log)).enqueue()
    )
    shown = durq_cli.run("workflow", "show", handle.id, url=wapp.url)
    assert shown.code == 0, shown
    for text in ("running", "3 pending", "1 waiting", "group 2: 3 open", "collect"):
        assert text in shown.stdout, shown
    with running_worker(wapp):
        handle.result(10)
    shown = durq_cli.run("workflow", "show", handle.id, "-q", wapp.default_queue, url=wapp.url)
    assert shown.code == 0 and "completed" in shown.stdout and "4 done" in shown.stdout, shown
    missing = durq_cli.run("workflow", "show", "nope", url=wapp.url)
    assert missing.code == 1 and "no workflow nope" in missing.stderr, missing
