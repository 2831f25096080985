"""Batch consumption (durq.Batch, issue 36) on the local Redis Cluster: the engine's batch
tests through both front ends (a batch formed, its items settled per item, a stale
token refused alone, a group's items one holder of its slot, batches by group served in
turn, the rate limit and max_active counting items), and a worker running a batch task
on a plain and on a sharded queue, its items settled one by one, two batches in flight
per shard. Every script of a batch
runs in its queue's (or shard's) slot; the queue pause a rate-limited item sends to the
other shards is the sharded flow suite's (test_flow.py)."""

from engine.test_batch_limits import (
    test_a_batch_is_cut_to_what_the_rate_allows_now,
    test_a_group_limit_of_one_lets_one_batch_of_a_group_run_at_a_time,
    test_max_active_counts_the_items_of_a_batch,
)
from engine.test_batches import *  # noqa: F403
from worker.fixtures import bapp
from worker.test_batch_concurrency import (
    test_a_sharded_batch_task_runs_concurrency_batches_per_shard,
)
from worker.test_batches import (
    test_a_batch_task_receives_its_items_in_one_call_and_completes_them,
    test_a_sharded_batch_task_runs_every_shards_items,
    test_items_settled_one_by_one_end_their_own_way_and_the_rest_complete,
)

__all__ = [
    "bapp",
    "test_a_batch_is_cut_to_what_the_rate_allows_now",
    "test_a_batch_task_receives_its_items_in_one_call_and_completes_them",
    "test_a_group_limit_of_one_lets_one_batch_of_a_group_run_at_a_time",
    "test_a_sharded_batch_task_runs_concurrency_batches_per_shard",
    "test_a_sharded_batch_task_runs_every_shards_items",
    "test_items_settled_one_by_one_end_their_own_way_and_the_rest_complete",
    "test_max_active_counts_the_items_of_a_batch",
]
