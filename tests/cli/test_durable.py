"""``durq signal NAME [JSON]`` and the durable steps ``durq job show`` lists (issue 37)."""

from __future__ import annotations

import durq
from cli.support import durq as run
from durq.protocol import durable


def test_signal_wakes_the_jobs_waiting_for_it_with_its_json_payload(
    queue_name: str, redis_url: str
) -> None:
    with durq.Queue(queue_name, redis_url) as q:
        q.enqueue("a")
        job = q.dequeue()
        assert job is not None
        parked = q._run(durable.wait(q.keys, job.id, job.token, "w", "approve:1", None))
        assert parked.tag == "parked"
        result = run("signal", "approve:1", '{"by": "ada"}', "-q", queue_name, "--url", redis_url)
        assert result.exit_code == 0, result.output
        assert "1 waiting jobs made ready" in result.output
        [wait] = q.steps(job.id)
        assert (wait.state, wait.value) == ("signalled", {"by": "ada"})


def test_signal_refuses_a_payload_that_is_not_json(queue_name: str, redis_url: str) -> None:
    result = run("signal", "x", "{nope", "-q", queue_name, "--url", redis_url)
    assert result.exit_code == 2 and "not JSON" in result.output


def test_job_show_lists_the_steps_sleeps_and_waits_without_their_values(
    queue_name: str, redis_url: str
) -> None:
    with durq.Queue(queue_name, redis_url) as q:
        q.enqueue("a")
        job = q.dequeue()
        assert job is not None
        body = durable.step_body({"card": "4242-secret"}, 12, 2, 1 << 20)
        assert q._run(durable.record_step(q.keys, job.id, job.token, "charge", body)).tag == "ok"
        op = durable.sleep(q.keys, job.id, job.token, "nap", after=60_000)
        assert q._run(op).tag == "parked"
    result = run("job", "show", job.id, "-q", queue_name, "--url", redis_url)
    assert result.exit_code == 0, result.output
    assert "2 durable steps of" in result.output
    assert "charge" in result.output and "done" in result.output and "0.012 s" in result.output
    assert "nap" in result.output and "asleep" in result.output
    assert "4242-secret" not in result.output
