"""What a run would buy, before anything is spent: a forecast from public facts only (issue 44).

First part, the closed form: what the run's measurements alone guarantee of each column. A run that
calibrates to measured marginals (privacy/measurements.py) releases every column's counts with
Gaussian noise of a standard deviation σ fixed by the public schema, ε and δ; a family that measures
marginals itself (AIM) releases them in its first round with the σ its plan gives
(`SynthModel.count_noise`). A share read from a noisy count then errs by N(0, (σ/n)²) for n released
rows: within ±1.645·σ/n nine times in ten, whatever the table holds. The row count is the one the
run would release (declared public, or an upper bound the steward states), never the exact one of a
private table unless the steward's own screen asks with it (the figure stays on that screen).

The forecast reads no private value: the same schema, ε, δ, model and row count give the same
forecast for any table (tests/test_forecast.py).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .benchmark_model import Interval, compares, extrapolation, fidelity
from .models.recommend import by_rule
from .privacy.budget import BudgetError, plain_number
from .privacy.measurements import FINE_BINS, MARGINAL_BINS, marginals_noise_std
from .plan import RunPlan, plan_run
from .request import FitRequest
from .schema import Schema, SchemaError
from .shape import shape_of
from .schema.spec import MAX_ROWS, _short

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
    # "tvd1", "tvd2", "tstr" → Interval (`fidelity`)
    figures: dict = dataclasses.field(default_factory=dict)
    figures_note: str | None = None  # why a figure is missing
    # where the facts lie beyond the benchmark runs' (benchmark_model.extrapolation), in words
    extrapolation: str | None = None

    @property
    def compares(self) -> str:
        """What the figures compare, in words: the review's comparison of this run."""
        return compares(self.rows)

    def to_dict(self) -> dict:
        return {"model": self.model, "epsilon": self.epsilon, "delta": self.delta, "rows": self.rows,
                "noise_std": self.noise_std, "source": self.source,
                "columns": [{**dataclasses.asdict(c), "words": c.words()} for c in self.columns],
                **{what: interval.to_dict() for what, interval in self.figures.items()},
                **({"figures_note": self.figures_note} if self.figures_note else {}),
                **({"compares": self.compares} if self.figures else {}),
                **({"extrapolation": self.extrapolation}
                   if self.extrapolation and self.figures else {})}


def forecast(schema: Schema, epsilon: float, rows: int, model: str = "auto", delta: float | None = None,
             accountant: str = "prv", **fields) -> Forecast:
    """The closed-form forecast of a run of `model` at (ε, δ) on a table of `rows` rows with this
    public schema; `fields`: any other FitRequest field (a calibration share, a preset). Costs no ε
    and reads no row."""
    try:
        shape = shape_of(schema)
    except SchemaError:
        raise SchemaError(f"the forecast needs a table's Schema, not "
                          f"{type(schema).__name__}") from None
    if not shape.forecast:
        raise SchemaError(f"{shape.no_forecast} (forecast the persons' table alone with its "
                          "own schema, if it helps)")
    rows = check_forecast_rows(rows)
    request = FitRequest(model=model, epsilon=epsilon, delta=delta, accountant=accountant, **fields)
    request.check()
    unbounded = [c.name for c in schema.modelled().columns if c.is_numeric and not c.has_bounds]
    if unbounded:
        raise SchemaError(f"the forecast needs every number's public bounds; {', '.join(map(repr, unbounded))} "
                          "has none (declare them, or forecast again once a run has estimated them)")
    plan = plan_run(request, schema, rows)
    resolved, delta = plan.request, plan.delta
    modelled = schema.modelled()
    figures, note = _fidelity(schema, rows, epsilon, resolved.model)
    beyond = extrapolation(schema, rows, epsilon)
    try:
        std, source, cells = _count_noise(plan)
    except BudgetError as e:  # the run would be refused: said, beside what the benchmarks expect
        return Forecast(resolved.model, epsilon, delta, rows, None,
                        f"nothing: the run would be refused ({e})",
                        (), figures, note, beyond)
    if std is None:
        return Forecast(resolved.model, epsilon, delta, rows, None, "nothing: the run measures no counts (DP-SGD "
                        "alone); the shares depend on what the model learns", (), figures, note,
                        beyond)
    width = Z90 * std / rows
    columns = tuple(ColumnForecast(c.name, not c.is_numeric, int(cells.get(c.name, 0)), width)
                    for c in modelled.columns)
    return Forecast(resolved.model, epsilon, delta, rows, std, source, columns, figures, note,
                    beyond)


def _count_noise(plan: RunPlan) -> tuple[float | None, str, dict]:
    """(the σ of each count the run releases or None, what releases them, the cells each column is
    counted in); BudgetError where no noise reaches the run's ε at its δ."""
    schema, resolved = plan.schema, plan.request
    modelled = schema.modelled()
    if plan.split.marginals > 0:
        std = marginals_noise_std(schema, plan.split.marginals, plan.delta, resolved.accountant)
        cells = {c.name: MARGINAL_BINS if c.is_numeric else len(c.vocabulary()) + c.nullable
                 for c in modelled.columns}
        cells.update({c.name: FINE_BINS for c in modelled.columns if c.is_numeric})
        return std, (f"the marginals the run measures with {resolved.calibration_share:.0%} of what "
                     "the count leaves"), cells
    synth = plan.synth()
    return (plan.count_noise(), f"the first measurement of every column ({synth.label})",
            dict(getattr(synth, "sizes", {}) or {}))


