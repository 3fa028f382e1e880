"""A numeric column's public scale: everything that maps a column to or from its public range asks
its ColumnSpec, which has these from `PublicScale` (its bounds, its log rule, the precision it is
written at, released quantiles, the values it takes and the values that hold a share of its rows of
their own). Nothing here reads the private table.

A declared value set (`values`: codes, brackets written as their midpoints, Likert items, rates from
a short list) is the column's whole range: its bins hold whole values (one each where they are few),
a bin decodes to a value of the set, and `snap` puts any number a model writes on the nearest one. A
declared point mass (`points`: the 0 most amounts hold) gets a bin of its own and is drawn exactly,
as a value a rule names is."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .errors import SchemaError, finite_number


# a declared value set lists at most this many values (more: the column is continuous)
MAX_VALUES = 200
MAX_POINTS = 10    # declared point masses
# a value held by this share of a column's rows is proposed as a point mass (by the draft, and by
# the DP search, privacy.value_sets), at most PROPOSED_POINTS a column, the most held first: 5%
# and 6 against 10% and 3 took 2-way TVD lower on 21 of 25 paired runs on the 10 benchmark
# tables whose draft it changes (benchmarks/RESULTS.md, "Tables whose numbers are codes")
POINT_SHARE = 0.05
PROPOSED_POINTS = 6


class PublicScale:
    """The scale of a ColumnSpec (lower, upper, kind, binning, decimals, quantiles, values and
    points are its fields)."""

    def check_scale(self, where: str) -> None:
        """A numeric column's value set and point masses as this module reads them (sorted, each
        once, inside the bounds; a value set sets bounds it lacks); SchemaError naming the first
        problem."""
        for label, most in (("values", MAX_VALUES), ("points", MAX_POINTS)):
            given = getattr(self, label)
            if given is None:
                continue
            if not self.is_numeric:
                raise SchemaError(f"{where}: {label} are declared for a numeric column (a categorical column "
                                  "lists its categories)")
            if not isinstance(given, (list, tuple)) or not given or not all(finite_number(v) for v in given):
                raise SchemaError(f"{where}: {label} must be a non-empty list of numbers")
            if len(given) > most or (label == "values" and len(given) < 2):
                least = 2 if label == "values" else 1
                raise SchemaError(f"{where}: declare from {least} to {most} {label}, not {len(given)}")
            if self.kind == "integer" and any(float(v) != math.floor(v) for v in given):
                raise SchemaError(f"{where} is an integer column: its {label} must be whole numbers")
            if len({float(v) for v in given}) < len(given):
                raise SchemaError(f"{where}: {label} lists a number twice")
            setattr(self, label, sorted(given, key=float))
        if self.values is not None:
            self.lower = self.values[0] if self.lower is None else self.lower
            self.upper = self.values[-1] if self.upper is None else self.upper
            if self.points is not None and not set(map(float, self.points)) <= set(map(float, self.values)):
                raise SchemaError(f"{where}: a point mass is one of the column's values")
        for label in ("values", "points"):
            given = getattr(self, label)
            if given and self.has_bounds and not self.lower <= float(given[0]) <= float(given[-1]) <= self.upper:
                raise SchemaError(f"{where}: its {label} lie outside its bounds [{self.lower}, {self.upper}]")

    def written_values(self) -> np.ndarray | None:
        """The declared value set, ascending (None where the column declares none)."""
        return None if self.values is None else np.asarray(self.values, dtype=float)

    def snap(self, x) -> np.ndarray:
        """Numbers put on the nearest declared value (missing ones kept); as they are without a
        value set."""
        x = np.asarray(x, dtype=float)
        values = self.written_values()
        if values is None:
            return x
        i = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
        below, above = values[i - 1], values[i]
        out = np.where(np.abs(x - below) <= np.abs(above - x), below, above)
        return np.where(np.isnan(x), np.nan, out)

    def on_points(self, x) -> np.ndarray:
        """Numbers written at a declared point mass up to single precision (6.109248 stored as
        6.1092479) put on it exactly, so that the point's own bin holds them; others as they are."""
        x = np.asarray(x, dtype=float)
        for p in map(float, self.points or ()):
            x = np.where(np.abs(x - p) <= 1e-6 * max(1.0, abs(p)), p, x)
        return x

    def decode_bins(self, edges: np.ndarray, b: np.ndarray, rng: np.random.Generator,
                    how: str = "uniform") -> np.ndarray:
        """A value for each bin index b of `edges` that the column can take: a declared value inside
        the bin (the nearest where none is), else one of the values it is written at (whole numbers,
        multiples of 10^-decimals), else a number; drawn uniformly among them ("uniform") or the
        middle one ("midpoint")."""
        lo, hi = edges[b], edges[b + 1]
        last_bin = b == len(edges) - 2
        values = self.written_values()
        if values is not None:
            first = np.searchsorted(values, lo, side="left")
            last = np.where(last_bin, np.searchsorted(values, hi, side="right"),
                            np.searchsorted(values, hi, side="left")) - 1
            empty = first > last
            span = np.where(empty, 0, last - first)
            pick = first + (np.floor(rng.random(len(b)) * (span + 1)) if how == "uniform" else span // 2)
            inside = values[np.clip(pick, 0, len(values) - 1).astype(int)]
            return np.where(empty, self.snap((lo + hi) / 2), inside)
        # a value is drawn among those inside its bin (rounding a draw would move some across the
        # bin's edge: narrow bins, such as bins at quantiles, lost a sixth of their rows to the next
        # one)
        step = self.step
        if step is None:
            value = lo + rng.random(len(b)) * (hi - lo) if how == "uniform" else (lo + hi) / 2
            for point in self.exact_values():  # a bin of a point's own holds that point exactly
                below, above = self.point_edges(point)
                value = np.where((lo == below) & (hi == above), point, value)
            return np.clip(value, self.lower, self.upper)
        first = np.ceil(lo / step - 1e-9)
        last = np.where(last_bin, np.floor(hi / step + 1e-9), np.ceil(hi / step - 1e-9) - 1)
        empty = first > last  # a bin narrower than a step that holds no value
        if how == "uniform":
            value = first + np.floor(rng.random(len(b)) * (np.where(empty, 0, last - first) + 1))
        else:
            value = np.floor((first + last) / 2)
        value = np.where(empty, np.round((lo + hi) / 2 / step), value) * step
        if self.kind != "integer":
            value = np.round(value, self.decimals)
        return np.clip(value, self.lower, self.upper)

    def _range(self, bounds: tuple[float, float] | None) -> tuple[float, float]:
        lo, hi = bounds if bounds is not None else (self.lower, self.upper)
        if lo is None or hi is None:
            raise SchemaError(f"column {self.name!r} has no public bounds")
        return float(lo), float(hi)

    def as_written(self, x, missing: np.ndarray | None = None):
        """Numbers as a synthetic table holds this column: integers as int64 (pandas' Int64 where
        some are missing), other numbers as float with NaN for missing. `missing` defaults to where
        x is NaN."""
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
        """Values clipped to the public range and mapped to [0, 1]: linearly, or for log binning by
        log1p of the distance to the lower bound (fine resolution near the bound, for heavy-tailed
        amounts). `bounds` stands in for the public bounds where a caller has its own (the steward's
        review of a column without them)."""
        lo, hi = self._range(bounds)
        x = np.clip(np.asarray(x, dtype=float), lo, hi)
        if self.binning == "log":
            return np.log1p(x - lo) / np.log1p(hi - lo)
        return (x - lo) / (hi - lo)

    def from_unit(self, u, bounds: tuple[float, float] | None = None) -> np.ndarray:
        """The inverse of `to_unit`: points of [0, 1] (clipped) back to values inside the public
        range."""
        lo, hi = self._range(bounds)
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        if self.binning == "log":
            x = lo + np.expm1(u * np.log1p(hi - lo))
        else:
            x = lo + u * (hi - lo)
        return np.clip(x, lo, hi)

    def edges(self, n_bins: int, bounds: tuple[float, float] | None = None, per_integer: bool = True,
              quantile: bool = True) -> np.ndarray:
        """n_bins + 1 edges cutting the public range, evenly on the column's scale (see `to_unit`);
        an integer column whose range holds at most n_bins values gets one bin per integer
        (per_integer). A column with released quantiles (and `quantile`) is cut at the levels 0,
        1/n_bins, …, 1 of its quantile function instead (`quantile_edges`)."""
        lo, hi = self._range(bounds)
        values = self.written_values()
        if values is not None:
            return self._value_edges(values, n_bins, lo, hi, quantile and bounds is None)
        count = self.n_values(bounds)
        if per_integer and count is not None and count <= n_bins:
            # whole numbers, or a number written at a precision that allows few values (a rating
            # 1.0-5.0 to 0.5...): one bin each, centred on it
            step = self.step
            values = lo + step * np.arange(count)
            return np.r_[values - step / 2, values[-1] + step / 2]
        if quantile and self.quantiles and bounds is None:
            return self._with_rule_edges(self.quantile_edges(n_bins))
        if self.binning == "log":
            return self._with_rule_edges(lo + np.expm1(np.linspace(0.0, np.log1p(hi - lo), n_bins + 1)))
        return self._with_rule_edges(np.linspace(lo, hi, n_bins + 1))

    def _value_edges(self, values: np.ndarray, n_bins: int, lo: float, hi: float, quantile: bool) -> np.ndarray:
        """Edges halfway between declared values: one bin a value where they are at most n_bins,
        else the column's usual cut with each edge moved to the nearest halfway point (no value is
        split)."""
        halfway = (values[1:] + values[:-1]) / 2
        if len(values) > n_bins:
            cut = (self.quantile_edges(n_bins) if quantile and self.quantiles else
                   self.from_unit(np.linspace(0, 1, n_bins + 1), (lo, hi)))[1:-1]
            halfway = np.unique(halfway[np.abs(halfway[None, :] - cut[:, None]).argmin(axis=1)])
        return np.r_[min(lo, values[0]), halfway, max(hi, values[-1])]

    def point_edges(self, value: float) -> tuple[float, float]:
        """The edges of a bin that holds `value` alone: half a step either side, or for a column
        written at any precision, [value, the next float)."""
        half = self.step / 2 if self.step else 0.0
        return value - half, (value + half if half else float(np.nextafter(value, np.inf)))

    def exact_values(self) -> list[float]:
        """The values drawn exactly, not as a number that lands near them: those the schema's rules
        name (`rule_values`) and the declared point masses."""
        return sorted({*(getattr(self, "rule_values", None) or ()), *map(float, self.points or ())})

    def _with_rule_edges(self, edges: np.ndarray) -> np.ndarray:
        """The edges with those the schema's rules put in the scale (`rule_edges`) and those of the
        declared point masses' own bins; an edge of the cut closer than half a step to one of these
        is dropped (the bin between would hold no value)."""
        points = [e for p in self.points or () for e in self.point_edges(float(p))]
        extra = np.asarray([*(getattr(self, "rule_edges", None) or ()), *points], dtype=float)
        extra = extra[(extra > edges[0]) & (extra < edges[-1])]
        if not len(extra):
            return edges
        near = (self.step or 0.0) / 2
        inner = [e for e in edges[1:-1] if not (np.abs(extra - e) < max(near, 1e-12)).any()]
        return np.unique(np.r_[edges[0], inner, extra, edges[-1]])

    def n_values(self, bounds: tuple[float, float] | None = None) -> int | None:
        """How many values a numeric column can take between its public bounds (or `bounds`) at the
        precision it is written at (`step`); None where that precision is not declared or the bounds
        are not public."""
        if self.is_numeric and self.values is not None:
            return len(self.values)
        step = self.step if self.is_numeric else None
        lo, hi = bounds if bounds is not None else (self.lower, self.upper)
        if step is None or lo is None or hi is None:
            return None
        return int(round((float(hi) - float(lo)) / step)) + 1

    @property
    def step(self) -> float | None:
        """The distance between two values the column is written at: 1 for integers, 10^-decimals
        for a continuous column with declared decimals, None otherwise."""
        if self.kind == "integer":
            return 1.0
        return 10.0 ** -self.decimals if self.decimals is not None else None

    def quantile_edges(self, n_bins: int) -> np.ndarray:
        """Edges at the levels j/n_bins of the released quantile function (the bounds at levels 0
        and 1; between the released levels, linear on the column's scale, see `to_unit`). A value
        the quantiles repeat (a spike, such as a zero most rows hold) gets a narrow bin of its own;
        an integer column's edges fall halfway between whole numbers."""
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
        """How a chart shows the column: a point with a bar of its own, and the edges of at most
        n_bins bins over the rest of the public range, even on the column's scale (see `to_unit`).

        The point is the lower bound when it is zero or the scale is log (the bound a heavy-tailed
        amount starts from): zero-inflated and clipped values pile up there and would dwarf every
        other bar; None otherwise. An integer column's bins hold whole numbers, at least one each
        (edges halfway between)."""
        lo, hi = self._range(bounds)
        # a bar a value (or a few neighbouring values where they are many)
        if self.values is not None:
            return None, self.edges(n_bins, bounds=(lo, hi), quantile=False)
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


def on_declared_values(table: pd.DataFrame, schema) -> pd.DataFrame:
    """A sampled table with each numeric column that declares a value set put on its values
    (whatever family wrote it: a number a language model or a network wrote between them goes to the
    nearest)."""
    for spec in schema.columns:
        if spec.is_numeric and spec.values is not None and spec.name in table.columns:
            x = pd.to_numeric(table[spec.name], errors="coerce").to_numpy(dtype=float)
            table[spec.name] = spec.as_written(spec.snap(x))
    return table
