"""Differentially private quantiles via the exponential mechanism.

This module implements the standard pure epsilon-DP quantile mechanism of
Smith (2011), "Privacy-preserving statistical estimation with optimal
convergence rates", as used by e.g. OpenDP, Google's differential-privacy
library and Gillenwater, Joseph & Kulesza (2021), "Differentially private
quantiles".

Mechanism (single quantile ``q`` of ``n`` values, public range
``[lower, upper]``):

1. Drop NaNs, clip the remaining values into ``[lower, upper]`` and sort
   them: ``x_1 <= ... <= x_n``.  Add the end points ``x_0 = lower`` and
   ``x_{n+1} = upper``.
2. The candidate outputs are the ``n + 1`` intervals ``[x_i, x_{i+1}]``,
   ``i = 0..n``.  Every point of interval ``i`` has exactly ``i`` data
   points below it, so its utility is ``u(i) = -|i - q * n|``.
3. Sample interval ``i`` with probability proportional to
   ``(x_{i+1} - x_i) * exp(epsilon * u(i) / 2)``, then return a uniform draw
   inside the chosen interval.

Equivalently the output has density proportional to
``exp(epsilon * u(o) / 2)`` on ``[lower, upper]`` with
``u(o) = -|#{x_j < o} - q * n|``.  Changing one record (replacement) changes
``#{x_j < o}`` by at most 1 for every ``o``; adding or removing one record
changes ``#{x_j < o} - q * n`` by ``-q`` or ``1 - q``, also at most 1 in
magnitude.  The utility therefore has sensitivity 1 under both neighbouring
notions and the exponential mechanism with the factor ``epsilon / 2`` is
epsilon-DP.

The sampling is done in log space (log interval length, ``-inf`` for
zero-length intervals, plus ``epsilon * u / 2``), shifted by the maximum
before exponentiating, so it is numerically stable for ``n`` in the
millions.

Privacy notes
-------------
* ``lower`` and ``upper`` must be PUBLIC (data-independent) bounds; they are
  never derived from the data here.
* NaN values are dropped before use.  The mechanism's privacy guarantee
  covers the non-NaN values; the NaN count itself is not used or released by
  these functions (if the caller releases it, that must be accounted for
  separately).
* With zero (non-NaN) values the output is a uniform draw in
  ``[lower, upper]``, which is trivially DP.

Known limitation (inherent to this mechanism, not a bug)
--------------------------------------------------------
Tied values produce zero-length intervals, which can never be chosen.  When
*all* values are exactly equal to ``c`` the output density is constant on
``[lower, c)`` and on ``(c, upper]``, so the estimate is NOT concentrated
near ``c`` (e.g. the median is uniform on ``[lower, c]`` or ``[c, upper]``
with probability 1/2 each).  No pure-DP mechanism can put an atom at a
data-dependent point, so callers with heavily discretised columns should
either jitter / dequantise with data-independent noise before calling, or
treat such columns as categorical.  Data that are merely concentrated (tiny
but non-zero gaps) are handled well.

Likewise ``q = 0`` (``q = 1``) gives the gap ``[lower, min]``
(``[max, upper]``) utility 0, so the estimate is roughly uniform over that
gap; a loose public range then yields a loose estimate.  This is why
:func:`dp_bounds` defaults to ``q_low=0.01, q_high=0.99``.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pandas as pd

from ..encoding.engine import Counting
from ..schema import Schema, SchemaError
from .ledger import BOUNDS, PrivacyLedger
from .randomness import secret_rng

__all__ = ["dp_quantile", "dp_bounds", "dp_range", "log_candidates", "estimate_missing_bounds", "DEFAULT_COARSE_RANGE"]


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------

def _as_float(name: str, x: Any) -> float:
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be a real number, got bool {x!r}")
    try:
        v = float(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number, got {x!r}") from exc
    return v


def _check_epsilon(epsilon: Any) -> float:
    eps = _as_float("epsilon", epsilon)
    if not math.isfinite(eps) or eps <= 0.0:
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return eps


def _check_q(name: str, q: Any) -> float:
    qq = _as_float(name, q)
    if not (0.0 <= qq <= 1.0):  # also rejects NaN
        raise ValueError(f"{name} must be in [0, 1], got {q!r}")
    return qq


def _check_range(lower: Any, upper: Any) -> tuple[float, float]:
    lo = _as_float("lower", lower)
    hi = _as_float("upper", upper)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(
            f"lower and upper must be finite, got lower={lower!r}, upper={upper!r}"
        )
    if not lo < hi:
        raise ValueError(
            f"lower must be strictly less than upper, got lower={lower!r}, upper={upper!r}"
        )
    return lo, hi


def _prepare_values(values: Any, lower: float, upper: float) -> np.ndarray:
    """Return sorted, clipped, NaN-free float64 values."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("values must be a 1-D array-like of numbers") from exc
    if arr.ndim == 0:
        arr = arr.reshape(1)
    elif arr.ndim != 1:
        raise ValueError(f"values must be 1-D, got an array with shape {arr.shape}")
    arr = arr[~np.isnan(arr)]  # NaN count is not used anywhere
    arr = np.clip(arr, lower, upper)  # +/-inf are clipped to the bounds too
    arr.sort()
    return arr


