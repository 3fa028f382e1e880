"""What a run would buy, before anything is spent: a forecast from public facts only (issue 44).

First part, the closed form: what the run's measurements alone guarantee of each column. A run that calibrates
to measured marginals (privacy/measurements.py) releases every column's counts with Gaussian noise of a standard
deviation σ fixed by the public schema, ε and δ; a family that measures marginals itself (AIM) releases them in its
first round with the σ its plan gives (`SynthModel.count_noise`). A share read from a noisy count then errs by
N(0, (σ/n)²) for n released rows: within ±1.645·σ/n nine times in ten, whatever the table holds. The row count is
the one the run would release (declared public, or an upper bound the steward states), never the exact one of
a private table unless the steward's own screen asks with it (the figure stays on that screen).

The forecast reads no private value: the same schema, ε, δ, model and row count give the same forecast for any
table (tests/test_forecast.py).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .models import get_model_class
from .privacy.budget import default_delta
from .privacy.measurements import FINE_BINS, MARGINAL_BINS, marginals_noise_std
from .privacy.split import planned_split
from .request import FitRequest
from .schema import Schema

Z90 = 1.6448536269514722  # the standard normal's 95th percentile: ± it holds 9 draws in 10


@dataclass(frozen=True)
class ColumnForecast:
    """How far the run's released counts may leave one column's shares, nine times in ten."""

    column: str
    categorical: bool
    cells: int            # the categories (missing included) or the bins the column is counted in
    half_width: float     # of a share (0.012: ±1.2 percentage points), nine times in ten

    def words(self) -> str:
        what = "category's" if self.categorical else "bin's"
        return (f"each {what} share within about ±{100 * self.half_width:.{1 if self.half_width >= 0.001 else 2}f} "
                "percentage points, 9 times in 10")


@dataclass(frozen=True)
class Forecast:
    model: str            # the family the run trains (auto's pick for auto)
    epsilon: float
    delta: float
    rows: int
    noise_std: float | None   # on each released count; None: the run measures no counts
    source: str               # what releases the counts, in words
    columns: tuple[ColumnForecast, ...]

    def to_dict(self) -> dict:
        return {"model": self.model, "epsilon": self.epsilon, "delta": self.delta, "rows": self.rows,
                "noise_std": self.noise_std, "source": self.source,
                "columns": [{**dataclasses.asdict(c), "words": c.words()} for c in self.columns]}


def forecast(schema: Schema, epsilon: float, rows: int, model: str = "auto", delta: float | None = None,
             accountant: str = "prv", **fields) -> Forecast:
    """The closed-form forecast of a run of `model` at (ε, δ) on a table of `rows` rows with this public schema;
    `fields`: any other FitRequest field (a calibration share, a preset). Costs no ε and reads no row."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 2:
        raise ValueError(f"the forecast needs the number of rows, a whole number of at least 2, not {rows!r}")
    request = FitRequest(model=model, epsilon=epsilon, delta=delta, accountant=accountant, **fields)
    request.check()
    resolved = request.resolved(schema, rows)
    delta = resolved.delta if resolved.delta is not None else default_delta(rows)
    split = planned_split(epsilon, delta, resolved.bounds_epsilon or 0.0, schema.rows is not None,
                          resolved.calibration_share or 0.0, resolved.quantile_share or 0.0)
    modelled = schema.modelled()
    if split.marginals > 0:
        std = marginals_noise_std(schema, split.marginals, delta, accountant)
        source = f"the marginals the run measures with {resolved.calibration_share:.0%} of what the count leaves"
        cells = {c.name: MARGINAL_BINS if c.is_numeric else len(c.vocabulary()) + c.nullable for c in modelled.columns}
        fine = {c.name: FINE_BINS for c in modelled.columns if c.is_numeric}
        cells.update(fine)
    else:
        synth = get_model_class(resolved.model)(schema, preset=resolved.preset, device="cpu", seed=0,
                                                **(resolved.options or {}))
        plan = synth.plan_privacy(rows, split.left, delta, accountant, split.alongside(delta, schema, accountant))
        std = synth.count_noise(plan)
        source = f"the first measurement of every column ({synth.label})"
        cells = dict(getattr(synth, "sizes", {}) or {})
    if std is None:
        return Forecast(resolved.model, epsilon, delta, rows, None, "nothing: the run measures no counts (DP-SGD "
                        "alone); the shares depend on what the model learns", ())
    width = Z90 * std / rows
    columns = tuple(ColumnForecast(c.name, not c.is_numeric, int(cells.get(c.name, 0)), width)
                    for c in modelled.columns)
    return Forecast(resolved.model, epsilon, delta, rows, std, source, columns)

