"""A state machine of random operations checked against a small reference model.

The model knows, per group, the order of ready jobs (returning jobs at the head), which
deliveries hold a current lease, attempts and dead letters. Each dequeue must hand out
one of the heads the model allows (round robin may pick any eligible group); fenced
calls with a stale lease must raise LeaseLost and change nothing. Lease expiry is
simulated by moving a lease deadline into the past, as the passing of time would.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from durq import Job, LeaseLost, Outcome, Queue
from durq.dev.server import RedisServer
from durq.transport import connection

GROUPS = ("", "a", "b")  # '' is the default group; 'a' is strictly ordered (limit 1)


@dataclass
class Model:
    ready: dict[str, list[str]] = field(default_factory=lambda: {g: [] for g in GROUPS})
    token: dict[str, str] = field(default_factory=dict)  # id -> current lease token
    expired: dict[str, int] = field(default_factory=dict)  # id -> fake deadline (ms)
    group: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    max_attempts: dict[str, int] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    completed: set[str] = field(default_factory=set)

    def holds_slot(self, g: str) -> bool:
        return any(self.group[i] == g for i in self.token)

    def heads(self) -> set[str]:
        return {
            ids[0]
            for g, ids in self.ready.items()
            if ids and not (g == "a" and self.holds_slot("a"))
        }

    def back_to_head(self, job_id: str) -> None:
        self.ready[self.group[job_id]].insert(0, job_id)

    def leave(self, job_id: str) -> None:
        del self.token[job_id]
        self.expired.pop(job_id, None)

    def reclaim(self) -> None:
        """What a dequeue does first: expired leases come back, oldest deadline first."""
        for job_id in sorted(self.expired, key=self.expired.__getitem__):
            self.leave(job_id)
            if self.attempts[job_id] >= self.max_attempts[job_id]:
                self.dead.add(job_id)
            else:
                self.back_to_head(job_id)


class QueueMachine(RuleBasedStateMachine):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.queue = Queue(f"t-{secrets.token_hex(5)}", url, lease=60)
        self.queue.configure(limits={"a": 1})
        self.raw = connection.sync_client(url)  # a Cluster client for a cluster URL
        self.model = Model()
        self.handles: list[Job] = []
        self.serial = 0
        self.clock = 0

    def teardown(self) -> None:
        self.queue.close()
        self.raw.close()

    def _current(self, job: Job) -> bool:
        return self.model.token.get(job.id) == job.token

    # -- producing and consuming ------------------------------------------------------

    @rule(group=st.sampled_from(GROUPS), max_attempts=st.integers(1, 3))
    def enqueue(self, group: str, max_attempts: int) -> None:
        self.serial += 1
        job_id = f"j{self.serial}"
        result = self.queue.enqueue(
            job_id, id=job_id, group=group or None, max_attempts=max_attempts
        )
        assert result.created
        m = self.model
        m.ready[group].append(job_id)
        m.group[job_id] = group
        m.attempts[job_id] = 0
        m.max_attempts[job_id] = max_attempts

    @rule()
    def dequeue(self) -> None:
        self.model.reclaim()
        allowed = self.model.heads()
        job = self.queue.dequeue()
        if not allowed:
            assert job is None
            return
        assert job is not None, f"nothing handed out, expected one of {allowed}"
        assert job.id in allowed, f"{job.id} handed out, expected one of {allowed}"
        m = self.model
        m.ready[m.group[job.id]].remove(job.id)
        m.attempts[job.id] += 1
        m.token[job.id] = job.token
        assert job.attempt == m.attempts[job.id]
        assert job.payload == job.id
        self.handles.append(job)

    # -- fenced operations, with current or stale leases -----------------------------

    def _pick(self, data: st.DataObject) -> Job:
        return data.draw(st.sampled_from(self.handles))

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        job = self._pick(data)
        if not self._current(job):
            with pytest.raises(LeaseLost):
                self.queue.release(job)
            return
        self.queue.release(job)
        self.model.leave(job.id)
        self.model.completed.add(job.id)

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), dead=st.booleans())
    def requeue(self, data: st.DataObject, dead: bool) -> None:
        job = self._pick(data)
        if not self._current(job):
            with pytest.raises(LeaseLost):
                self.queue.requeue(job, delay=0, dead=dead)
            return
        m = self.model
        status = self.queue.requeue(job, delay=0, dead=dead, reason="model")
        m.leave(job.id)
        if dead or m.attempts[job.id] >= m.max_attempts[job.id]:
            assert status is Outcome.DEAD
            m.dead.add(job.id)
        else:
            assert status is Outcome.RETRYING
            m.back_to_head(job.id)

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def defer(self, data: st.DataObject) -> None:
        job = self._pick(data)
        if not self._current(job):
            with pytest.raises(LeaseLost):
                self.queue.defer(job)
            return
        self.queue.defer(job)
        m = self.model
        m.leave(job.id)
        m.attempts[job.id] = max(m.attempts[job.id] - 1, 0)
        m.back_to_head(job.id)

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def extend(self, data: st.DataObject) -> None:
        job = self._pick(data)
        if not self._current(job):
            with pytest.raises(LeaseLost):
                self.queue.extend(job, lease=60)
            return
        self.queue.extend(job, lease=60)
        self.model.expired.pop(job.id, None)  # a lease that ran out is fresh again

    @precondition(lambda self: self.model.token)
    @rule(data=st.data())
    def expire_lease(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.model.token)))
        self.clock += 1
        key = self.queue.keys.prefix + "active"
        assert self.raw.zadd(key, {job_id: self.clock}, xx=True, ch=True) == 1
        self.model.expired[job_id] = self.clock

    # -- what must always hold --------------------------------------------------------

    @invariant()
    def sizes_agree(self) -> None:
        stats = self.queue.stats()
        m = self.model
        assert stats.pending == sum(len(ids) for ids in m.ready.values())
        assert stats.active == len(m.token)
        assert stats.dead == len(m.dead)
        assert stats.completed == len(m.completed)


@pytest.mark.slow
def test_random_operations_agree_with_the_reference_model(server: RedisServer) -> None:
    class OnThisServer(QueueMachine):
        def __init__(self) -> None:
            super().__init__(server.url)

    run_state_machine_as_test(
        OnThisServer,
        settings=settings(
            max_examples=30,
            stateful_step_count=35,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
