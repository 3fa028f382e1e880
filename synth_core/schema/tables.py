"""Private tables against the public schema: validate a table, draft a schema from one, and draw random rows
from the schema alone (reading files: schema/reading.py)."""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .rules import hold_private_table
from .spec import MAX_MAGNITUDE, ColumnSpec, Schema, SchemaError, _preview


# --- validation --------------------------------------------------------------------------------
@dataclass
class ColumnReport:
    clipped_low: int = 0
    clipped_high: int = 0
    rounded: int = 0
    mapped_unknown: int = 0
    missing: int = 0
    inconsistent: int = 0    # a derived column: rows whose value is not what its rule gives


@dataclass
class ValidationReport:
    """What validation changed, per column; nothing is dropped without appearing here."""

    rows: int
    columns: dict[str, ColumnReport]
    ignored_columns: list[str]
    # the schema's rules (schema/rules.py): how many rows broke each, and how many rows that dropped (a row
    # breaking two rules counts once; `rows` is after)
    rule_breaks: dict[str, int] = field(default_factory=dict)
    dropped_for_rules: int = 0

    def summary(self) -> list[str]:
        lines = []
        for name, r in self.columns.items():
            if r.clipped_low or r.clipped_high:
                lines.append(f"{name}: {r.clipped_low} values below and {r.clipped_high} above the public bounds were clipped")
            if r.rounded:
                lines.append(f"{name}: {r.rounded} values were rounded to the declared precision")
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
    """A number as a category's text: 1.0 and "1.0" are "1", 2.50 is "2.5"; anything else as it is written."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value).strip()
    if not math.isfinite(x):
        return str(value).strip()
    return str(int(x)) if x.is_integer() else str(x)


def _is_missing(series: pd.Series, markers: Iterable[str]) -> pd.Series:
    miss = series.isna()
    markers = list(markers)
    if markers and (series.dtype == object or pd.api.types.is_string_dtype(series)):
        miss |= series.astype(str).str.strip().isin(markers)
    return miss


def _written_at(values, rounded):
    """Where each value already is its rounded form, up to single precision (7 significant digits: 1.7999999523
    is 1.8 stored as R tables often store it)."""
    return np.abs(np.asarray(rounded, float) - np.asarray(values, float)) <= 1e-6 * np.maximum(1.0, np.abs(values))


def validate_table(table: pd.DataFrame, schema: Schema, hold_rules: bool = True) -> tuple[pd.DataFrame, ValidationReport]:
    """Check a private table against the public schema and return it in canonical form.

    Canonical form: the schema's columns in the schema's order; categoricals as strings (missing as NA);
    numbers as float (rounded to their declared precision: integers to whole numbers), clipped to the public
    bounds, missing as NaN. A derived column the table lacks is computed from its rule; one it has is kept,
    and its rows that disagree with the rule are counted. Rows that break a declared rule (schema.rules) are
    dropped and counted; a rule that most rows break is refused as probably mistyped (hold_rules=False: kept, for
    a review that measures how well a table obeys them, evaluate/).
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
    """How many of a derived column's given values differ from what its rule computes (both missing: agree)."""
    if spec.is_numeric:
        given, computed = np.asarray(given, dtype=float), computed.to_numpy(dtype=float)
        return int((~np.isclose(given, computed, rtol=1e-9, atol=1e-9, equal_nan=True)).sum())
    return int((given != computed.to_numpy(dtype=object)).sum())