# ---------------------------------------------------------------------------
# core mechanism
# ---------------------------------------------------------------------------

def _dp_quantile_samples(
    values: Any,
    q: float,
    epsilon: float,
    lower: float,
    upper: float,
    rng: Any = None,
    size: int = 1,
) -> np.ndarray:
    """Draw ``size`` independent outputs of the DP quantile mechanism.

    Internal helper (each draw is a separate epsilon-DP release; ``size > 1``
    costs ``size * epsilon`` under basic composition).  It exists so that
    tests and simulations can sample the mechanism's distribution cheaply:
    the interval weights are computed once and reused.
    """
    q = _check_q("q", q)
    eps = _check_epsilon(epsilon)
    lo, hi = _check_range(lower, upper)
    size = int(size)
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    gen = np.random.default_rng(rng)

    x = _prepare_values(values, lo, hi)
    n = x.size
    if n == 0:
        return np.clip(gen.uniform(lo, hi, size=size), lo, hi)

    # end points x_0 = lower, ..., x_{n+1} = upper -> n + 1 intervals
    edges = np.empty(n + 2, dtype=np.float64)
    edges[0] = lo
    edges[1:-1] = x
    edges[-1] = hi
    lengths = np.diff(edges)  # >= 0 since sorted & clipped; sum = hi - lo > 0

    idx = np.arange(n + 1, dtype=np.float64)
    utility = -np.abs(idx - q * n)
    with np.errstate(divide="ignore"):
        log_w = np.log(lengths) + (eps / 2.0) * utility  # -inf for zero length
    m = np.max(log_w)  # finite: at least one interval has positive length
    w = np.exp(log_w - m)  # in (0, 1], max is exactly 1
    cdf = np.cumsum(w)
    total = cdf[-1]

    u = gen.random(size) * total
    chosen = np.searchsorted(cdf, u, side="right")
    np.minimum(chosen, n, out=chosen)  # guard against u == total rounding
    # never pick a zero-weight interval (can only happen via rounding ties)
    bad = w[chosen] <= 0.0
    if np.any(bad):  # pragma: no cover - defensive
        pos = np.flatnonzero(w > 0.0)
        j = np.searchsorted(pos, chosen[bad])
        chosen[bad] = pos[np.minimum(j, pos.size - 1)]

    left = edges[chosen]
    right = edges[chosen + 1]
    out = left + gen.random(size) * (right - left)
    return np.clip(out, lo, hi)


def dp_quantile(
    values: Any,
    q: float,
    epsilon: float,
    lower: float,
    upper: float,
    rng: Any = None,
) -> float:
    """Pure epsilon-DP estimate of the ``q``-quantile of ``values``.

    Exponential mechanism over the intervals between sorted data points
    (Smith 2011); see the module docstring for the mechanism and its privacy
    argument (utility sensitivity 1 under both replace-one and add/remove-one
    neighbouring).

    Parameters
    ----------
    values:
        1-D array-like of numbers.  NaNs are dropped before use (the NaN
        count itself is not used); remaining values are clipped into
        ``[lower, upper]``.
    q:
        Quantile in ``[0, 1]``.
    epsilon:
        Privacy budget, finite and ``> 0``.
    lower, upper:
        PUBLIC, data-independent coarse range, finite with
        ``lower < upper``.  The output always lies in ``[lower, upper]``.
    rng:
        ``numpy.random.Generator``, an integer seed, or ``None`` (fresh OS
        entropy).

    Returns
    -------
    float
        The DP quantile estimate.  With zero non-NaN values this is a
        uniform draw in ``[lower, upper]``.

    Raises
    ------
    ValueError
        If ``q`` is not in ``[0, 1]``, ``epsilon`` is not finite and
        positive, ``lower``/``upper`` are not finite with ``lower < upper``,
        or ``values`` is not 1-D numeric.
    """
    return float(_dp_quantile_samples(values, q, epsilon, lower, upper, rng, 1)[0])


