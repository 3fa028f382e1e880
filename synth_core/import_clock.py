"""How long a heavy library took to import in this process, the first time it was asked for.

A run's worker is a fresh process: it imports Opacus (its accountants) and, for AIM, JAX and mbi
again as it sets up, 2.5 and 1.2 s on 2 cores. A time estimate made in the app's process, where
they are loaded already, counts them from here (`runs.timing`); where this process loaded one
before it was timed, the seconds measured on a fresh 2-core worker stand in.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager

# seconds a fresh worker took to import each, quiet, 2 cores (`import synth_core.worker`, then
# each: 2.44-2.56 s and 1.20-1.22 s over two runs, 29 Nov 2026)
MEASURED_S = {"opacus": 2.5, "mbi": 1.2}
_SECONDS: dict[str, float] = {}


@contextmanager
def timed(name: str, module: str):
    """Time the first import of `module`, the library `name`; nothing where it is loaded already."""
    fresh = module not in sys.modules and name not in _SECONDS
    start = time.perf_counter()
    yield
    if fresh:
        _SECONDS[name] = time.perf_counter() - start


def seconds(name: str) -> float:
    """The seconds importing `name` took here (those measured on a worker where not timed)."""
    return _SECONDS.get(name, MEASURED_S[name])