def _check_columns(table: pd.DataFrame, schema: Schema) -> list[str]:
    """The table's column names as text; SchemaError for no table, an empty one, duplicated names or a column
    the schema declares (and cannot derive) that the table lacks."""
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
    """A numeric column as floats: dates as their year, rounded to its declared precision, clipped to its
    public bounds (each counted in `rep`)."""
    if pd.api.types.is_bool_dtype(raw):
        raw = raw.astype(float)
    if spec.date == "year" and not pd.api.types.is_numeric_dtype(raw):
        raw = _years(raw, miss, spec.name)
    values = pd.to_numeric(raw.where(~miss), errors="coerce")
    bad = values.isna() & ~miss
    if bad.any():
        raise SchemaError(f"column {spec.name!r} is declared {spec.kind} but holds non-numeric values: "
                          f"{_preview(pd.unique(raw[bad].astype(str)))}")
    values = values.astype(float)
    if not np.isfinite(values[~miss]).all():
        raise SchemaError(f"column {spec.name!r} holds infinite values")
    if spec.kind == "integer" or spec.decimals is not None:
        # to the declared precision; a value that differs by single precision only (1.7999999523 for 1.8) is
        # written at it and not counted
        rounded = values.round(0 if spec.kind == "integer" else int(spec.decimals))
        rep.rounded = int((~_written_at(values, rounded) & ~miss).sum())
        values = rounded
    if spec.lower is not None:
        rep.clipped_low = int((values < spec.lower).sum())
        values = values.clip(lower=spec.lower)
    if spec.upper is not None:
        rep.clipped_high = int((values > spec.upper).sum())
        values = values.clip(upper=spec.upper)
    return values.to_numpy(dtype=float)


def _categories(spec: ColumnSpec, raw: pd.Series, miss: pd.Series, rep: ColumnReport) -> np.ndarray:
    """A categorical column as text from its public list; a value outside it goes to the column's `unknown`
    category (counted in `rep`) or is refused."""
    values = raw.astype(object).where(~miss, None)
    present = values[~miss]
    if pd.api.types.is_float_dtype(raw):
        # 1.0 read from a CSV means the category "1" when the public list says "1"
        present = present.map(_number_text)
    else:
        present = present.map(lambda v: str(v).strip())
    allowed = set(spec.categories or [])
    outside = ~present.isin(allowed)
    if outside.any():  # "0.0" in a column read as text is the category "0" too, as a draft writes it
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
    """The table with only the columns the schema names (in the table's order), and the names of the others: the
    columns the schema leaves out (identifiers, case numbers, columns a draft excluded or the steward did not
    declare). Training, the run's private copy, the review and `evaluate` see the first; `left_out` says the
    second once."""
    names = set(schema.names)
    kept = [c for c in table.columns if str(c) in names]
    return table[kept], [str(c) for c in table.columns if str(c) not in names]


def left_out(names: list[str]) -> str | None:
    """'3 columns left out by the schema: 'person_id', 'case_number', 'notes'' (None when there are none)."""
    if not names:
        return None
    return f"{len(names)} column{'s' if len(names) > 1 else ''} left out by the schema: {_preview(names, 8)}"


def _years(raw: pd.Series, miss: pd.Series, name: str) -> pd.Series:
    """The year of each date in a column read from dates (missing stays missing)."""
    parsed = _parse_dates(raw.where(~miss))
    bad = parsed.isna() & ~miss
    if bad.any():
        raise SchemaError(f"column {name!r} is read from dates but holds values that are not dates: "
                          f"{_preview(pd.unique(raw[bad].astype(str)))}")
    return parsed.dt.year.astype(float)


# a date with a two-digit year, day and month in either order ("1/3/11", "31-12-98", "03.01.11"): only its year is
# ever kept, so the order does not matter; 69-99 are the 1900s and 00-68 the 2000s (POSIX's rule, as strptime's %y)
_SHORT_DATE = r"^\s*(\d{1,2})([/.\-])(\d{1,2})\2(\d{2})\s*$"


def _short_date_years(text: pd.Series) -> pd.Series:
    """The year of each value written as a date with a two-digit year (NaN for any other value)."""
    parts = text.astype("string").str.extract(_SHORT_DATE)
    a, b, yy = (pd.to_numeric(parts[i], errors="coerce") for i in (0, 2, 3))
    valid = a.between(1, 31) & b.between(1, 31) & (a.where(a < b, b) <= 12)
    return (yy + 1900).where(yy >= 69, yy + 2000).where(valid).astype(float)