def dp_bounds(
    values: Any,
    epsilon: float,
    lower: float,
    upper: float,
    q_low: float = 0.01,
    q_high: float = 0.99,
    rng: Any = None,
    integer: bool = False,
) -> tuple[float, float]:
    """Pure epsilon-DP estimate of a ``(low, high)`` range of ``values``.

    Runs :func:`dp_quantile` twice, for ``q_low`` and ``q_high``, each with
    ``epsilon / 2``; by basic (sequential) composition the whole call is
    epsilon-DP.  Everything after the two draws is post-processing and does
    not look at the data again:

    * if the draws cross (``low > high``) they are swapped, so
      ``low <= high`` always holds;
    * if they are equal they are returned equal (the caller must handle a
      degenerate range; widening is not done here);
    * with ``integer=True``, ``low`` is floored and ``high`` ceiled (the
      result then lies in ``[floor(lower), ceil(upper)]``).

    Parameters
    ----------
    values:
        1-D array-like; NaNs dropped (NaN count not used), clipped into
        ``[lower, upper]``.
    epsilon:
        Total privacy budget for the call, finite and ``> 0``.
    lower, upper:
        PUBLIC coarse range, finite, ``lower < upper``.
    q_low, q_high:
        Quantiles to estimate, ``0 <= q_low <= q_high <= 1``.
    rng:
        ``numpy.random.Generator``, an integer seed, or ``None``.
    integer:
        Floor ``low`` and ceil ``high``.

    Returns
    -------
    tuple[float, float]
        ``(low, high)`` with ``low <= high``.
    """
    eps = _check_epsilon(epsilon)
    ql = _check_q("q_low", q_low)
    qh = _check_q("q_high", q_high)
    if ql > qh:
        raise ValueError(f"q_low must be <= q_high, got q_low={q_low!r}, q_high={q_high!r}")
    lo_b, hi_b = _check_range(lower, upper)
    gen = np.random.default_rng(rng)

    low = dp_quantile(values, ql, eps / 2.0, lo_b, hi_b, gen)
    high = dp_quantile(values, qh, eps / 2.0, lo_b, hi_b, gen)
    if low > high:
        low, high = high, low
    if integer:
        low = float(math.floor(low))
        high = float(math.ceil(high))
    return float(low), float(high)


# ---------------------------------------------------------------------------
# quantiles over a finite grid of round candidates
# ---------------------------------------------------------------------------
def log_candidates(lower: float = -1e9, upper: float = 1e9) -> np.ndarray:
    """Round candidate values for a bound: 0 and ±1, 2, 5 × 10^k (k = −3..9) inside [lower, upper],
    plus the two ends. A log scale needs no idea of a column's magnitude: ages, amounts in millions
    and fractions all have candidates within a factor of 2.5 of any value."""
    lower, upper = _check_range(lower, upper)
    mags = np.array([m * 10.0 ** k for k in range(-3, 10) for m in (1, 2, 5)])
    grid = np.concatenate([-mags[::-1], [0.0], mags, [lower, upper]])
    return np.unique(grid[(grid >= lower) & (grid <= upper)])


def dp_range(values: Any, epsilon: float, edges: Any, rng: Any = None, beta: float = 1e-3) -> tuple[float, float] | None:
    """Pure ε-DP range of `values` from a noisy histogram over PUBLIC bin edges (Google's
    "approximate bounds").

    Every value falls in one bin [edges[i], edges[i+1]) (values beyond the edges in the end bins),
    so adding or removing a row changes one count by 1: Laplace(1/ε) noise on each count is ε-DP,
    and everything after is post-processing. The range runs from the left edge of the lowest bin
    whose noisy count reaches τ to the right edge of the highest such bin, with τ = ln(K / 2β) / ε
    for K bins: an empty bin passes with chance at most β over all of them. Bins holding fewer rows
    than about τ may be left out (their rows are clipped later). None when no bin passes: too few
    rows for this ε."""
    e = _range_edges(edges)
    x = _prepare_values(values, float(e[0]), float(e[-1]))
    cells = np.clip(np.searchsorted(e, x, side="right") - 1, 0, e.size - 2)
    counts = np.bincount(cells, minlength=e.size - 1)
    return dp_range_of_counts(counts, epsilon, e, rng, beta)


def _range_edges(edges: Any) -> np.ndarray:
    e = np.unique(np.asarray(edges, dtype=float))
    if e.size < 2 or not np.isfinite(e).all():
        raise ValueError("edges must hold at least two finite numbers")
    return e


