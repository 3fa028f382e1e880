"""Value sets and point masses the schema lacks, found with DP and paid from the run's ε (as DP
bounds are).

A numeric column with public bounds and a public precision (whole numbers, or a declared number of
decimals) can take only the values of its grid: lower, lower + step, …, upper. Counting the rows at
each grid value and adding Laplace(1/ε) noise to each count is ε-DP (a row adds to one count, its
column's; columns share ε by basic composition); keeping the values whose noisy count reaches τ =
ln(K / 2β) / ε (K grid values) lets an empty value through with chance at most β. Everything after
the noisy counts is post-processing:

- the kept values are the column's value set where there are 2 to MAX_VALUES of them and their noisy counts
  hold at least VALUE_SET_SHARE of the rows the run released (its noisy or public count): codes, brackets,
  a scale's steps;
- else the kept values that hold POINT_SHARE of those rows are its point masses (the 0 of amounts);
- else nothing is declared, and the column is modelled as before.

A value held by fewer rows than about τ is left out (its rows go to the nearest kept value). The
draws are secret (privacy.secret_rng); the mechanism, its ε, the columns and what was found are in
the ledger.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd

from ..encoding.engine import Counting
from ..schema import Schema, SchemaError
from ..schema.scale import MAX_VALUES, POINT_SHARE, PROPOSED_POINTS
from .ledger import VALUE_SETS, PrivacyLedger
from .randomness import secret_rng

# grid values a column may have to be searched (more: declare its values or decimals)
MAX_GRID = 10_000
# the share of the released rows the kept values hold to be the column's value set
VALUE_SET_SHARE = 0.9
BETA = 1e-3


def grid(spec) -> np.ndarray | None:
    """The values a numeric column can take by its public facts (bounds and precision), None where
    they are not all public or more than MAX_GRID."""
    count = spec.n_values() if spec.values is None else None
    if count is None or count > MAX_GRID:
        return None
    return np.round(float(spec.lower) + spec.step * np.arange(count), spec.decimals or 0)


def searchable(schema: Schema) -> list:
    """The numeric columns whose values a run may search: no value set or point mass declared, not
    derived, whole numbers or declared decimals (bounds may still be estimated before the
    search)."""
    return [c for c in schema.columns if c.is_numeric and c.values is None and c.points is None
            and not c.derived and c.step is not None]


def noisy_grid_counts(values: np.ndarray | Counting, candidates: np.ndarray, epsilon: float,
                      rng: np.random.Generator, name: str = "") -> np.ndarray:
    """Laplace(1/ε) noise on the count of rows at each candidate value (a value off the grid counts
    at the nearest candidate; a missing one nowhere): ε-DP. Of a table the engine holds: its
    column `name`, counted there."""
    counts = grid_counts(values, candidates, name)
    return counts + rng.laplace(0.0, 1.0 / epsilon, size=len(candidates))


def grid_counts(values: np.ndarray | Counting, candidates: np.ndarray, name: str = ""
                ) -> np.ndarray:
    """The rows at each candidate value, a value off the grid at the nearest (the lower of two as
    near); of a table the engine holds (`name`: the column), counted there between the
    candidates' midpoints."""
    if isinstance(values, Counting):
        # a value on a midpoint belongs below it: each cell's upper edge just past its midpoint
        mids = np.nextafter((candidates[:-1] + candidates[1:]) / 2, np.inf)
        edges = np.r_[-np.inf, mids, np.inf]
        return values.histogram(name, edges)
    x = values[~np.isnan(values)]
    nearest = np.clip(np.searchsorted(candidates, x), 1, max(1, len(candidates) - 1))
    below = candidates[nearest - 1]
    above = candidates[np.minimum(nearest, len(candidates) - 1)]
    index = np.where(np.abs(x - below) <= np.abs(above - x), nearest - 1, np.minimum(nearest, len(candidates) - 1))
    return np.bincount(index, minlength=len(candidates)).astype(float)


def decide(candidates: np.ndarray, noisy: np.ndarray, epsilon: float, released_rows: float,
           integer: bool) -> tuple[list | None, list | None]:
    """(value set, point masses) from a column's noisy counts alone (post-processing)."""
    tau = math.log(len(candidates) / (2 * BETA)) / epsilon
    kept = noisy >= tau
    def written(values):
        return [int(v) for v in values] if integer else [float(v) for v in values]
    if 2 <= kept.sum() <= MAX_VALUES and noisy[kept].sum() >= VALUE_SET_SHARE * released_rows:
        return written(candidates[kept]), None
    heavy = np.flatnonzero(kept & (noisy >= POINT_SHARE * released_rows))
    heavy = heavy[np.argsort(-noisy[heavy])][:PROPOSED_POINTS]
    return None, (sorted(written(candidates[heavy])) if len(heavy) else None)


def find_value_sets(table: pd.DataFrame, schema: Schema, epsilon: float, ledger: PrivacyLedger,
                    released_rows: float) -> Schema:
    """A copy of `schema` with the value sets and point masses found with DP for its searchable
    columns (`searchable`, with a grid of at most MAX_GRID values), ε split evenly over them and
    recorded in the ledger. SchemaError when no column can be searched (nothing is spent then)."""
    columns = [c for c in searchable(schema) if grid(c) is not None]
    if not columns:
        raise SchemaError("no number column can have its values found: each needs public bounds and a precision "
                          f"(whole numbers, or declared decimals) giving at most {MAX_GRID:,} values, and no "
                          "values of its own; declare its values, or spend no ε on finding them")
    out, per_column, rng = copy.deepcopy(schema), epsilon / len(columns), secret_rng()
    found = {}
    for spec in columns:
        candidates = grid(spec)
        values = table if isinstance(table, Counting) else \
            pd.to_numeric(table[spec.name], errors="coerce").to_numpy(dtype=float)
        noisy = noisy_grid_counts(values, candidates, per_column, rng, spec.name)
        value_set, points = decide(candidates, noisy, per_column, max(float(released_rows), 1.0),
                                   spec.kind == "integer")
        target = out[spec.name]
        target.values, target.points = value_set, points
        target.check()
        found[spec.name] = {"values": value_set, "points": points}
    ledger.record("DP value sets of numeric columns (noisy counts of each value of the public grid, Laplace)",
                  epsilon=epsilon, delta=0.0, kind=VALUE_SETS, columns=[c.name for c in columns], found=found)
    return out