def _parse_dates(values: pd.Series) -> pd.Series:
    import warnings
    text = values.astype("string")
    years = _short_date_years(text)
    short = years.notna()
    if short.any():  # the first of January of its year: only the year is kept
        text = text.where(~short, years[short].astype(int).astype(str) + "-01-01")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas warns when it guesses a format per value
        try:
            return pd.to_datetime(text, errors="coerce", format="mixed")
        except ValueError:  # dates with and without a time zone, or in several: all read in UTC (a year may move
            return pd.to_datetime(text, errors="coerce", format="mixed", utc=True)  # for hours around New Year)


# --- drafting -----------------------------------------------------------------------------------
MIN_CATEGORY_COUNT = 10   # a category seen in fewer rows is never proposed: it maps to "(other)"
TAIL_VALUES = 10          # a drafted bound leaves out this many extreme values at each end (at most 1 % of them)
MAX_DECIMALS = 4          # a draft proposes the decimals a continuous column is written at, up to this many
UNKNOWN = "(other)"
_ID_NAME = re.compile(r"(^|[^a-z])(id|ids|pid|mrn|key|uuid|guid|rownames?|row|index|idx|case|record|serial|ssn|number|"
                      r"no)"
                      r"($|[^a-z])", re.IGNORECASE)
_ROLE_NAMES = {
    "sensitive": re.compile(r"^(sex|gender|race|ethnicity|ethnic|religion|nationality|native[-_ ]?country)$",
                            re.IGNORECASE),
    "target": re.compile(r"^(income|target|label|outcome|class|y|default|churn|approved|diagnosis)$", re.IGNORECASE),
}


_LEADING_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")


def natural_order(values: Iterable[str]) -> list[str]:
    """Categories in the order a draft proposes them: those that start with a number by that number ("1-5",
    "6-10", "10-20", "65+"), then the others alphabetically. Ties and the rest sort as text."""
    def key(value: str):
        number = _LEADING_NUMBER.match(value)
        return (0, float(number.group(1)), value) if number else (1, 0.0, value)
    return sorted((str(v) for v in values), key=key)


def _round_out(lo: float, hi: float) -> tuple[float, float]:
    """Bounds rounded outward to a round step about a tenth of the range (1, 2 or 5 × 10^k): a draft proposes
    no exact extreme. Ages 17-90 become 10-90, years 1900-2015 become 1900-2020."""
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    raw = span / 10
    k = math.floor(math.log10(raw))
    step = next(m * 10.0 ** k for m in (1, 2, 5, 10) if m * 10.0 ** k >= raw * (1 - 1e-12))
    digits = max(0, -k + 1)
    lo_r = round(math.floor(lo / step + 1e-9) * step, digits)
    hi_r = round(math.ceil(hi / step - 1e-9) * step, digits)
    if hi_r <= lo_r:
        hi_r = round(lo_r + step, digits)
    return float(lo_r), float(hi_r)


def _bulk_range(values: pd.Series) -> tuple[float, float]:
    """The range a draft proposes bounds around: from the k-th smallest to the k-th largest value, k being
    `TAIL_VALUES` or 1 % of the values if fewer (at least 1). One outlier (a diamond 59 mm wide where the
    others are 4-10) would otherwise stretch the bounds, and with them every bin, over a range almost no row
    lies in; and the most extreme values are single rows, the facts a draft should least propose. Values
    beyond the bounds are clipped when the table is read, and the schema page counts them. Where all but
    those values are one value (a gain most rows have as 0), the whole range: the bulk alone is no range."""
    x = np.sort(values.to_numpy(dtype=float))
    k = max(1, min(TAIL_VALUES, math.ceil(len(x) / 100)))
    lo, hi = float(x[k - 1]), float(x[-k])
    return (lo, hi) if hi > lo else (float(x[0]), float(x[-1]))


