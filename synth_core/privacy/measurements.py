"""Statistics of the private table released with noise and paid from the budget: the row count, and
marginals for calibrating a model's samples.

A run needs the number of rows n to plan its training (the sampling rate, the default δ) and a
steward needs it for the synthetic table's size. Unless the steward declares n public (Schema.rows),
it is measured once with the Laplace mechanism (sensitivity 1 when a row is added or removed) from a
small share of ε and recorded in the ledger; everything downstream (the plan, δ, the report, the
default number of synthetic rows) uses that noisy count, never the exact one.

Marginals (`measure_marginals`) are counts of the table's rows in the cells of the public
discretisation (`encoding.tokens.TokenEncoder.cells`: public categories, numbers in bins between
public bounds), of every modelled column alone (`Schema.modelled`: a derived column is computed from
its public rule, never measured) and of the pairs `choose_marginals` picks from public facts, and of
every numeric column alone a second time on finer public bins (`measured_marginals`), released
together by one Gaussian mechanism (adding or removing a row moves one cell of each marginal by 1:
L2 sensitivity √k for k marginals). The accountant composes it with the run's DP-SGD
(`planning.plan(alongside=...)`).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..encoding.engine import Counting
from ..encoding.tokens import TokenEncoder
from ..schema import Schema
from .accounting import Gaussian, gaussian_for
from .budget import default_delta
from .ledger import COUNT, MARGINALS, QUANTILES, PrivacyLedger
from .randomness import noisy_counts, secret_rng

COUNT_SHARE = 0.02          # of ε, for the noisy row count (ε = 1: Laplace noise of scale 50 rows)
COUNT_EPSILON_FLOOR = 0.01  # but at least this (a count from less is too noisy to plan with) ...
COUNT_SHARE_CAP = 0.05      # ... and never more than this share of ε
TAIL = 1e-3                 # the noisy count plus its (1 − TAIL) upper tail bounds n from above
# a preview names the other δ a noisy count may lead to unless the count lands this far out
# (once in a million runs; five noise scales, as before, missed once in 150: a suite run saw it)
PREVIEW_TAIL = 1e-6


def count_epsilon(epsilon: float) -> float:
    """The part of ε a noisy row count costs."""
    return min(max(COUNT_SHARE * epsilon, COUNT_EPSILON_FLOOR), COUNT_SHARE_CAP * epsilon)




def noisy_count(n: int, epsilon: float, ledger: PrivacyLedger, of: str = "rows") -> int:
    """n + Laplace(1/ε), rounded, at least 2; recorded in the ledger (ε-DP, δ = 0). of: what n
    counts, "rows" or "persons" (linked tables: a person is one of n)."""
    scale = 1.0 / epsilon
    value = max(2, int(round(n + secret_rng().laplace(0.0, scale))))
    ledger.n_rows = value  # the released count, before the ledger that holds it is written anywhere
    ledger.record(f"Noisy {'row count' if of == 'rows' else 'count of ' + of} (Laplace mechanism)", epsilon=epsilon,
                  delta=0.0, kind=COUNT,
                  noise_scale=scale, count=value)
    return value


def rows_upper_bound(count: int, epsilon: float | None) -> int:
    """A number of rows n stays below with chance at least 1 − TAIL, given its count (exact if ε is
    None)."""
    if epsilon is None:
        return int(count)
    return int(count + math.ceil(math.log(1 / (2 * TAIL)) / epsilon))


def run_delta(asked: float | None, rows: int, count_epsilon: float | None) -> float:
    """The δ a run uses: the one asked for, else a power of ten below 1/n for every n the released
    count leaves plausible (`rows`: the count, noisy unless `count_epsilon` is None). The run, the
    model page's preview and the forecast all ask this (the preview with the count it expects)."""
    if asked is not None:
        return float(asked)
    return default_delta(rows_upper_bound(rows, count_epsilon))