def dp_range_of_counts(counts: np.ndarray, epsilon: float, edges: Any, rng: Any = None,
                       beta: float = 1e-3) -> tuple[float, float] | None:
    """`dp_range` from the exact counts of the values in the bins between `edges` (a table the
    engine holds counts them there: `encoding.engine.Counting.histogram`)."""
    eps = _check_epsilon(epsilon)
    e = _range_edges(edges)
    gen = np.random.default_rng(rng)
    noisy = counts + gen.laplace(0.0, 1.0 / eps, size=counts.size)
    tau = math.log(counts.size / (2 * beta)) / eps
    passing = np.flatnonzero(noisy >= tau)
    if passing.size == 0:
        return None
    return float(e[passing[0]]), float(e[passing[-1] + 1])


# ---------------------------------------------------------------------------
# bounds a schema lacks, paid from the run's budget
# ---------------------------------------------------------------------------
# The public range DP bound estimation searches when the steward states none: the log grid reaches
# ±1e9. A range the steward states also adds 20 even steps across it to the candidates.
DEFAULT_COARSE_RANGE = (-1e9, 1e9)


def bound_candidates(coarse_range: tuple[float, float] = DEFAULT_COARSE_RANGE) -> np.ndarray:
    lo, hi = _check_range(*coarse_range)
    grid = log_candidates(lo, hi)
    if (lo, hi) != DEFAULT_COARSE_RANGE:
        grid = np.unique(np.concatenate([grid, np.linspace(lo, hi, 21)]))
    return grid


def estimate_missing_bounds(table: pd.DataFrame, schema: Schema, epsilon: float, ledger: PrivacyLedger,
                            coarse_range: tuple[float, float] = DEFAULT_COARSE_RANGE) -> Schema:
    """A copy of `schema` whose numeric columns without bounds get DP estimates of their range.

    Each column's range comes from a noisy histogram over round bin edges (dp_range over
    bound_candidates: a log grid, or the steward's coarse range), so the bounds are round numbers,
    fall outward of the bulk of the data, and a wide search range costs nothing. The ε is split
    evenly over those columns and recorded in the ledger, with a warning for a bound on the edge of
    the search range (state a coarse range then). Values beyond the estimates are later clipped (and
    counted) by validation. The draws are secret (privacy.secret_rng). A column too small for its
    share of ε raises a SchemaError naming it."""
    missing = [c for c in schema.columns if c.is_numeric and not c.has_bounds]
    if not missing:
        return schema
    if epsilon <= 0:
        schema.require_bounds()  # raises with the list of columns
    out = copy.deepcopy(schema)
    per_column = epsilon / len(missing)
    rng = secret_rng()
    estimates, warnings, failed = {}, [], []
    for spec in missing:
        edges = bound_candidates(coarse_range)
        if spec.lower is not None:
            edges = np.unique(np.append(edges[edges >= spec.lower], spec.lower))
        if spec.upper is not None:
            edges = np.unique(np.append(edges[edges <= spec.upper], spec.upper))
        if isinstance(table, Counting):  # a table the engine holds: counted there
            counts = table.histogram(spec.name, np.unique(edges))
            found = dp_range_of_counts(counts, per_column, edges, rng)
        else:
            values = pd.to_numeric(table[spec.name], errors="coerce").to_numpy(dtype=float)
            found = dp_range(values, per_column, edges, rng)
        if found is None:
            failed.append(spec.name)
            continue
        lo = spec.lower if spec.lower is not None else found[0]
        hi = spec.upper if spec.upper is not None else found[1]
        if hi <= lo:
            hi = lo + 1.0
        if (spec.lower is None and lo <= edges[0]) or (spec.upper is None and hi >= edges[-1]):
            warnings.append(f"the DP bounds of {spec.name!r} reached the edge of the search range "
                            f"[{edges[0]:g}, {edges[-1]:g}]: declare the column's bounds, or state a coarse range")
        target = out[spec.name]
        if spec.kind == "integer":
            target.lower, target.upper = int(math.floor(lo)), int(math.ceil(hi))
        else:
            target.lower, target.upper = float(lo), float(hi)
        estimates[spec.name] = [target.lower, target.upper]
    ledger.record("DP range of numeric columns without bounds (noisy histogram over round bins, Laplace)",
                  epsilon=epsilon, delta=0.0, kind=BOUNDS, columns=[c.name for c in missing],
                  coarse_range=list(coarse_range), estimates=estimates, warnings=warnings)
    if failed:
        raise SchemaError(f"too few rows to estimate the bounds of {', '.join(map(repr, failed))} privately with "
                          f"ε = {per_column:.3g} per column: declare their bounds in the schema, or spend more ε on "
                          "them (the ε spent is recorded)")
    return out