def _decimals(values: pd.Series, bounds: tuple[float, float]) -> int | None:
    """The fewest decimals (1 to `MAX_DECIMALS`) every value and both bounds are written at, or None. A value
    stored in single precision (1.7999999523 for 1.8: tables from R often are) counts as written at 1. With
    the precision declared, a model's bins hold the values the column can take and its rows are written at
    them (a rate of 3.2 % is drawn as 3.2, not 3.2187); nothing is rounded: every value already is."""
    x = np.concatenate([values.to_numpy(dtype=float), np.asarray(bounds, dtype=float)])
    return next((d for d in range(1, MAX_DECIMALS + 1) if _written_at(x, np.round(x, d)).all()), None)


def _identifier_reason(name: str, present: pd.Series, numeric: pd.Series | None) -> str | None:
    """Why a column looks like an identifier (None if it does not): such a column says who a row is and
    nothing a synthetic table needs."""
    n = len(present)
    if n < 20:
        return None
    unique = present.astype(str).str.strip().nunique() / n
    if _ID_NAME.search(name) and unique >= 0.5:
        return "its name and values look like an identifier (row numbers, keys, case numbers)"
    if numeric is None and unique >= 0.9:
        return "nearly every value is different (names, codes, free text): it identifies rows"
    if numeric is not None and unique >= 0.99 and (numeric.round() == numeric).all() \
            and float(numeric.max() - numeric.min()) + 1 <= 1.1 * numeric.nunique():
        return "its values count the rows (1, 2, 3, ...): a row number"
    return None


def _dates(present: pd.Series) -> pd.Series | None:
    """The parsed dates if (nearly) every value of a text column is a date that shows its year (four digits:
    ranges such as "1-5" or "10-20" parse as days of this year, and a date column is kept as its year)."""
    if len(present) == 0 or pd.api.types.is_numeric_dtype(present):
        return None
    text = present.astype(str).str.strip()
    shows_year = text.str.contains(r"\d{4}", regex=True) | _short_date_years(text).notna()
    if not shows_year.all() or not text.str.contains(r"[-/:T .]", regex=True).mean() > 0.95:
        return None
    parsed = _parse_dates(text)
    return parsed if parsed.notna().mean() >= 0.95 else None