def delta_may_differ(asked: float | None, rows: int, count_epsilon: float | None) -> float | None:
    """Where a preview's `run_delta` from the exact count may not be the run's (its noisy count,
    but for a chance of PREVIEW_TAIL, may cross a power of ten): the δ it may use instead; None
    where it cannot."""
    if asked is not None or count_epsilon is None:
        return None
    reach = math.ceil(math.log(1 / PREVIEW_TAIL) / count_epsilon)
    other = {run_delta(None, max(2, r), count_epsilon) for r in (rows - reach, rows + reach)}
    other.discard(run_delta(None, rows, count_epsilon))
    return min(other) if other else None


MARGINAL_BINS = 10          # public bins per numeric column in a measured marginal
# and every numeric column alone again on this many: 10 bins leave the model's own shape within a
# bin, which a column on a coarse grid of values or with its mass in a corner of its range shows
# (benchmarks/history, issue 15)
FINE_BINS = 32
MAX_PAIR_CELLS = 5_000      # a pair with more cells than this is not measured (too noisy per cell)
ALL_PAIRS_UP_TO = 40        # measure every pair when the marginals then number at most this


@dataclass
class Marginal:
    columns: tuple[str, ...]
    shape: tuple[int, ...]
    counts: np.ndarray      # noisy counts, flat over the cells (C order)
    noise_std: float | None = None  # its own noise's standard deviation (None: the Marginals')
    n_bins: int | None = None       # its numeric columns' public bins (None: the Marginals')


@dataclass
class Marginals:
    """Noisy marginals of the private table on its public discretisation (see the module's
    docstring)."""

    n_bins: int
    noise_std: float        # the Gaussian noise's standard deviation on every cell
    rows: int               # the row count as the run released it (public or noisy)
    marginals: list[Marginal] = field(default_factory=list)
    # the row count the released count and the marginals imply together (pooled_rows)
    total: float | None = None

    @property
    def total_rows(self) -> float:
        """The rows the marginals stand for: their pooled count, else the released one (a run before
        pooling)."""
        return float(self.rows if self.total is None else self.total)

    def encoder(self, schema: Schema, marginal: Marginal | None = None) -> TokenEncoder:
        """The discretisation the marginals (or this one) were measured on."""
        return TokenEncoder(schema.modelled(), self.bins(marginal) if marginal is not None else self.n_bins)

    def bins(self, marginal: Marginal) -> int:
        return self.n_bins if marginal.n_bins is None else marginal.n_bins

    def to_dict(self) -> dict:
        return {"n_bins": self.n_bins, "noise_std": self.noise_std, "rows": self.rows,
                **({"total": self.total} if self.total is not None else {}),
                "marginals": [{"columns": list(m.columns), "shape": list(m.shape),
                               # whole floats (JSON keeps them exactly): a reloaded run calibrates
                               # to the very counts it measured, so its samples equal the fitted
                               # model's for a seed
                               "counts": [float(c) for c in m.counts],
                               **({"noise_std": m.noise_std} if m.noise_std is not None else {}),
                               **({"n_bins": m.n_bins} if m.n_bins is not None else {})}
                              for m in self.marginals]}

    def std(self, marginal: Marginal) -> float:
        """The standard deviation of the noise on each of `marginal`'s cells."""
        return self.noise_std if marginal.noise_std is None else marginal.noise_std

    @classmethod
    def from_dict(cls, data: dict) -> "Marginals":
        return cls(n_bins=int(data["n_bins"]), noise_std=float(data["noise_std"]), rows=int(data["rows"]),
                   total=None if data.get("total") is None else float(data["total"]),
                   marginals=[Marginal(tuple(m["columns"]), tuple(m["shape"]), np.asarray(m["counts"], float),
                                       m.get("noise_std"), m.get("n_bins")) for m in data["marginals"]])


