"""Checks on what is compared, and the public-schema encoding every distance and projection uses.

`check_comparable` turns bad input into one `EvaluationError` naming the table and the problem:
missing or extra columns, wrong types, values outside the public categories, zero rows, a target with
one class. `canonical` returns a table in the schema's canonical form (schema order, numbers as
float, categories as str, missing as NaN/None) so that every figure sees the same values.

`PublicEncoder` maps rows to numbers using only the PUBLIC schema (bounds and category lists), never
statistics of the private table, so distances and projections of different runs share one scale:
numeric columns scaled to [0, 1] by their public bounds (on a log1p scale for columns declared with
log binning), categorical columns one-hot over the public vocabulary with each block scaled by 1/√2
(two different categories are at Euclidean distance 1, like two numbers at opposite bounds), and a
missing value as its own indicator.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..schema import Schema, SchemaError, validate_table


class EvaluationError(ValueError):
    """Input an evaluation cannot use; the message names the table and the problem."""


def _columns_problem(df: pd.DataFrame, schema: Schema, name: str) -> str | None:
    cols = [str(c) for c in df.columns]
    missing = [c for c in schema.names if c not in cols]
    extra = [c for c in cols if c not in schema.names]
    parts = []
    if missing:
        parts.append(f"lacks column(s) the schema declares: {', '.join(map(repr, missing))}")
    if extra:
        parts.append(f"has column(s) the schema does not declare: {', '.join(map(repr, extra))}")
    return f"the {name} table " + "; and ".join(parts) if parts else None


def canonical(df: Any, schema: Schema, name: str = "table", allow_extra: bool = False) -> pd.DataFrame:
    """The table in the schema's canonical form; EvaluationError naming `name` for anything wrong."""
    if not isinstance(df, pd.DataFrame):
        raise EvaluationError(f"the {name} table must be a pandas DataFrame, not {type(df).__name__}")
    if len(df) == 0:
        raise EvaluationError(f"the {name} table has zero rows")
    problem = _columns_problem(df, schema, name)
    if problem and not (allow_extra and all(c in [str(x) for x in df.columns] for c in schema.names)):
        raise EvaluationError(problem)
    try:
        clean, _ = validate_table(df, schema)
    except SchemaError as e:
        raise EvaluationError(f"the {name} table does not fit the schema: {e}") from None
    return clean


def _check_target(df: pd.DataFrame, schema: Schema, target: str, name: str) -> None:
    if target not in schema:
        raise EvaluationError(f"the target {target!r} is not a column of the schema")
    values = df[target].dropna()
    if len(values) == 0:
        raise EvaluationError(f"the target {target!r} is missing in every row of the {name} table")
    if not schema[target].is_numeric and values.nunique() < 2:
        raise EvaluationError(
            f"the target {target!r} has one class only ({values.iloc[0]!r}) in the {name} table; "
            "a classifier needs at least two")


def check_comparable(real: Any, synthetic: Any, schema: Schema, target: str | None = None,
                     sensitive: str | None = None) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Check that the real table and the synthetic table(s) can be compared under `schema`.

    `synthetic` is a DataFrame or a dict {label: DataFrame}. Raises EvaluationError naming the table
    and the problem; returns the canonical real table and {label: canonical synthetic table}."""
    real_c = canonical(real, schema, "real")
    synths = as_dict(synthetic)
    out = {}
    for label, df in synths.items():
        name = "synthetic" if label == "synthetic" else f"synthetic ({label})"
        out[label] = canonical(df, schema, name)
    if target is not None:
        _check_target(real_c, schema, target, "real")
        for label, df in out.items():
            _check_target(df, schema, target, "synthetic" if label == "synthetic" else f"synthetic ({label})")
    if sensitive is not None and sensitive not in schema:
        raise EvaluationError(f"the sensitive column {sensitive!r} is not a column of the schema")
    return real_c, out


def as_dict(synthetic: Any) -> dict[str, Any]:
    """A DataFrame becomes {"synthetic": df}; a dict is checked to be {label: DataFrame}."""
    if isinstance(synthetic, pd.DataFrame):
        return {"synthetic": synthetic}
    if isinstance(synthetic, dict):
        if not synthetic:
            raise EvaluationError("no synthetic table was given (the dict of runs is empty)")
        if "real" in synthetic:
            raise EvaluationError("'real' is reserved for the real table; label the synthetic run differently")
        return {str(k): v for k, v in synthetic.items()}
    raise EvaluationError(f"the synthetic table must be a DataFrame or a dict of DataFrames, not {type(synthetic).__name__}")


def sample_rows(df: pd.DataFrame, max_rows: int | None, seed: int) -> pd.DataFrame:
    """At most `max_rows` rows drawn without replacement (all rows, in order, if the table is small)."""
    if max_rows is None or len(df) <= max_rows:
        return df.reset_index(drop=True)
    idx = np.sort(np.random.default_rng(seed).choice(len(df), size=max_rows, replace=False))
    return df.iloc[idx].reset_index(drop=True)


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
        """Values of a numeric column scaled to [0, 1] by its bounds (log1p scale for log binning)."""
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
