"""Private tables against the public schema: validate a table, and draw random rows from the schema
alone (reading files: schema/reading.py; drafting a schema from a table: schema/draft.py)."""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .rules import hold_private_table
from .spec import ColumnSpec, Schema, SchemaError, _preview


# --- validation --------------------------------------------------------------------------------
@dataclass
class ColumnReport:
    clipped_low: int = 0
    clipped_high: int = 0
    rounded: int = 0
    snapped: int = 0         # a value between the declared values, put on the nearest
    mapped_unknown: int = 0
    missing: int = 0
    inconsistent: int = 0    # a derived column: rows whose value is not what its rule gives
    not_dates: int = 0       # a column of dates: values that are no date, read as missing


@dataclass
class ValidationReport:
    """What validation changed, per column; nothing is dropped without appearing here."""

    rows: int
    columns: dict[str, ColumnReport]
    ignored_columns: list[str]
    # the schema's rules (schema/rules.py): how many rows broke each, and how many rows that dropped
    # (a row breaking two rules counts once; `rows` is after)
    rule_breaks: dict[str, int] = field(default_factory=dict)
    dropped_for_rules: int = 0

    def summary(self) -> list[str]:
        lines = []
        for name, r in self.columns.items():
            if r.clipped_low or r.clipped_high:
                lines.append(f"{name}: {r.clipped_low} values below and {r.clipped_high} above the public bounds were clipped")
            if r.rounded:
                lines.append(f"{name}: {r.rounded} values were rounded to the declared precision")
            if r.snapped:
                lines.append(f"{name}: {r.snapped} values between the declared values were put on the nearest")
            if r.not_dates:
                lines.append(f"{name}: {r.not_dates} values that are not dates were read as "
                             "missing")
            if r.mapped_unknown:
                lines.append(f"{name}: {r.mapped_unknown} values outside the public categories were mapped to the unknown category")
            if r.inconsistent:
                lines.append(f"{name}: {r.inconsistent} rows disagree with the rule it is derived by; the model never "
                             "sees this column, and every synthetic row follows the rule")
        for rule, count in self.rule_breaks.items():
            if count:
                lines.append(f"{count:,} rows break the rule {rule!r}")
        if self.dropped_for_rules:
            lines.append(f"{self.dropped_for_rules:,} rows that break a declared rule were dropped; the model never sees them")
        if self.ignored_columns:
            lines.append(f"columns not in the schema, ignored: {', '.join(self.ignored_columns)}")
        return lines

    def to_dict(self) -> dict:
        return {"rows": self.rows, "columns": {k: asdict(v) for k, v in self.columns.items()},
                "ignored_columns": self.ignored_columns, "rule_breaks": dict(self.rule_breaks),
                "dropped_for_rules": self.dropped_for_rules}


