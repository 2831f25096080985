"""Durable steps on the local Redis Cluster (issue 37): the protocol-level tests through
both front ends, and through a worker: steps replayed, sleeps and waits parked, and a
signal crossing the slots of a sharded queue's shards through the outbox."""

from durable.conftest import app, log
from durable.test_sharded import *  # noqa: F403
from durable.test_signals import *  # noqa: F403
from durable.test_steps import *  # noqa: F403
from engine.test_durable_steps import *  # noqa: F403

__all__ = ["app", "log"]  # the durable tests' own fixtures, over the cluster suite's
