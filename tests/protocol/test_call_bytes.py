"""A call of release, requeue or settle carries at most MAX_CALL_BYTES of long values
(reasons, results): 64 requeues of reasons as long as durq keeps (MAX_REASON_BYTES) took
13.5 ms of server time at p90 on a loaded machine in one call. The operations are IO-free:
the calls they would send are read from them, no server needed."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from durq.keys import QueueKeys
from durq.protocol import batches, lifecycle
from durq.protocol.args import MAX_REASON_BYTES, reason_json
from durq.protocol.calls import CHUNK, MAX_CALL_BYTES, Pipeline, ScriptCall, chunked

KEYS = QueueKeys("q", "durq")


@dataclass(frozen=True)
class Held:
    id: str
    token: str
    attempt: int = 1


def jobs(n: int) -> list[Held]:
    return [Held(f"j{i}", f"t{i}") for i in range(n)]


def calls_of(op: Generator[Any, Any, Any]) -> Sequence[ScriptCall]:
    """The script calls ``op`` sends in its first round trip."""
    request = next(op)
    calls = request.calls if isinstance(request, Pipeline) else (request,)
    scripts = [c for c in calls if isinstance(c, ScriptCall)]
    assert len(scripts) == len(calls)
    return scripts


def carried(call: ScriptCall) -> int:
    return sum(len(a) for a in call.args if type(a) is bytes)


def longest_reason() -> bytes:
    quarter = MAX_REASON_BYTES // 4  # reason_json cuts a longer field to this
    fields = {"message": "m" * quarter, "traceback": "t" * quarter, "context": "c" * quarter}
    reason = reason_json(fields, attempt=1)
    assert len(reason) > MAX_REASON_BYTES * 3 // 4
    return reason


def test_a_requeue_of_the_longest_reasons_takes_several_calls_each_under_the_byte_bound() -> None:
    n = CHUNK["requeue"]
    reason = longest_reason()
    calls = calls_of(lifecycle.requeue(KEYS, [(j, 0.0, reason, False) for j in jobs(n)]))
    assert len(calls) > 1
    assert all(carried(c) <= MAX_CALL_BYTES for c in calls)
    assert sum(int(c.args[1]) for c in calls) == n  # every job, once


def test_a_requeue_of_short_reasons_still_takes_its_chunk_in_one_call() -> None:
    n = CHUNK["requeue"]
    reason = reason_json({"message": "boom", "traceback": "t" * 4000})
    calls = calls_of(lifecycle.requeue(KEYS, [(j, 0.0, reason, False) for j in jobs(n)]))
    assert len(calls) == 1


def test_a_release_of_large_results_takes_several_calls_and_an_oversized_one_goes_alone() -> None:
    n = CHUNK["release"]
    big = b'"' + b"r" * MAX_CALL_BYTES + b'"'
    results = [big if i == 3 else b'"' + b"r" * 50_000 + b'"' for i in range(n)]
    calls = calls_of(lifecycle.release(KEYS, jobs(n), results=results))
    assert sum(1 for c in calls if carried(c) > MAX_CALL_BYTES) == 1
    assert all(carried(c) <= MAX_CALL_BYTES or int(c.args[2]) == 1 for c in calls)
    assert sum(int(c.args[2]) for c in calls) == n


def test_a_settle_of_the_longest_reasons_records_its_batch_once() -> None:
    n = CHUNK["settle"]
    reason = longest_reason()
    rows = [(j, "r", 0.0, reason, b"") for j in jobs(n)]
    calls = calls_of(batches.settle(KEYS, rows, result_ttl=60, cause="size"))
    assert len(calls) > 1
    assert all(carried(c) <= MAX_CALL_BYTES for c in calls)
    assert [int(c.args[1]) for c in calls] == [n] + [0] * (len(calls) - 1)  # the record


def test_chunks_keep_the_rows_in_order_and_make_a_call_of_no_rows() -> None:
    rows = [(b"x" * 300,), (b"y",), (b"z" * 900,), (b"w" * 10,)] * 3
    chunks = chunked(rows, 5, 1000)
    assert [row for chunk in chunks for row in chunk] == rows
    assert all(len(c) <= 5 for c in chunks)
    assert all(sum(len(r[0]) for r in c) <= 1000 for c in chunks)
    assert chunked([], 5, 1000) == [[]] and chunked([], 5) == [[]]
