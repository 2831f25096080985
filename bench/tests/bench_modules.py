"""Loading a script of bench/ in a test: bench/ is not a package, and its scripts put
bench/ on sys.path for their own imports (`common`, `interleaved` and the other parts)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent


def load_bench_module(filename: str, name: str) -> ModuleType:
    """bench/``filename``, loaded as module ``name``; afterwards sys.path is as it was and
    the bench modules it imported are dropped from sys.modules (their names are plain:
    ``common``, ``driver_client``), so no other test sees them."""
    spec = importlib.util.spec_from_file_location(name, BENCH / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved, had = list(sys.path), set(sys.modules)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
        for other in set(sys.modules) - had:
            file = getattr(sys.modules[other], "__file__", None) or "/"
            if other == spec.name or BENCH in Path(file).parents:
                sys.modules.pop(other, None)
    return module
