"""Checks on what is compared, and the public-schema encoding every distance and projection uses.

`check_comparable` turns bad input into one `EvaluationError` naming the table and the problem:
missing columns, wrong types, values outside the public categories, zero rows, a target with one
class. Columns the schema does not declare (an identifier, a case number: the table as the steward
uploaded it) are left out of every comparison, never an error (schema.schema_columns; the CLI says
which, once). `canonical` returns a table in the schema's canonical form (schema order, numbers as
float, categories as str, missing as NaN/None) so that every figure sees the same values.
The public-schema encoding every distance and projection uses is evaluate.features.PublicEncoder.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..schema import Schema, SchemaError, schema_columns, validate_table


class EvaluationError(ValueError):
    """Input an evaluation cannot use; the message names the table and the problem."""


def _columns_problem(df: pd.DataFrame, schema: Schema, name: str) -> str | None:
    cols = [str(c) for c in df.columns]
    # derived: computed
    missing = [c.name for c in schema.columns if c.name not in cols and not c.derived]
    if missing:
        return f"the {name} table lacks column(s) the schema declares: {', '.join(map(repr, missing))}"
    return None


def canonical(df: Any, schema: Schema, name: str = "table") -> pd.DataFrame:
    """The table in the schema's canonical form, the columns the schema does not declare left out;
    EvaluationError naming `name` for anything wrong."""
    if not isinstance(df, pd.DataFrame):
        raise EvaluationError(f"the {name} table must be a pandas DataFrame, not {type(df).__name__}")
    if len(df) == 0:
        raise EvaluationError(f"the {name} table has zero rows")
    problem = _columns_problem(df, schema, name)
    if problem:
        raise EvaluationError(problem)
    try:
        # every row kept: the review measures how well each table obeys the rules
        # (evaluate/fidelity.py)
        clean, _ = validate_table(schema_columns(df, schema)[0], schema, hold_rules=False)
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


def target_problem(df: pd.DataFrame, schema: Schema, target: str, name: str) -> str | None:
    """Why `target` in `df` cannot train a classifier (missing everywhere, one class), or None."""
    try:
        _check_target(df, schema, target, name)
    except EvaluationError as e:
        return str(e)
    return None


def check_comparable(real: Any, synthetic: Any, schema: Schema, target: str | None = None,
                     sensitive: str | None = None, synthetic_target: bool = True
                     ) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Check that the real table and the synthetic table(s) can be compared under `schema`.

    `synthetic` is a DataFrame or a dict {label: DataFrame}. Raises EvaluationError naming the table
    and the problem; returns the canonical real table and {label: canonical synthetic table}.
    `synthetic_target=False` checks the target in the real table only (a report lists a synthetic
    table whose target collapsed to one class as a finding, see `target_problem`)."""
    real_c = canonical(real, schema, "real")
    synths = as_dict(synthetic)
    out = {}
    for label, df in synths.items():
        name = "synthetic" if label == "synthetic" else f"synthetic ({label})"
        out[label] = canonical(df, schema, name)
    if target is not None:
        _check_target(real_c, schema, target, "real")
        for label, df in (out.items() if synthetic_target else ()):
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
    """At most `max_rows` rows drawn without replacement (all rows, in order, if the table is
    small)."""
    if max_rows is None or len(df) <= max_rows:
        return df.reset_index(drop=True)
    idx = np.sort(np.random.default_rng(seed).choice(len(df), size=max_rows, replace=False))
    return df.iloc[idx].reset_index(drop=True)