def pooled_rows(rows: float, rows_variance: float, marginals: list[Marginal], std: Callable[[Marginal], float]) -> float:
    """The row count that the released count and the measured marginals imply together: every
    marginal of the whole table sums to the row count, with the variance of its noise (cells ·
    std²), and the noisy count has its own; their inverse-variance average (post-processing of
    released values: no privacy cost). A public count (variance 0) is returned as it is. On a small
    table the count's Laplace noise at its small share of ε is large (scale 50 at ε = 1): a count
    four times too low once made calibration put a sample's weight on 11 of the persons; the
    marginals' sums narrow it to less than half (60 measurements at ε = 1, the error's standard
    deviation: pbcseq's persons 76 to 30, Males' 70 to 29; benchmarks/bench_pooled_count.py)."""
    if rows_variance <= 0 or not marginals:
        return float(rows)
    weights = np.array([1.0 / rows_variance] + [1.0 / (m.counts.size * std(m) ** 2) for m in marginals])
    values = np.array([float(rows)] + [float(m.counts.sum()) for m in marginals])
    return max(1.0, float(weights @ values / weights.sum()))


def rows_to_draw(released: int, calibration) -> int:
    """The rows (linked tables: persons) a sample has unless asked otherwise: the released count,
    made more precise by the run's measured marginals where it has them (`pooled_rows`; calibration:
    Marginals or PersonMarginals)."""
    return max(1, int(round(calibration.total_rows))) if calibration is not None else int(released)


def choose_marginals(schema: Schema, n_bins: int = MARGINAL_BINS) -> list[tuple[str, ...]]:
    """Which marginals to measure, from public facts only: every column alone; every pair of columns
    if that makes at most ALL_PAIRS_UP_TO marginals, else every pair of a target or sensitive column
    (the schema's roles) with another column; never a pair with more than MAX_PAIR_CELLS cells.
    Modelled columns only."""
    schema = schema.modelled()
    encoder = TokenEncoder(schema, n_bins)
    size = {c.spec.name: c.size for c in encoder.codecs}
    chosen: list[tuple[str, ...]] = [(name,) for name in schema.names]
    d = len(schema.names)
    if d + d * (d - 1) // 2 <= ALL_PAIRS_UP_TO:
        focus = list(schema.names)
    else:
        focus = [c.name for c in schema.columns if c.role in ("target", "sensitive")]
    for a in focus:
        for b in schema.names:
            pair = tuple(sorted((a, b), key=schema.names.index))
            if b != a and pair not in chosen and size[a] * size[b] <= MAX_PAIR_CELLS:
                chosen.append(pair)
    return chosen


def measured_marginals(schema: Schema, n_bins: int = MARGINAL_BINS,
                       fine_bins: int | None = FINE_BINS) -> list[tuple[tuple[str, ...], int]]:
    """Every marginal a measurement releases, with its numbers' public bins: those
    `choose_marginals` picks, on `n_bins`; then every numeric column alone on `fine_bins` (None or
    0: not), where that cuts it finer (an integer column with at most `n_bins` values already has a
    bin per value)."""
    schema = schema.modelled()
    out = [(columns, n_bins) for columns in choose_marginals(schema, n_bins)]
    if fine_bins:
        sizes = {b: {c.spec.name: c.size for c in TokenEncoder(schema, b).codecs} for b in (n_bins, fine_bins)}
        out += [((c.name,), fine_bins) for c in schema.columns
                if c.is_numeric and sizes[fine_bins][c.name] > sizes[n_bins][c.name]]
    return out


def public_marginals(table: pd.DataFrame, schema: Schema, n_bins: int = MARGINAL_BINS) -> Marginals:
    """The marginals a measurement would release, counted exactly on a table that is public (rows
    drawn from the public schema alone, to time a calibrated draw): no noise, no ledger."""
    schema = schema.modelled()
    chosen = measured_marginals(schema, n_bins)
    out = Marginals(n_bins=n_bins, noise_std=1.0, rows=len(table))
    for (columns, bins), (counts, shape) in zip(chosen, _exact_counts(table, schema, chosen)):
        out.marginals.append(Marginal(columns, shape, counts,
                                      n_bins=None if bins == n_bins else bins))
    return out


