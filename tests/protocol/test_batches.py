"""The settle of a batch's items (``protocol.batches.settle``) in calls of settle.lua,
IO-free: what each call takes, and which call records the batch."""

from __future__ import annotations

from dataclasses import dataclass

from durq.keys import QueueKeys
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
