"""Fixtures of the Sentinel tests: one primary, two replicas and three Sentinels for
the whole session (failovers move the primary around; each test finds it anew)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durq.dev.topology import LocalSentinel
from helpers import default_flavor, require_flavor


@pytest.fixture(scope="session")
def sentinel_setup() -> Iterator[LocalSentinel]:
    """The session's Sentinel setup (the default flavor's binary)."""
    flavor = default_flavor()
    setup = LocalSentinel(flavor=flavor, replicas=2, binary=require_flavor(flavor))
    try:
        setup.start()
        yield setup
    finally:
        setup.close()
