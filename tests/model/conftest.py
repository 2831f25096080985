"""The model test's server: a private one on a frozen clock (model/clock.py), of each
selected flavor (Valkey 9.1: FCALL; Redis 6.2: EVALSHA)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers import flavor_params
from model.clock import FrozenClock, frozen_server


@pytest.fixture(scope="module", params=flavor_params())
def frozen(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, FrozenClock]]:
    """(url, clock) of a private server whose clock moves only when the test moves it."""
    server, clock = frozen_server(str(request.param), tmp_path_factory.mktemp("model"))
    try:
        yield server.url, clock
    finally:
        server.close()
