"""Flow control on a Redis Cluster: the engine's flow suites, run against the local
cluster (see conftest.py). A queue's limits live in its own slot, so every flow script
runs on the node that owns the queue, with no cross-slot step (docs/flow-control.md)."""

from engine.test_flow_control import *  # noqa: F403
