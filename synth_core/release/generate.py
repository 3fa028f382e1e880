"""One request for synthetic rows from a trained model, as the generate page and a background thread run it.

`generate` picks the path (fairness control, fixed values, or unconditional) and returns the table with
what a privacy report says about how it was drawn. `SamplingJob` runs it off the page's thread, so that
other clicks on the page (which rerun its script) neither cancel nor repeat it, and says how long it has
left from the per-row cost past runs measured (runs.timing).
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import pandas as pd

from .fair_sampling import FairGeneration, fair_sample
from ..models.calibration import summary as calibration_summary
from ..runs.timing import sampling_seconds


@dataclass
class Generated:
    table: pd.DataFrame
    info: dict                                 # how the rows were drawn, for the privacy report
    fairness: FairGeneration | None = None


def generate(model, rows: int, conditions: dict | None = None, fairness: dict | None = None,
             seed: int | None = None) -> Generated:
    """`rows` synthetic rows: with fairness control (`fairness`: sensitive, target, positive, target_gap),
    else with fixed values (`conditions`), else unconditioned. Fixed values are not combined with fairness."""
    if fairness:
        result = fair_sample(model, rows, seed=seed, **fairness)
        return Generated(result.table, {"method": "fairness control", **fairness, **result.summary(), "seed": seed},
                         result)
    table = model.sample(rows, conditions=conditions or None, seed=seed)
    calibrated = calibration_summary(model.last_sample_info.get("calibration"), len(table))
    info = {"conditions": conditions or {}, "seed": seed,
            **{k: v for k, v in model.last_sample_info.items() if k in ("method", "acceptance_rate")},
            **({"calibration": calibrated} if calibrated else {})}
    return Generated(table, info)


_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sampling")  # one request at a time per app


@dataclass
class SamplingJob:
    """A `generate` call running in the background; the page keeps the job and polls it."""
    key: str                                   # what it draws for (the run), so a page can tell
    rows: int
    future: Future
    started: float = field(default_factory=time.time)
    expected_s: float | None = None

    @classmethod
    def start(cls, key: str, model, rows: int, **kwargs) -> "SamplingJob":
        return cls(key=key, rows=rows, future=_POOL.submit(generate, model, rows, **kwargs),
                   expected_s=sampling_seconds(model, model.preset, rows))

    @property
    def done(self) -> bool:
        return self.future.done()

    def elapsed(self) -> float:
        return time.time() - self.started

    def left(self) -> float | None:
        """Seconds left by the expected time (None when unknown or overdue: a calibrated sample may grow its pool
        up to the family's max_pool_growth times, which no estimate before the draw knows)."""
        if self.expected_s is None or self.overdue:
            return None
        return self.expected_s - self.elapsed()

    @property
    def overdue(self) -> bool:
        return self.expected_s is not None and self.elapsed() > self.expected_s

    def fraction(self) -> float:
        if self.done:
            return 1.0
        if not self.expected_s:
            return 0.0
        return min(0.99, self.elapsed() / self.expected_s)

    def result(self) -> Generated:
        """The generated rows; the request's own error if it failed."""
        return self.future.result()
