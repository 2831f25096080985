"""The settle of a batch's items (``protocol.batches.settle``) in calls of settle.lua,
IO-free: what each call takes, and which call records the batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import pytest

from durq.keys import QueueKeys
from durq.models import Job
from durq.protocol import batches
from durq.protocol.calls import CHUNK, Pipeline, ScriptCall


@dataclass(frozen=True)
class Held:
    id: str
    token: str


def rows(codes: str) -> list[batches.Row]:
    return [(Held(f"j{i}", f"1.{i}"), code, 0.0, b"", b"") for i, code in enumerate(codes)]


def calls_of(rows: list[batches.Row], cause: str = "size") -> list[ScriptCall]:
    """The script calls ``settle`` sends in its one round trip."""
    request = next(batches.settle(QueueKeys("q"), rows, result_ttl=60, cause=cause))
    calls = list(request.calls) if isinstance(request, Pipeline) else [request]
    assert all(isinstance(c, ScriptCall) for c in calls)
    return calls  # type: ignore[return-value]


def items(call: ScriptCall) -> list[str]:
    """The ids a call of settle.lua takes (ARGV: ttl, size, cause, m, n, ids...; -n:
    ids and tokens only)."""
    n = abs(int(call.args[4]))
    return [str(a) for a in call.args[5 : 5 + n]]


def test_a_batch_of_done_items_is_settled_in_calls_as_large_as_release_takes() -> None:
    """A done item costs what release.lua's does: a batch of 100 done is one call."""
    assert [len(items(c)) for c in calls_of(rows("d" * 100))] == [100]
    done = CHUNK["release"]
    assert [len(items(c)) for c in calls_of(rows("d" * (2 * done + 1)))] == [done, done, 1]


def test_other_outcomes_cost_what_requeue_does_and_a_mix_counts_in_proportion() -> None:
    n = CHUNK["settle"]
    assert [len(items(c)) for c in calls_of(rows("r" * (n + 1)))] == [n, 1]
    # half the call's room taken by done items leaves half of it for the others
    mixed = calls_of(rows("d" * (CHUNK["release"] // 2) + "x" * n))
    assert [len(items(c)) for c in mixed] == [CHUNK["release"] // 2 + n // 2, n - n // 2]
    ids = [i for c in mixed for i in items(c)]
    assert ids == [f"j{i}" for i in range(len(ids))]  # in order, each once


def test_only_the_first_call_records_the_batch_with_its_whole_size() -> None:
    calls = calls_of(rows("d" * 300), cause="wait")
    assert [(c.args[1], c.args[2]) for c in calls] == [(300, "wait"), (0, ""), (0, "")]
    assert [c.args[1] for c in calls_of(rows("d" * 3), cause="")] == [0]


def test_a_call_of_done_items_without_results_sends_only_their_ids_and_tokens() -> None:
    (plain,) = calls_of(rows("ddd"))
    assert plain.args[4:] == [-3, "j0", "j1", "j2", "1.0", "1.1", "1.2"]
    with_result = rows("dd")
    with_result[1] = (*with_result[1][:4], b'"ok"')
    (full,) = calls_of(with_result)
    assert full.args[4:] == [2, "j0", "j1", "1.0", "1.1", "d", "d", 0, 0, b"", b"", b"", b'"ok"']
    (mixed,) = calls_of(rows("dr"))
    assert mixed.args[4] == 2 and len(mixed.args) == 5 + 6 * 2


def test_a_batch_all_done_is_settled_without_rows_in_the_same_calls_as_with_them() -> None:
    """The worker's common batch (``settle_done``: every item done, no result kept)
    sends exactly what ``settle`` sends for the same items as rows."""
    for n, cause in [(0, "size"), (1, "wait"), (100, "size"), (2 * CHUNK["release"] + 1, "")]:
        jobs = [row[0] for row in rows("d" * n)]
        request = next(batches.settle_done(QueueKeys("q"), jobs, result_ttl=60, cause=cause), None)
        if n == 0:
            assert request is None
            continue
        quick = list(request.calls) if isinstance(request, Pipeline) else [request]
        assert quick == calls_of(rows("d" * n), cause=cause)


@dataclass(frozen=True)
class Item:
    id: str
    group: str | None = None


def fetched(*ids: str, group: str | None = None) -> list[Job]:
    """Items as a fetch hands them out (``Forming`` reads their group only)."""
    return [cast("Job", Item(i, group)) for i in ids]


def test_a_partial_batch_starts_when_its_max_wait_is_up_counted_from_its_first_item() -> None:
    """The flush decision (``Forming.starts``) on a clock of the test's: a partial batch
    waits ``max_wait`` from its first item, not from the first fetch; its items' leases
    cover the wait; its cause is 'wait'."""
    forming = batches.Forming(max_size=4, max_wait=0.5, by_group=False)
    assert not forming.starts(10.0, 0, -1)  # nothing fetched: no batch
    assert forming.left(10.0) == 0.5 and forming.lease_for(2.0, 10.0) == 2.5
    forming.add(fetched("a", "b"), 10.2)
    assert not forming.starts(10.2, 2, -1) and not forming.starts(10.699, 0, -1)
    assert forming.lease_for(2.0, 10.4) == pytest.approx(2.3)  # 0.3 s of max_wait left
    forming.add(fetched("c"), 10.4)
    assert forming.starts(10.7, 0, -1) and forming.starts(11.5, 0, 5000)
    assert forming.cause() == batches.cause_of(3, 4) == "wait"


def test_a_batch_starts_at_once_when_it_reaches_max_size_whatever_its_wait() -> None:
    forming = batches.Forming(max_size=3, max_wait=60.0, by_group=False)
    forming.add(fetched("a", "b", "c"), 0.0)
    assert forming.full and forming.want() == 0
    assert forming.starts(0.0, 3, 0) and forming.starts(0.0, 3, -1)
    assert forming.cause() == batches.cause_of(3, 3) == "size"


def test_a_fetch_cut_by_its_budget_lets_the_batch_take_what_is_ready_before_it_starts() -> None:
    """next_ms 0 with items: more are ready now, so a batch whose wait is up fetches
    again before it starts (a fetch that took none starts it)."""
    forming = batches.Forming(max_size=10, max_wait=0.1, by_group=True)
    forming.add(fetched("a", group="t1"), 0.0)
    assert forming.top_up_group() == "t1"
    forming.add(fetched("b", group="t1"), 0.2)
    assert not forming.starts(0.2, 1, 0)
    assert forming.starts(0.2, 0, 0) and forming.starts(0.2, 1, 300)