def _exact_counts(table: pd.DataFrame | Counting, schema: Schema, chosen: list):
    """Each chosen marginal's exact counts over its cells (flat, C order) and the cells' shape,
    as `TokenEncoder.cells` places the rows; each column placed once per bins, not once per
    marginal that holds it (a table of a million rows spent 19 s placing columns again)."""
    encoders = {b: TokenEncoder(schema, b) for b in {bins for _, bins in chosen}}
    if isinstance(table, Counting):  # a table an engine holds counts there, a query per bins
        found = {bins: table.counts_of(encoders[bins], [tuple(c) for c, b in chosen if b == bins])
                 for bins in encoders}
        for columns, bins in chosen:
            yield found[bins][tuple(columns)]
        return
    placed: dict[tuple[int, str], tuple[np.ndarray, int]] = {}
    for columns, bins in chosen:
        flat, shape = None, []
        for name in columns:
            if (bins, name) not in placed:
                cells, (size,) = encoders[bins].cells(table, (name,))
                placed[bins, name] = cells.astype(np.min_scalar_type(size)), size
            cells, size = placed[bins, name]
            flat = cells.astype(np.int64) if flat is None else flat * size + cells
            shape.append(size)
        yield np.bincount(flat, minlength=int(np.prod(shape))).astype(float), tuple(shape)


def measure_marginals(table: pd.DataFrame | Counting, schema: Schema, epsilon: float,
                      delta: float, ledger: PrivacyLedger,
                      rows: int, accountant: str = "prv", n_bins: int = MARGINAL_BINS,
                      fine_bins: int | None = FINE_BINS) -> tuple[Marginals, Gaussian]:
    """The marginals `measured_marginals` lists, of a validated table, measured by one Gaussian
    mechanism that alone spends (ε, δ), recorded in the ledger; and the mechanism, for the
    accountant to compose with the training. The sensitivity counts marginals, not cells."""
    schema = schema.modelled()
    chosen = measured_marginals(schema, n_bins, fine_bins)
    mechanism, std = _mechanism(chosen, epsilon, delta, accountant)
    out = Marginals(n_bins=n_bins, noise_std=std, rows=int(rows))
    for (columns, bins), (counts, shape) in zip(chosen, _exact_counts(table, schema, chosen)):
        out.marginals.append(Marginal(columns, shape, noisy_counts(counts, std),
                                      n_bins=None if bins == n_bins else bins))
    out.total = pooled_rows(rows, ledger.count_variance, out.marginals, out.std)
    fine = [list(c) for c, b in chosen if b != n_bins]
    ledger.record("Marginals (Gaussian mechanism)", epsilon=epsilon, delta=delta, accountant=accountant, kind=MARGINALS,
                  noise_multiplier=mechanism.noise_multiplier, sample_rate=1.0, steps=1, noise_std=std,
                  marginals=[list(c) for c, b in chosen if b == n_bins], bins=n_bins,
                  **({"fine_marginals": fine, "fine_bins": fine_bins} if fine else {}))
    return out, mechanism


def _mechanism(chosen: list, epsilon: float, delta: float, accountant: str) -> tuple[Gaussian, float]:
    """The Gaussian mechanism that releases `chosen` marginals with (ε, δ), and its noise's standard
    deviation on every cell (the sensitivity counts marginals: √k)."""
    mechanism = gaussian_for(epsilon, delta, accountant)
    return mechanism, mechanism.noise_multiplier * math.sqrt(len(chosen))


def marginals_noise_std(schema: Schema, epsilon: float, delta: float, accountant: str = "prv",
                        n_bins: int = MARGINAL_BINS, fine_bins: int | None = FINE_BINS) -> float:
    """The noise's standard deviation on every cell that `measure_marginals` would release with (ε,
    δ) for this public schema, before anything is spent (a forecast's closed form)."""
    return _mechanism(measured_marginals(schema.modelled(), n_bins, fine_bins), epsilon, delta, accountant)[1]


QUANTILE_LEVELS = 20        # quantiles released per numeric column: the levels 1/20, …, 19/20
# public cells of the histogram they are read from (fewer: an integer column's values)
QUANTILE_CELLS = 200


def quantile_columns(schema: Schema) -> list[str]:
    """The numeric modelled columns whose bins quantiles would move: those with bounds and more
    possible values than QUANTILE_CELLS (an integer column with fewer is binned one value per bin
    where bins allow)."""
    out = []
    for spec in schema.modelled().columns:
        if not spec.is_numeric or not spec.has_bounds:
            continue
        if spec.kind == "integer" and spec.n_values() <= QUANTILE_CELLS:
            continue
        out.append(spec.name)
    return out