def check_forecast_rows(rows) -> int:
    """The row count a forecast is asked for, as an int (a NumPy integer too); ValueError in one
    line unless a whole number from 2 to MAX_ROWS (2**70 rows is no table, and its forecast would
    be a number all the same)."""
    rows = plain_number(rows)
    if isinstance(rows, bool) or not isinstance(rows, int) or not 2 <= rows <= MAX_ROWS:
        raise ValueError(f"the forecast needs the number of rows, a whole number from 2 to "
                         f"{MAX_ROWS:,}, not {_short(rows)}")
    return rows


def _fidelity(schema: Schema, rows: int, epsilon: float, family: str) -> tuple[dict, str | None]:
    """benchmark_model.fidelity, told which family auto's hand-set rule picks for these facts (one
    of its facts)."""
    return fidelity(schema, rows, epsilon, family, rule_pick=by_rule(schema, rows, epsilon).family)


def forecast_for(request: FitRequest, schema: Schema, rows: int, epsilon: float | None = None) -> Forecast:
    """The forecast of a fit request as a page holds it (its family, δ, accountant, size and
    shares), at its own ε or at `epsilon` (a harm level's, a planned release's)."""
    return forecast(schema, request.epsilon if epsilon is None else epsilon, rows, request.model, request.delta,
                    request.accountant, preset=request.preset, options=request.options,
                    bounds_epsilon=request.bounds_epsilon, values_epsilon=request.values_epsilon,
                    calibration_share=request.calibration_share, quantile_share=request.quantile_share)


def run_forecast(schema: Schema, rows: int, epsilon: float, family: str) -> dict:
    """What a run's config keeps of its forecast (public facts only: the schema, the released row
    count, ε and the family): each figure's interval, for the review and the report to set beside
    the measured figures."""
    figures, note = _fidelity(schema, rows, epsilon, family)
    beyond = extrapolation(schema, rows, epsilon) if figures else None
    return {**{what: interval.to_dict() for what, interval in figures.items()},
            **({"compares": compares(rows)} if figures else {}),
            **({"note": note} if note else {}), **({"extrapolation": beyond} if beyond else {})}


# the review's names of the figures a forecast gives
MEASURED = {"tvd1": "1-way TVD", "tvd2": "2-way TVD"}


def forecast_column(kept: dict | None) -> dict[str, str]:
    """The run's forecast by the review's figure names, each as "expected (low to high)"."""
    return {name: f"{kept[what]['expected']:.3f} ({kept[what]['low']:.3f} to {kept[what]['high']:.3f})"
            for what, name in MEASURED.items() if kept and what in kept}


def pairs_text(made: Forecast) -> str | None:
    """A forecast's 2-way TVD as a page's cell shows it, "expected (low to high)", marked where
    the forecast extrapolates (`Forecast.extrapolation` says how); None where there is none."""
    pairs = made.figures.get("tvd2")
    if pairs is None:
        return None
    return (f"{pairs.expected:.3f} ({pairs.low:.3f} to {pairs.high:.3f})"
            + (", extrapolated" if made.extrapolation else ""))


def extrapolation_note(kept: dict | None) -> str | None:
    """What a page says beside a run's kept forecast (`run_forecast`) that extrapolates, in a
    sentence; None where it does not."""
    if not kept or not kept.get("extrapolation"):
        return None
    return f"The forecast is {kept['extrapolation']}."


def against(kept: dict | None, measured: dict[str, float]) -> list[tuple[str, str]]:
    """Each measured figure (by the review's names) that has a forecast: (where it fell, "inside",
    "above" or "below" the 80% interval; the figure and its forecast in words)."""
    out = []
    for what, name in MEASURED.items():
        interval, value = (kept or {}).get(what), measured.get(name)
        if interval is None or value is None or not math.isfinite(value):
            continue
        where = ("above" if value > interval["high"] else "below" if value < interval["low"]
                 else "inside")
        out.append((where, f"{name} {value:.3f}, forecast {interval['expected']:.3f} "
                           f"({interval['low']:.3f} to {interval['high']:.3f})"))
    return out


def findings(kept: dict | None, measured: dict[str, float]) -> list[str]:
    """The measured figures (by the review's names) that fall outside the run's forecast, each in
    one sentence: above its interval a finding, below it good news. Both are measured the same way
    (benchmark_model.compares)."""
    return [f"Worse than expected for this table: {shown}. A larger ε, the other families, or columns "
            "with fewer values (coarser categories, rounder bounds) usually help." if where == "above"
            else f"Better than expected for this table: {shown}."
            for where, shown in against(kept, measured) if where != "inside"]


# 0.056 … 10, evenly on a log scale
CURVE_EPSILONS = tuple(float(f"{10 ** (k / 8):.3g}") for k in range(-10, 9))


def curve(schema: Schema, rows: int, model: str = "auto", what: str = "tvd2",
          epsilons: tuple = CURVE_EPSILONS) -> list[tuple[float, str, Interval]]:
    """The expected figure (2-way TVD unless `what` says) against ε, with the family the run would
    train at each (auto's pick where asked); with `floor`, it shows where more ε stops buying
    fidelity."""
    out = []
    for eps in epsilons:
        family = FitRequest(model=model, epsilon=eps).resolved(schema, rows).model
        figures, _ = _fidelity(schema, rows, eps, family)
        if what in figures:
            out.append((eps, family, figures[what]))
    return out
