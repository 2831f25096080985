"""``durq workflow show``: a workflow by id, found among the registered queues; and the
workflow outboxes ``durq stats`` shows."""

from __future__ import annotations

import durq
from cli.support import durq as run
from durq.codec import PayloadCodec
from durq.keys import OutboxKeys
from durq.payloads import encode_result
from durq.protocol import lifecycle
from helpers import eventually
from worker.support import running_worker


def test_show_a_workflow(wapp: durq.App, log: str) -> None:
    # in this process: a `durq` process took seconds a command on a loaded machine
    t = wapp.tasks
    handle = (
        durq.group([t["square"].s(log, i) for i in range(3)]).then(t["collect"].s(log)).enqueue()
    )
    shown = run("workflow", "show", handle.id, "--url", wapp.url)
    assert shown.exit_code == 0, shown.output
    for text in ("running", "3 pending", "1 waiting", "group 2: 3 open", "collect"):
        assert text in shown.stdout, shown.output
    with running_worker(wapp):
        handle.result(10)
    shown = run("workflow", "show", handle.id, "-q", wapp.default_queue, "--url", wapp.url)
    assert shown.exit_code == 0, shown.output
    assert "completed" in shown.stdout and "4 done" in shown.stdout, shown.output
    missing = run("workflow", "show", "nope", "--url", wapp.url)
    assert missing.exit_code == 1 and "no workflow nope" in missing.stderr, missing.output


def _outbox_rows(output: str) -> dict[str, list[str]]:
    """The rows of ``durq stats``'s outbox table by queue: waiting, retrying, delivering,
    dead."""
    if "workflow outboxes" not in output:
        return {}
    rows = [line.split() for line in output.split("workflow outboxes", 1)[1].splitlines()]
    return {cells[0]: cells[1:] for cells in rows if len(cells) == 5 and cells[0] != "queue"}


def test_stats_shows_the_outbox_backlog_of_a_step_done_in_another_slot(
    wapp: durq.App, log: str
) -> None:
    t = wapp.tasks
    home_name, far_name = wapp.default_queue, f"{wapp.default_queue}-b"  # two slots
    members = [t["square"].s(log, 1), t["square"].s(log, 2)]
    members.append(t["square"].options(queue=far_name).s(log, 3))
    handle = durq.group(members).then(t["collect"].s(log)).enqueue()
    assert handle.queue == home_name

    def outboxes() -> dict[str, list[str]]:
        shown = run("stats", home_name, far_name, "--no-rate", "--url", wapp.url)
        assert shown.exit_code == 0, shown.output
        return _outbox_rows(shown.output)

    # the far step's start waits in the home queue's outbox for a worker of that queue
    assert outboxes() == {home_name: ["1", "0", "0", "0"]}
    home, far = wapp.queue(home_name), wapp.queue(far_name)
    # a courier takes it under a lease and dies: it is being delivered until the lease ends
    outbox = OutboxKeys(home.keys.name, home.keys.namespace)
    taken, _, _ = home._run(lifecycle.fetch(outbox, PayloadCodec(), 10, 0.5))
    assert len(taken) == 1
    assert outboxes() == {home_name: ["0", "0", "1", "0"]}
    with running_worker(wapp, queues=[home_name]):  # delivers the home outbox only
        # the home steps ran; the start was taken back after its lease, applied, released
        eventually(lambda: home.stats().completed == 2 and home.outbox_stats().completed, 10)
    assert far.stats().pending == 1
    step = far.dequeue()
    assert step is not None
    far.release_many([step], results=[encode_result(9)])  # no worker delivers far's outbox
    assert outboxes() == {far_name: ["1", "0", "0", "0"]}

    with running_worker(wapp, queues=[home_name, far_name]):
        assert handle.result(10) == 3
        eventually(lambda: far.outbox_stats().completed == 1, 5)
    assert outboxes() == {}
