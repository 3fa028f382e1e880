"""A numeric column's public scale: everything that maps a column to or from its public range asks its
ColumnSpec, which has these from `PublicScale` (its bounds, its log rule, the precision it is written at,
released quantiles). Nothing here reads the private table."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


class PublicScale:
    """The scale of a ColumnSpec (lower, upper, kind, binning, decimals, quantiles are its fields)."""

    def _range(self, bounds: tuple[float, float] | None) -> tuple[float, float]:
        lo, hi = bounds if bounds is not None else (self.lower, self.upper)
        if lo is None or hi is None:
            from .spec import SchemaError
            raise SchemaError(f"column {self.name!r} has no public bounds")
        return float(lo), float(hi)

    def as_written(self, x, missing: np.ndarray | None = None):
        """Numbers as a synthetic table holds this column: integers as int64 (pandas' Int64 where some are
        missing), other numbers as float with NaN for missing. `missing` defaults to where x is NaN."""
        x = np.asarray(x, dtype=float)
        missing = np.isnan(x) if missing is None else np.asarray(missing, dtype=bool)
        if self.kind == "integer":
            whole = np.where(missing, 0, np.round(np.nan_to_num(x))).astype(np.int64)
            if missing.any():
                out = pd.array(whole, dtype="Int64")
                out[missing] = pd.NA
                return out
            return whole
        x = x.copy()
        x[missing] = np.nan
        return x

    def to_unit(self, x, bounds: tuple[float, float] | None = None) -> np.ndarray:
        """Values clipped to the public range and mapped to [0, 1]: linearly, or for log binning by log1p of the
        distance to the lower bound (fine resolution near the bound, for heavy-tailed amounts). `bounds`
        stands in for the public bounds where a caller has its own (the steward's review of a column
        without them)."""
        lo, hi = self._range(bounds)
        x = np.clip(np.asarray(x, dtype=float), lo, hi)
        if self.binning == "log":
            return np.log1p(x - lo) / np.log1p(hi - lo)
        return (x - lo) / (hi - lo)

    def from_unit(self, u, bounds: tuple[float, float] | None = None) -> np.ndarray:
        """The inverse of `to_unit`: points of [0, 1] (clipped) back to values inside the public range."""
        lo, hi = self._range(bounds)
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        if self.binning == "log":
            x = lo + np.expm1(u * np.log1p(hi - lo))
        else:
            x = lo + u * (hi - lo)
        return np.clip(x, lo, hi)

    def edges(self, n_bins: int, bounds: tuple[float, float] | None = None, per_integer: bool = True,
              quantile: bool = True) -> np.ndarray:
        """n_bins + 1 edges cutting the public range, evenly on the column's scale (see `to_unit`); an integer
        column whose range holds at most n_bins values gets one bin per integer (per_integer). A column with
        released quantiles (and `quantile`) is cut at the levels 0, 1/n_bins, …, 1 of its quantile function
        instead (`quantile_edges`)."""
        lo, hi = self._range(bounds)
        count = self.n_values(bounds)
        if per_integer and count is not None and count <= n_bins:
            # whole numbers, or a number written at a precision that allows few values (a rating 1.0-5.0 to
            # 0.5...): one bin each, centred on it
            step = self.step
            values = lo + step * np.arange(count)
            return np.r_[values - step / 2, values[-1] + step / 2]
        if quantile and self.quantiles and bounds is None:
            return self._with_rule_edges(self.quantile_edges(n_bins))
        if self.binning == "log":
            return self._with_rule_edges(lo + np.expm1(np.linspace(0.0, np.log1p(hi - lo), n_bins + 1)))
        return self._with_rule_edges(np.linspace(lo, hi, n_bins + 1))

    def _with_rule_edges(self, edges: np.ndarray) -> np.ndarray:
        """The edges with those the schema's rules put in the scale (`rule_edges`); an edge of the cut closer
        than half a step to one of the rules' is dropped (the bin between would hold no value)."""
        extra = np.asarray(getattr(self, "rule_edges", None) or (), dtype=float)
        extra = extra[(extra > edges[0]) & (extra < edges[-1])]
        if not len(extra):
            return edges
        near = (self.step or 0.0) / 2
        inner = [e for e in edges[1:-1] if not (np.abs(extra - e) < max(near, 1e-12)).any()]
        return np.unique(np.r_[edges[0], inner, extra, edges[-1]])

    def n_values(self, bounds: tuple[float, float] | None = None) -> int | None:
        """How many values a numeric column can take between its public bounds (or `bounds`) at the precision
        it is written at (`step`); None where that precision is not declared or the bounds are not public."""
        step = self.step if self.is_numeric else None
        lo, hi = bounds if bounds is not None else (self.lower, self.upper)
        if step is None or lo is None or hi is None:
            return None
        return int(round((float(hi) - float(lo)) / step)) + 1

    @property
    def step(self) -> float | None:
        """The distance between two values the column is written at: 1 for integers, 10^-decimals for a
        continuous column with declared decimals, None otherwise."""
        if self.kind == "integer":
            return 1.0
        return 10.0 ** -self.decimals if self.decimals is not None else None

    def quantile_edges(self, n_bins: int) -> np.ndarray:
        """Edges at the levels j/n_bins of the released quantile function (the bounds at levels 0 and 1; between
        the released levels, linear on the column's scale, see `to_unit`). A value the quantiles repeat (a spike,
        such as a zero most rows hold) gets a narrow bin of its own; an integer column's edges fall halfway
        between whole numbers."""
        lo, hi = float(self.lower), float(self.upper)
        known = np.r_[lo, np.asarray(self.quantiles, float), hi]
        cuts = self.from_unit(np.interp(np.linspace(0, 1, n_bins + 1), np.linspace(0, 1, len(known)),
                                        self.to_unit(known)))
        spikes = np.unique(known[1:-1][np.isclose(np.diff(known)[1:], 0) | np.isclose(np.diff(known)[:-1], 0)])
        if self.kind == "integer":
            edges = np.r_[np.floor(cuts) + 0.5, spikes - 0.5, spikes + 0.5, lo - 0.5, hi + 0.5]
            return np.unique(np.clip(edges, lo - 0.5, hi + 0.5))
        width = 10.0 ** -self.decimals if self.decimals is not None else (hi - lo) * 1e-6
        edges = np.unique(np.clip(np.r_[cuts, spikes, spikes + width, lo, hi], lo, hi))
        return edges

    def chart_bins(self, n_bins: int = 20, bounds: tuple[float, float] | None = None
                   ) -> tuple[float | None, np.ndarray]:
        """How a chart shows the column: a point with a bar of its own, and the edges of at most n_bins bins over
        the rest of the public range, even on the column's scale (see `to_unit`).

        The point is the lower bound when it is zero or the scale is log (the bound a heavy-tailed amount
        starts from): zero-inflated and clipped values pile up there and would dwarf every other bar; None
        otherwise. An integer column's bins hold whole numbers, at least one each (edges halfway between)."""
        lo, hi = self._range(bounds)
        point = lo if lo == 0 or self.binning == "log" else None
        if self.kind != "integer":
            return point, self.edges(n_bins, bounds=(lo, hi), per_integer=False, quantile=False)
        start = lo + 1 if point is not None else lo  # the whole numbers the bins hold: start..hi
        if self.binning == "log":
            cuts = np.floor(self.edges(n_bins, bounds=(lo, hi), per_integer=False, quantile=False)) + 0.5
            inner = cuts[(cuts > start - 0.5) & (cuts < hi + 0.5)]
            return point, np.unique(np.r_[start - 0.5, inner, hi + 0.5])
        width = max(1, math.ceil((hi - start + 1) / n_bins))
        return point, np.r_[np.arange(start - 0.5, hi + 0.5, width), hi + 0.5]
