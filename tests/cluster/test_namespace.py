"""The namespace operations (queue, shard and worker lists), run against the local
cluster (see conftest.py): each of these keys is in a slot of its own there."""

from protocol.test_namespace import *  # noqa: F403