def draft_schema(table: pd.DataFrame, max_categories: int = 50, missing_markers: Iterable[str] = (),
                 min_category_count: int = MIN_CATEGORY_COUNT) -> Schema:
    """Propose a schema by READING THE PRIVATE TABLE, protective by default.

    A draft discloses facts about the data, so it proposes as little as it can: columns that look like
    identifiers (names, near-unique codes, row numbers, keys) or hold no values are left out (`excluded`,
    with the reason); a date column is generalised to its year, with bounds rounded to decades; numeric
    bounds leave out the few most extreme values (`_bulk_range`) and are rounded outward to round numbers
    (0, ±1, 2, 5 × 10^k); a category seen in fewer than
    `min_category_count` rows is never proposed (its rows map to "(other)"); categories are listed in their
    natural order (`natural_order`: by a leading number, else alphabetically); sensitive and target roles
    are suggested by the column's name. The schema is marked drafted_from_data and unconfirmed: the steward
    edits it into public facts and confirms it, or accepts explicitly to train on it (then every report says
    the schema was read from the data).
    """
    if len(table) == 0 or len(table.columns) == 0:
        raise SchemaError("cannot draft a schema from an empty table")
    for label, value in (("max_categories", max_categories), ("min_category_count", min_category_count)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SchemaError(f"{label} must be a whole number of at least 1, not {value!r}")
    cols = [str(c) for c in table.columns]
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    if dupes:
        raise SchemaError(f"the table has duplicated column names: {_preview(dupes)}")
    markers = list(missing_markers)
    lowered = {c.lower() for c in cols}
    specs, excluded, roles_taken = [], {}, set()
    for name in table.columns:
        name = str(name)
        raw = table[name]
        role = next((r for r, pattern in _ROLE_NAMES.items() if r not in roles_taken and pattern.match(name)), None)
        if role == "target" and name.lower() == "y" and "x" in lowered:
            role = None  # beside an x, a y is a coordinate or a size (diamonds' x, y, z), not what is predicted
        proposed = _draft_column(name, raw, _is_missing(raw, markers), role, max_categories, min_category_count)
        if isinstance(proposed, str):
            excluded[name] = proposed
            continue
        specs.append(proposed)
        if proposed.role:
            roles_taken.add(proposed.role)
    if not specs:
        raise SchemaError("no column of the table could be proposed for modelling: "
                          + "; ".join(f"{k}: {v}" for k, v in excluded.items()))
    return Schema(columns=specs, drafted_from_data=True, confirmed=False, missing_markers=markers, excluded=excluded)


def _draft_column(name: str, raw: pd.Series, miss: pd.Series, role: str | None, max_categories: int,
                  min_category_count: int) -> ColumnSpec | str:
    """One column's proposal (see `draft_schema`), or why it is left out."""
    present = raw[~miss]
    nullable = bool(miss.any())
    if len(present) == 0:
        return "it holds no values"
    numeric = pd.to_numeric(present, errors="coerce")
    # yes/no values are categories, also in a column of objects (booleans beside a missing value)
    boolean = pd.api.types.is_bool_dtype(raw) or (raw.dtype == object and bool(
        present.map(lambda v: isinstance(v, (bool, np.bool_))).all()))
    is_numeric = numeric.notna().all() and not boolean
    dates = None if is_numeric else _dates(present)
    reason = None if dates is not None else _identifier_reason(name, present, numeric if is_numeric else None)
    if reason:
        return reason
    if dates is not None:
        years = dates.dt.year.dropna()
        lo, hi = math.floor(years.min() / 10) * 10, math.ceil((years.max() + 1) / 10) * 10
        return ColumnSpec(name=name, kind="integer", lower=int(lo), upper=int(hi), nullable=nullable, date="year",
                          role=role)
    if is_numeric and numeric.nunique() > 2:
        if float(numeric.abs().max()) > MAX_MAGNITUDE:
            return f"its values reach beyond ±{MAX_MAGNITUDE:g}: rescale it to model it"
        is_int = bool((numeric.round() == numeric).all())
        # a long upper tail (the median in the bottom twentieth of the whole range) is binned on a log scale
        full_lo, full_hi = _round_out(float(numeric.min()), float(numeric.max()))
        skewed = full_lo >= 0 and full_hi > 0 and float(numeric.median()) - full_lo < 0.05 * (full_hi - full_lo)
        lo, hi = _round_out(*_bulk_range(numeric))
        return ColumnSpec(name=name, kind="integer" if is_int else "continuous",
                          lower=int(lo) if is_int else lo, upper=int(hi) if is_int else hi, nullable=nullable,
                          binning="log" if skewed else "uniform", role=role,
                          decimals=None if is_int else _decimals(numeric, (lo, hi)))
    values = present.map(_number_text) if is_numeric else present.astype(str).str.strip()
    counts = values.value_counts()
    cats = natural_order(counts[counts >= min_category_count].index[:max_categories])
    if not cats:
        return f"no value occurs in {min_category_count} rows or more: proposing any would disclose single rows"
    unknown = UNKNOWN if len(cats) < len(counts) and UNKNOWN not in cats else None
    return ColumnSpec(name=name, kind="categorical", categories=cats, nullable=nullable, unknown=unknown, role=role)


def random_table(schema: Schema, n: int, seed: int | None = None, missing_share: float = 0.05) -> pd.DataFrame:
    """n rows drawn from the public schema alone: uniform over each column's public categories, uniform
    within its public bounds (log-uniform for log binning), some missing values in nullable columns; derived
    columns computed from their rules.

    It reads no private data, so it may be used freely: timing a model before training, format learning
    for language models (DP-LLMTGen stage 1), tests."""
    schema.check()
    schema.require_bounds()
    rng = np.random.default_rng(seed)
    out = {}
    for spec in schema.modelled().columns:
        if spec.is_numeric:
            lo, hi = float(spec.lower), float(spec.upper)
            values = spec.from_unit(rng.uniform(0.0, 1.0, n))  # uniform on the column's public scale
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
