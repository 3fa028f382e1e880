"""Rows to numbers for the steward's evaluation: never an input to a model.

`PublicEncoder` maps rows to numbers using only the PUBLIC schema (bounds and category lists), never
statistics of the private table, so distances and projections of different runs share one scale:
numeric columns scaled to [0, 1] by their public bounds (ColumnSpec.to_unit: on a log1p scale for
columns declared with log binning), categorical columns one-hot over the public vocabulary with each
block scaled by 1/√2 (two different categories are at Euclidean distance 1, like two numbers at
opposite bounds), and a missing value as its own indicator.

`FeatureEncoder` prepares a table for scikit-learn learners (train-on-synthetic, detection,
attacks): it is fitted on the table a learner trains on (its frequent categories, its medians), as
any learner is.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..schema import Schema

# HistGradientBoosting accepts at most 255 categories per categorical feature
# (its default max_bins).  We keep the 253 most frequent values and reserve
# one code for "missing" and one for "other" (rare values lumped together).
HGB_MAX_KEPT_CATEGORIES = 253
# One-hot width cap per categorical column for the linear model.
ONEHOT_MAX_KEPT_CATEGORIES = 50


# --------------------------------------------------------------------------
# Column value helpers
# --------------------------------------------------------------------------
def numeric_values(series: pd.Series, col: Any, name: str) -> np.ndarray:
    """Column as float64 array with NaN for missing; ValueError if not numeric."""
    try:
        converted = pd.to_numeric(series, errors="raise")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"numeric column {col!r} in {name} contains non-numeric values") from exc
    return np.array(converted.to_numpy(dtype=float, na_value=np.nan), dtype=float, copy=True)


def string_values(series: pd.Series) -> np.ndarray:
    """Column as object array of ``str`` with ``None`` for missing values."""
    mask = series.isna().to_numpy()
    out = np.array(series.astype(str).to_numpy(dtype=object), dtype=object, copy=True)
    out[mask] = None
    return out


# --------------------------------------------------------------------------
# Feature encoding for the classifiers / regressors
# --------------------------------------------------------------------------
class FeatureEncoder:
    """Encode a table's features consistently for fitting and prediction.

    Numeric columns become float64 with NaN for missing.  Categorical columns
    (compared as strings) are mapped to the ``max_kept`` most frequent values
    seen at fit time; missing values get their own code, and values that are
    rare at fit time get an "other" code.  Values never seen at fit time map to
    NaN (HistGradientBoosting treats these as missing) in ordinal mode and to an
    all-zero row in one-hot mode.
    """

    def __init__(self, columns: Sequence[Any], numeric: set, max_kept: int):
        self.columns = list(columns)
        self.numeric = numeric
        self.max_kept = max_kept
        self.maps: dict[Any, dict[str, int]] = {}
        self.other_code: dict[Any, int | None] = {}
        self.medians: dict[Any, float] = {}
        self.seen: dict[Any, pd.Index] = {}

    def fit(self, df: pd.DataFrame, name: str) -> "FeatureEncoder":
        for col in self.columns:
            if col in self.numeric:
                values = numeric_values(df[col], col, name)
                finite = values[np.isfinite(values)]
                self.medians[col] = float(np.median(finite)) if finite.size else 0.0
                continue
            values = pd.Series(string_values(df[col]), dtype=object)
            counts = values.value_counts(dropna=True)  # sorted by frequency, descending
            kept = counts.index[: self.max_kept].tolist()
            mapping = {v: i for i, v in enumerate(kept)}
            self.maps[col] = mapping
            self.seen[col] = counts.index
            # code len(mapping) = missing; len(mapping)+1 = other (only if rare values exist)
            self.other_code[col] = len(mapping) + 1 if len(counts) > len(kept) else None
        return self

    def _categorical_codes(self, series: pd.Series, col: Any) -> np.ndarray:
        values = pd.Series(string_values(series), dtype=object)
        mapping = self.maps[col]
        codes = np.array(values.map(mapping).to_numpy(dtype=float, na_value=np.nan), copy=True)
        missing = values.isna().to_numpy()
        codes[missing] = len(mapping)
        other = self.other_code[col]
        if other is not None:
            rare = np.isnan(codes) & values.isin(self.seen[col]).to_numpy()
            codes[rare] = other
        return codes  # still NaN: unseen at fit time

    def transform_ordinal(self, df: pd.DataFrame, name: str) -> np.ndarray:
        """Float matrix: numeric values (NaN kept) and categorical codes."""
        cols = []
        for col in self.columns:
            if col in self.numeric:
                cols.append(numeric_values(df[col], col, name))
            else:
                cols.append(self._categorical_codes(df[col], col))
        return np.column_stack(cols)

    def categorical_mask(self) -> np.ndarray:
        return np.array([c not in self.numeric for c in self.columns], dtype=bool)

    def transform_onehot(self, df: pd.DataFrame, name: str) -> np.ndarray:
        """Dense matrix: numeric (NaN -> fit medians) and one-hot categoricals."""
        blocks = []
        for col in self.columns:
            if col in self.numeric:
                values = numeric_values(df[col], col, name)
                values = np.where(np.isfinite(values), values, self.medians[col])
                blocks.append(values[:, None])
            else:
                codes = self._categorical_codes(df[col], col)
                width = len(self.maps[col]) + 2  # kept + missing + other
                onehot = np.zeros((len(df), width))
                ok = ~np.isnan(codes)
                onehot[np.nonzero(ok)[0], codes[ok].astype(np.int64)] = 1.0
                blocks.append(onehot)
        return np.hstack(blocks)


def hgb_categorical(encoder: FeatureEncoder) -> np.ndarray | None:
    mask = encoder.categorical_mask()
    return mask if mask.any() else None


# --------------------------------------------------------------------------
# Detection AUC
# --------------------------------------------------------------------------


class PublicEncoder:
    """Rows -> numbers from the public schema only (see the module docstring).

    A numeric column without public bounds falls back to the 1%/99% quantiles of the table passed to
    `fit` (the real one); `fallback_columns` lists such columns so reports can say so."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.fallback_columns: list[str] = []
        self._bounds: dict[str, tuple[float, float]] = {}

    def fit(self, real: pd.DataFrame) -> "PublicEncoder":
        for spec in self.schema.columns:
            if not spec.is_numeric:
                continue
            if spec.has_bounds:
                self._bounds[spec.name] = (float(spec.lower), float(spec.upper))
            else:
                v = pd.to_numeric(real[spec.name], errors="coerce").dropna().to_numpy(dtype=float)
                lo, hi = (np.quantile(v, [0.01, 0.99]) if len(v) else (0.0, 1.0))
                lo = float(spec.lower) if spec.lower is not None else float(lo)
                hi = float(spec.upper) if spec.upper is not None else float(hi)
                self._bounds[spec.name] = (lo, hi if hi > lo else lo + 1.0)
                self.fallback_columns.append(spec.name)
        return self

    def scale_numeric(self, name: str, values: np.ndarray) -> np.ndarray:
        """Values of a numeric column scaled to [0, 1] by its bounds (log1p scale for log
        binning)."""
        return self.schema[name].to_unit(values, bounds=self._bounds[name])

    def feature_names(self) -> list[str]:
        names = []
        for spec in self.schema.columns:
            if spec.is_numeric:
                names.append(spec.name)
                if spec.nullable:
                    names.append(f"{spec.name}=<missing>")
            else:
                names += [f"{spec.name}={c}" for c in spec.vocabulary()]
                if spec.nullable:
                    names.append(f"{spec.name}=<missing>")
        return names

    def transform(self, table: pd.DataFrame) -> np.ndarray:
        """Float matrix for a canonical table (see `canonical`)."""
        if not self._bounds and self.schema.numeric_columns:
            raise RuntimeError("PublicEncoder.fit must be called first")
        n = len(table)
        blocks = []
        for spec in self.schema.columns:
            col = table[spec.name]
            miss = col.isna().to_numpy()
            if spec.is_numeric:
                v = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
                scaled = np.where(miss, 0.0, self.scale_numeric(spec.name, np.where(miss, self._bounds[spec.name][0], v)))
                blocks.append(scaled[:, None])
                if spec.nullable:
                    blocks.append(miss[:, None].astype(float))
            else:
                vocab = spec.vocabulary()
                codes = pd.Categorical(col.astype(object).where(~miss, None), categories=vocab).codes
                width = len(vocab) + (1 if spec.nullable else 0)
                onehot = np.zeros((n, width))
                ok = codes >= 0
                onehot[np.nonzero(ok)[0], codes[ok]] = 1.0
                if spec.nullable:
                    onehot[miss, len(vocab)] = 1.0
                blocks.append(onehot / np.sqrt(2.0))
        return np.hstack(blocks) if blocks else np.zeros((n, 0))