def measure_quantiles(table: pd.DataFrame | Counting, schema: Schema, epsilon: float,
                      delta: float, ledger: PrivacyLedger,
                      accountant: str = "prv") -> tuple[Schema, Gaussian | None]:
    """A copy of `schema` whose numeric columns (`quantile_columns`) carry quantiles released with
    DP, and the mechanism, for the accountant to compose with the run's others (None: no column to
    measure).

    Each column's values are counted in QUANTILE_CELLS public cells (even on its scale,
    `ColumnSpec.edges` without quantiles); the histograms are released together by one Gaussian
    mechanism that alone spends (ε, δ) (a row moves one cell of each: L2 sensitivity √k), recorded
    in the ledger. The quantiles are read from each noisy histogram (`_quantiles_of`):
    post-processing."""
    import copy
    columns = quantile_columns(schema)
    if not columns:
        return schema, None
    mechanism = gaussian_for(epsilon, delta, accountant)
    std = mechanism.noise_multiplier * math.sqrt(len(columns))
    out = copy.deepcopy(schema)
    levels = np.arange(1, QUANTILE_LEVELS) / QUANTILE_LEVELS
    for name in columns:
        spec = out[name]
        cells = spec.edges(QUANTILE_CELLS, quantile=False)
        counts = _histogram(table, spec, cells)
        spec.quantiles = _quantiles_of(noisy_counts(counts, std), cells, levels, spec)
    ledger.record("Quantiles of numeric columns (Gaussian mechanism on public histograms)", epsilon=epsilon,
                  delta=delta, accountant=accountant, kind=QUANTILES, noise_multiplier=mechanism.noise_multiplier,
                  sample_rate=1.0, steps=1, noise_std=std, columns=columns, levels=QUANTILE_LEVELS,
                  cells=QUANTILE_CELLS)
    return out, mechanism


def _histogram(table: pd.DataFrame | Counting, spec, cells: np.ndarray) -> np.ndarray:
    """A numeric column's present values counted between `cells`, a value beyond the cells in
    the first or last (a log scale's last edge may fall a rounding short of the upper bound: the
    rows at the bound were left out)."""
    if isinstance(table, Counting):
        return table.histogram(spec.name, cells)
    values = pd.to_numeric(table[spec.name], errors="coerce").to_numpy(dtype=float)
    values = np.clip(values[~np.isnan(values)], cells[0], cells[-1])
    return np.histogram(values, bins=cells)[0].astype(float)


def _quantiles_of(counts: np.ndarray, cells: np.ndarray, levels: np.ndarray, spec) -> list[float]:
    """The values at `levels` of the distribution a noisy histogram describes (uniform within each
    cell), on the column's public range and precision, ascending. The noisy cumulative counts are
    divided by the noisy total and made non-decreasing: clipping each noisy count at zero instead
    would pile the noise of the empty cells into the tail (upper quantiles three times too high in a
    test)."""
    total = counts.sum()
    if total <= 0:  # nothing stands out of the noise: evenly spread on the column's scale
        return [float(v) for v in spec.from_unit(levels)]
    cumulative = np.clip(np.maximum.accumulate(np.r_[0.0, np.cumsum(counts)] / total), 0.0, 1.0)
    edges = np.clip(cells, spec.lower, spec.upper)
    # the cell where each level is crossed
    i = np.clip(np.searchsorted(cumulative, levels, side="left"), 1, len(counts))
    share = (levels - cumulative[i - 1]) / np.maximum(cumulative[i] - cumulative[i - 1], 1e-300)
    q = edges[i - 1] + np.clip(share, 0.0, 1.0) * (edges[i] - edges[i - 1])
    if spec.kind == "integer":
        q = np.round(q)
    elif spec.decimals is not None:
        q = np.round(q, spec.decimals)
    return [float(v) for v in np.maximum.accumulate(np.clip(q, spec.lower, spec.upper))]