def _number_text(value) -> str:
    """A number as a category's text: 1.0 and "1.0" are "1", 2.50 is "2.5"; anything else as it is
    written."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value).strip()
    if not math.isfinite(x):
        return str(value).strip()
    return str(int(x)) if x.is_integer() else str(x)


def _per_value(series: pd.Series, fn) -> pd.Series:
    """`series.map(fn)` with fn called once per distinct value: a column of a million rows holds
    few (Adult's text columns: 4.5 of validation's 4.7 s at a million rows went to per-row calls).
    Only where every value is text; mixed values (1 and 1.0 hash as one) are mapped row by row."""
    if pd.api.types.infer_dtype(series, skipna=False) != "string":
        return series.map(fn)
    codes, uniques = pd.factorize(series)
    mapped = np.empty(len(uniques), dtype=object)
    mapped[:] = [fn(v) for v in uniques]
    return pd.Series(mapped[codes], index=series.index, dtype=object)


def _is_missing(series: pd.Series, markers: Iterable[str]) -> pd.Series:
    miss = series.isna()
    markers = set(markers)
    if markers and (series.dtype == object or pd.api.types.is_string_dtype(series)):
        present = series[~miss]
        miss[~miss] = _per_value(present, lambda v: str(v).strip() in markers).astype(bool)
    return miss


def _written_at(values, rounded):
    """Where each value already is its rounded form, up to single precision (7 significant digits:
    1.7999999523 is 1.8 stored as R tables often store it)."""
    return np.abs(np.asarray(rounded, float) - np.asarray(values, float)) <= 1e-6 * np.maximum(1.0, np.abs(values))


def validate_table(table: pd.DataFrame, schema: Schema, hold_rules: bool = True) -> tuple[pd.DataFrame, ValidationReport]:
    """Check a private table against the public schema and return it in canonical form.

    Canonical form: the schema's columns in the schema's order; categoricals as strings (missing as
    NA); numbers as float (rounded to their declared precision: integers to whole numbers), clipped
    to the public bounds, missing as NaN. A derived column the table lacks is computed from its
    rule; one it has is kept, and its rows that disagree with the rule are counted. Rows that break
    a declared rule (schema.rules) are dropped and counted; a rule that most rows break is refused
    as probably mistyped (hold_rules=False: kept, for a review that measures how well a table obeys
    them, evaluate/).
    Raises SchemaError for anything that cannot be fixed without inventing or dropping data.
    """
    cols = _check_columns(table, schema)
    table = table.copy()
    table.columns = cols
    markers = list(schema.missing_markers) or []
    out: dict[str, Any] = {}
    reports: dict[str, ColumnReport] = {}
    for spec in schema.columns:
        rep = reports[spec.name] = ColumnReport()
        if spec.name not in cols:  # a derived column, computed below
            continue
        raw = table[spec.name]
        miss = _is_missing(raw, markers)
        rep.missing = int(miss.sum())
        if rep.missing and not spec.nullable:
            raise SchemaError(
                f"column {spec.name!r} has {rep.missing} missing values but the schema says it is not nullable; "
                "mark it nullable or fill the gaps before synthesis"
            )
        validate = _numbers if spec.is_numeric else _categories
        out[spec.name] = validate(spec, raw, miss, rep)
    clean = schema.derive(pd.DataFrame(out))
    for spec in schema.derived_columns:
        if spec.name in out:  # the table's own values are kept: the model never sees them
            reports[spec.name].inconsistent = _disagreeing(spec, out[spec.name], clean[spec.name])
            clean[spec.name] = out[spec.name]
    ignored = [c for c in cols if c not in schema.names]
    held, breaks = hold_private_table(schema.rule_checks, clean) if hold_rules else (clean, {})
    if held.empty:
        raise SchemaError("every row of the table breaks a declared rule: nothing is left to learn from")
    return held, ValidationReport(rows=len(held), columns=reports, ignored_columns=ignored, rule_breaks=breaks,
                                  dropped_for_rules=len(clean) - len(held))


def _disagreeing(spec: ColumnSpec, given, computed: pd.Series) -> int:
    """How many of a derived column's given values differ from what its rule computes (both missing:
    agree)."""
    if spec.is_numeric:
        given, computed = np.asarray(given, dtype=float), computed.to_numpy(dtype=float)
        return int((~np.isclose(given, computed, rtol=1e-9, atol=1e-9, equal_nan=True)).sum())
    return int((given != computed.to_numpy(dtype=object)).sum())


def _check_columns(table: pd.DataFrame, schema: Schema) -> list[str]:
    """The table's column names as text; SchemaError for no table, an empty one, duplicated names or
    a column the schema declares (and cannot derive) that the table lacks."""
    if not isinstance(table, pd.DataFrame):
        raise SchemaError("the table must be a pandas DataFrame")
    if len(table.columns) == 0 or len(table) == 0:
        raise SchemaError("the table is empty: it has no rows" if len(table.columns) else "the table has no columns")
    cols = [str(c) for c in table.columns]
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    if dupes:
        raise SchemaError(f"the table has duplicated column names: {_preview(dupes)}")
    missing_cols = [c.name for c in schema.columns if c.name not in cols and not c.derived]
    if missing_cols:
        raise SchemaError(f"the table lacks columns the schema declares: {_preview(missing_cols)}")
    return cols


def _numbers(spec: ColumnSpec, raw: pd.Series, miss: pd.Series, rep: ColumnReport) -> np.ndarray:
    """A numeric column as floats: dates as their year, rounded to its declared precision, clipped
    to its public bounds, put on the nearest of its declared values (each counted in `rep`)."""
    if pd.api.types.is_bool_dtype(raw):
        raw = raw.astype(float)
    if spec.date == "year" and not pd.api.types.is_numeric_dtype(raw):
        raw, not_dates = _years(raw, miss, spec)
        if not_dates.any():  # read as missing in a nullable column (_years refuses them elsewhere)
            rep.not_dates, rep.missing = int(not_dates.sum()), rep.missing + int(not_dates.sum())
            miss = miss | not_dates
    values = pd.to_numeric(raw.where(~miss), errors="coerce")
    bad = values.isna() & ~miss
    if bad.any():
        raise SchemaError(f"column {spec.name!r} is declared {spec.kind} but holds non-numeric values: "
                          f"{_preview(pd.unique(raw[bad].astype(str)))}")
    values = values.astype(float)
    if not np.isfinite(values[~miss]).all():
        raise SchemaError(f"column {spec.name!r} holds infinite values")
    if spec.kind == "integer" or spec.decimals is not None:
        # to the declared precision; a value that differs by single precision only (1.7999999523 for
        # 1.8) is written at it and not counted
        rounded = values.round(0 if spec.kind == "integer" else int(spec.decimals))
        rep.rounded = int((~_written_at(values, rounded) & ~miss).sum())
        values = rounded
    return held_to_scale(spec, values.to_numpy(dtype=float), miss.to_numpy(), rep)


def held_to_scale(spec: ColumnSpec, values: np.ndarray, miss: np.ndarray, rep: ColumnReport
                  ) -> np.ndarray:
    """Numbers at the column's precision held to its public scale: clipped to its bounds, put on
    the nearest of its declared values, a declared point mass exactly; what it changed added to
    `rep` (also for rows validated before the run found bounds or values with DP: the engine's,
    encoding/engine.py)."""
    if spec.lower is not None:
        rep.clipped_low += int((values < spec.lower).sum())
        values = np.where(values < spec.lower, float(spec.lower), values)
    if spec.upper is not None:
        rep.clipped_high += int((values > spec.upper).sum())
        values = np.where(values > spec.upper, float(spec.upper), values)
    # a declared value set: a number between its values goes to the nearest
    if spec.values is not None:
        snapped = spec.snap(values)
        rep.snapped += int((~_written_at(values, snapped) & ~miss).sum())
        values = snapped
    return spec.on_points(values)  # a declared point mass exactly, as its own bin holds it


def _categories(spec: ColumnSpec, raw: pd.Series, miss: pd.Series, rep: ColumnReport) -> np.ndarray:
    """A categorical column as text from its public list; a value outside it goes to the column's
    `unknown` category (counted in `rep`) or is refused."""
    values = raw.astype(object).where(~miss, None)
    present = values[~miss]
    if pd.api.types.is_float_dtype(raw):
        # 1.0 read from a CSV means the category "1" when the public list says "1"
        present = present.map(_number_text)
    else:
        present = _per_value(present, lambda v: str(v).strip())
    allowed = set(spec.categories or [])
    outside = ~present.isin(allowed)
    # "0.0" in a column read as text is the category "0" too, as a draft writes it
    if outside.any():
        as_number = present[outside].map(_number_text)
        present = present.where(~outside | ~as_number.reindex(present.index).isin(allowed),
                                as_number.reindex(present.index))
        outside = ~present.isin(allowed)
    if outside.any():
        if spec.unknown is None:
            raise SchemaError(
                f"column {spec.name!r} has values outside its public category list: "
                f"{_preview(pd.unique(present[outside]))}. Add them to the list, or set the column's "
                "'unknown' category to map them to a reserved value"
            )
        rep.mapped_unknown = int(outside.sum())
        present = present.where(~outside, spec.unknown)
    col = pd.Series([None] * len(values), index=values.index, dtype=object)
    col[~miss] = present
    return col.to_numpy(dtype=object)


# --- the columns a schema models -------------------------------------------------------------------
def schema_columns(table: pd.DataFrame, schema: Schema) -> tuple[pd.DataFrame, list[str]]:
    """The table with only the columns the schema names (in the table's order), and the names of the
    others: the columns the schema leaves out (identifiers, case numbers, columns a draft excluded
    or the steward did not declare). Training, the run's private copy, the review and `evaluate` see
    the first; `left_out` says the second once."""
    names = set(schema.names)
    kept = [c for c in table.columns if str(c) in names]
    return table[kept], [str(c) for c in table.columns if str(c) not in names]


def left_out(names: list[str]) -> str | None:
    """'3 columns left out by the schema: 'person_id', 'case_number', 'notes'' (None when there are
    none)."""
    if not names:
        return None
    return f"{len(names)} column{'s' if len(names) > 1 else ''} left out by the schema: {_preview(names, 8)}"


def _years(raw: pd.Series, miss: pd.Series, spec: ColumnSpec) -> tuple[pd.Series, pd.Series]:
    """The year of each date in a column read from dates (missing stays missing), and which values
    are no date: missing where the column is nullable, refused where it is not."""
    parsed = _parse_dates(raw.where(~miss))
    bad = parsed.isna() & ~miss
    if bad.any() and not spec.nullable:
        raise SchemaError(f"column {spec.name!r} is read from dates but holds values that are "
                          f"not dates: {_preview(pd.unique(raw[bad].astype(str)))}; mark it "
                          "nullable to read them as missing")
    return parsed.dt.year.astype(float), bad


# a date with a two-digit year, day and month in either order ("1/3/11", "31-12-98", "03.01.11"):
# only its year is ever kept, so the order does not matter; 69-99 are the 1900s and 00-68 the 2000s
# (POSIX's rule, as strptime's %y)
_SHORT_DATE = r"^\s*(\d{1,2})([/.\-])(\d{1,2})\2(\d{2})\s*$"


def _short_date_years(text: pd.Series) -> pd.Series:
    """The year of each value written as a date with a two-digit year (NaN for any other value)."""
    parts = text.astype("string").str.extract(_SHORT_DATE)
    a, b, yy = (pd.to_numeric(parts[i], errors="coerce") for i in (0, 2, 3))
    valid = a.between(1, 31) & b.between(1, 31) & (a.where(a < b, b) <= 12)
    return (yy + 1900).where(yy >= 69, yy + 2000).where(valid).astype(float)


def _parse_dates(values: pd.Series) -> pd.Series:
    text = values.astype("string")
    years = _short_date_years(text)
    short = years.notna()
    if short.any():  # the first of January of its year: only the year is kept
        text = text.where(~short, years[short].astype(int).astype(str) + "-01-01")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas warns when it guesses a format per value
        try:
            return pd.to_datetime(text, errors="coerce", format="mixed")
        except ValueError:
            # dates with and without a time zone, or in several: all read in UTC (a year may move
            # for hours around New Year)
            return pd.to_datetime(text, errors="coerce", format="mixed", utc=True)


def random_table(schema: Schema, n: int, seed: int | None = None,
                 missing_share: float = 0.05) -> pd.DataFrame:
    """n rows drawn from the public schema alone: uniform over each column's public categories,
    uniform within its public bounds (log-uniform for log binning), some missing values in nullable
    columns; derived columns computed from their rules.

    It reads no private data, so it may be used freely: timing a model before training, format
    learning for language models (DP-LLMTGen stage 1), tests."""
    schema.check()
    schema.require_bounds()
    rng = np.random.default_rng(seed)
    out = {}
    for spec in schema.modelled().columns:
        if spec.is_numeric:
            lo, hi = float(spec.lower), float(spec.upper)
            # uniform on the column's public scale
            values = spec.from_unit(rng.uniform(0.0, 1.0, n))
            if spec.values is not None:  # a declared value set: uniform among its values
                values = rng.choice(spec.written_values(), n)
            if spec.kind == "integer":
                col = pd.Series(np.clip(np.round(values), lo, hi).astype("int64"), dtype="Int64")
            else:
                if spec.decimals is not None:
                    values = np.round(values, spec.decimals)
                col = pd.Series(values, dtype="float64")
        else:
            col = pd.Series(rng.choice(np.asarray(spec.vocabulary(), dtype=object), n), dtype="string")
        if spec.nullable and missing_share > 0:
            col = col.mask(pd.Series(rng.random(n) < missing_share))
        out[spec.name] = col.reset_index(drop=True)
    return schema.derive(pd.DataFrame(out))
