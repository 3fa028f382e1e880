"""A schema drafted by READING THE PRIVATE TABLE, protective by default (`draft_schema`): it
proposes as little as it can, the steward edits it into public facts and confirms it."""
from __future__ import annotations

import math
import re
from typing import Iterable

import numpy as np
import pandas as pd

from .spec import MAX_MAGNITUDE, ColumnSpec, Schema, SchemaError, _preview
from .scale import POINT_SHARE, PROPOSED_POINTS  # noqa: F401 - bench_models.py sets them here
from .tables import _is_missing, _number_text, _parse_dates, _short_date_years, _written_at


# --- drafting -----------------------------------------------------------------------------------
MIN_CATEGORY_COUNT = 10   # a category seen in fewer rows is never proposed: it maps to "(other)"
# a drafted bound leaves out this many extreme values at each end (at most 1 % of them)
TAIL_VALUES = 10
# a draft proposes the decimals a continuous column is written at, up to this many
MAX_DECIMALS = 4
# a numeric column of at most this many values is drafted with its value set
MAX_VALUE_SET = 32
UNKNOWN = "(other)"
# free text (`free_text_reason`): more than FREE_TEXT_DISTINCT distinct values, over FREE_TEXT_SHARE
# of them; or a median over FREE_TEXT_LENGTH characters with over FREE_TEXT_VARIED of them distinct
FREE_TEXT_DISTINCT = 32
FREE_TEXT_SHARE = 0.5
FREE_TEXT_LENGTH = 40
FREE_TEXT_VARIED = 0.2
_ID_NAME = re.compile(r"(^|[^a-z])(id|ids|pid|mrn|key|uuid|guid|rownames?|row|index|idx|case|record|serial|ssn|number|"
                      r"no)"
                      r"($|[^a-z])", re.IGNORECASE)
_ROLE_NAMES = {
    "sensitive": re.compile(r"^(sex|gender|race|ethnicity|ethnic|religion|nationality|native[-_ ]?country)$",
                            re.IGNORECASE),
    "target": re.compile(r"^(income|target|label|outcome|class|y|default|churn|approved|diagnosis)$", re.IGNORECASE),
}


_LEADING_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")


# rating scales a survey writes in words, lowest first: a column whose categories all lie on one is
# drafted in its order (poor, fair, good, very good), not alphabetically (fair, good, poor, very
# good)
SCALES = tuple(tuple(scale.split(", ")) for scale in (
    "very poor, poor, fair, good, very good, excellent",
    "strongly disagree, disagree, somewhat disagree, neither agree nor disagree, neutral, somewhat agree, "
    "agree, strongly agree",
    "never, rarely, sometimes, often, very often, always",
    "very low, low, medium, moderate, high, very high",
    "none, mild, moderate, severe, very severe",
    "very dissatisfied, dissatisfied, neutral, satisfied, very satisfied",
    "very unlikely, unlikely, neutral, likely, very likely",
))


def natural_order(values: Iterable[str]) -> list[str]:
    """Categories in the order a draft proposes them: those of a rating scale (`SCALES`, at least
    three of its words) in its order; else those that start with a number by that number ("1-5",
    "6-10", "10-20", "65+"), then the others alphabetically. Ties and the rest sort as text."""
    values = [str(v) for v in values]
    words = {v.strip().lower(): v for v in values}
    for scale in SCALES:
        if len(words) >= 3 and set(words) <= set(scale):
            return [words[w] for w in scale if w in words]

    def key(value: str):
        number = _LEADING_NUMBER.match(value)
        return (0, float(number.group(1)), value) if number else (1, 0.0, value)
    return sorted(values, key=key)


def _round_out(lo: float, hi: float) -> tuple[float, float]:
    """Bounds rounded outward to a round step about a tenth of the range (1, 2 or 5 × 10^k): a draft
    proposes no exact extreme. Ages 17-90 become 10-90, years 1900-2015 become 1900-2020."""
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
    """The range a draft proposes bounds around: from the k-th smallest to the k-th largest value, k
    being `TAIL_VALUES` or 1 % of the values if fewer (at least 1). One outlier (a diamond 59 mm
    wide where the others are 4-10) would otherwise stretch the bounds, and with them every bin,
    over a range almost no row lies in; and the most extreme values are single rows, the facts a
    draft should least propose. Values beyond the bounds are clipped when the table is read, and the
    schema page counts them. Where all but those values are one value (a gain most rows have as 0),
    the whole range: the bulk alone is no range."""
    x = np.sort(values.to_numpy(dtype=float))
    k = max(1, min(TAIL_VALUES, math.ceil(len(x) / 100)))
    lo, hi = float(x[k - 1]), float(x[-k])
    return (lo, hi) if hi > lo else (float(x[0]), float(x[-1]))


def _decimals(values: pd.Series, bounds: tuple[float, float]) -> int | None:
    """The fewest decimals (1 to `MAX_DECIMALS`) every value and both bounds are written at, or
    None. A value stored in single precision (1.7999999523 for 1.8: tables from R often are) counts
    as written at 1. With the precision declared, a model's bins hold the values the column can take
    and its rows are written at them (a rate of 3.2 % is drawn as 3.2, not 3.2187); nothing is
    rounded: every value already is."""
    x = np.concatenate([values.to_numpy(dtype=float), np.asarray(bounds, dtype=float)])
    return next((d for d in range(1, MAX_DECIMALS + 1) if _written_at(x, np.round(x, d)).all()), None)


def _value_set(numeric: pd.Series, is_int: bool, min_count: int) -> tuple[list | None, list | None]:
    """The value set a draft proposes for a numeric column of few values (codes, brackets, a scale:
    at most MAX_VALUE_SET, each held by `min_count` rows or more; the rows of a rarer value go to
    the nearest), else its point masses (values held by at least POINT_SHARE of its rows: the 0 of
    amounts). Like a category, a value held by fewer rows is never proposed."""
    counts = numeric.value_counts()
    common = counts[counts >= min_count]
    def written(v):  # as the steward wrote it: 1.8, not 1.7999999523 (single precision, as R writes
        # tables: within 1e-7 of it), but 6.109248, not 6.10925 (a digit the data hold)
        if is_int:
            return int(v)
        v = float(v)
        return next((round(v, d) for d in range(9)
                     if abs(round(v, d) - v) <= 1e-7 * max(1.0, abs(v))), v)
    if numeric.nunique() <= MAX_VALUE_SET and len(common) >= 2:
        return sorted(written(v) for v in common.index), None
    heavy = common[common >= POINT_SHARE * len(numeric)]
    return None, (sorted(written(v) for v in heavy.index[:PROPOSED_POINTS]) if len(heavy) else None)


def _identifier_reason(name: str, present: pd.Series, numeric: pd.Series | None) -> str | None:
    """Why a column looks like an identifier (None if it does not): such a column says who a row is
    and nothing a synthetic table needs."""
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


def free_text_reason(present: pd.Series) -> str | None:
    """Why a text column looks like free text (None if it does not). Of its non-blank values, more
    than FREE_TEXT_DISTINCT (32) and more than FREE_TEXT_SHARE (half) are distinct; or their median
    length is over FREE_TEXT_LENGTH (40) characters and more than FREE_TEXT_VARIED (a fifth) are
    distinct. Drafted as a category, its notes held by MIN_CATEGORY_COUNT rows would become public
    categories (a category list is public): the draft leaves it out. "agree"/"disagree", and a few
    long labels each held by many rows, stay categories."""
    text = present.astype(str).str.strip()
    text = text[text != ""]
    if text.empty:
        return None
    distinct, n = int(text.nunique()), len(text)
    length = float(text.str.len().median())
    if distinct > FREE_TEXT_DISTINCT and distinct > FREE_TEXT_SHARE * n:
        said = f"{distinct:,} different values among {n:,}"
    elif length > FREE_TEXT_LENGTH and distinct > FREE_TEXT_VARIED * n:
        said = f"long values (a median of {length:.0f} characters), {distinct:,} different"
    else:
        return None
    return (f"free text: {said} (notes, comments, names); a category list is public, so they are "
            "never proposed as categories")


def _distinct(values: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """Each distinct value once and the rows that hold it: a test of every value asked of each
    distinct one (a column of a million rows holds a few hundred), its share counted in rows."""
    counts = values.value_counts(sort=False, dropna=False)
    return pd.Series(counts.index.array), counts.to_numpy()


def _dates(present: pd.Series) -> pd.Series | None:
    """The parsed dates of a text column's distinct values if (nearly) every value is a date that
    shows its year (four digits: ranges such as "1-5" or "10-20" parse as days of this year, and a
    date column is kept as its year)."""
    if len(present) == 0 or pd.api.types.is_numeric_dtype(present):
        return None
    text, rows = _distinct(present.astype(str).str.strip())
    n = rows.sum()
    shows_year = text.str.contains(r"\d{4}", regex=True) | _short_date_years(text).notna()
    dated = text.str.contains(r"[-/:T .]", regex=True).to_numpy(dtype=bool)
    if not shows_year.all() or not rows[dated].sum() / n > 0.95:
        return None
    parsed = _parse_dates(text)
    return parsed if rows[parsed.notna().to_numpy()].sum() / n >= 0.95 else None


def draft_schema(table: pd.DataFrame, max_categories: int = 50, missing_markers: Iterable[str] = (),
                 min_category_count: int = MIN_CATEGORY_COUNT) -> Schema:
    """Propose a schema by READING THE PRIVATE TABLE, protective by default.

    A draft discloses facts about the data, so it proposes as little as it can: columns that look
    like identifiers (names, near-unique codes, row numbers, keys), free text (`free_text_reason`)
    or hold no values are left out (`excluded`, with the reason); a date column is generalised to
    its year, with bounds rounded to decades; numeric bounds leave out the few most extreme values
    (`_bulk_range`) and are rounded outward to round numbers
    (0, ±1, 2, 5 × 10^k); a numeric column of few values (codes, brackets, a scale) is proposed with
    its value set and one with values that each hold 5% of its rows with those points (`_value_set`:
    each held by `min_category_count` rows or more, as a category); a category seen in fewer than
    `min_category_count` rows is never proposed (its rows map to "(other)"); categories are listed
    in their natural order (`natural_order`: by a leading number, else alphabetically); sensitive
    and target roles are suggested by the column's name. The schema is marked drafted_from_data and
    unconfirmed: the steward edits it into public facts and confirms it, or accepts explicitly to
    train on it (then every report says the schema was read from the data).
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
            # beside an x, a y is a coordinate or a size (diamonds' x, y, z), not what is predicted
            role = None
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


def _all_numbers(present: pd.Series) -> bool:
    """Whether every value reads as a number: asked of each distinct value (a text column of a
    million rows holds a few hundred; reading each row took most of a draft)."""
    if pd.api.types.is_numeric_dtype(present):
        return True
    try:
        distinct = pd.Series(present.unique())
    except TypeError:  # values that cannot be told apart by hashing (lists): every one asked
        distinct = present
    return bool(pd.to_numeric(distinct, errors="coerce").notna().all())


def _number_texts(numbers: pd.Series) -> pd.Series:
    """Each number's text as a category's (`_number_text`), worked out once per distinct value:
    equal numbers write alike."""
    return numbers.map({v: _number_text(v) for v in numbers.unique()})


def _draft_column(name: str, raw: pd.Series, miss: pd.Series, role: str | None, max_categories: int,
                  min_category_count: int) -> ColumnSpec | str:
    """One column's proposal (see `draft_schema`), or why it is left out."""
    present = raw[~miss]
    nullable = bool(miss.any())
    if len(present) == 0:
        return "it holds no values"
    numbers = _all_numbers(present)
    numeric = pd.to_numeric(present, errors="coerce") if numbers else None
    # yes/no values are categories, also in a column of objects (booleans beside a missing value)
    boolean = pd.api.types.is_bool_dtype(raw) or (raw.dtype == object and bool(
        present.map(lambda v: isinstance(v, (bool, np.bool_))).all()))
    is_numeric = numbers and numeric.notna().all() and not boolean
    dates = None if is_numeric else _dates(present)
    reason = None if dates is not None else _identifier_reason(name, present, numeric if is_numeric else None)
    if not reason and dates is None and not is_numeric and not boolean:
        reason = free_text_reason(present)
    if reason:
        return reason
    if dates is not None:
        # the few values that are no date are read as missing (schema.tables: counted)
        nullable = nullable or bool(dates.isna().any())
        years = dates.dt.year.dropna()
        lo, hi = math.floor(years.min() / 10) * 10, math.ceil((years.max() + 1) / 10) * 10
        return ColumnSpec(name=name, kind="integer", lower=int(lo), upper=int(hi), nullable=nullable, date="year",
                          role=role)
    if is_numeric and numeric.nunique() > 2:
        if float(numeric.abs().max()) > MAX_MAGNITUDE:
            return f"its values reach beyond ±{MAX_MAGNITUDE:g}: rescale it to model it"
        is_int = bool((numeric.round() == numeric).all())
        # a long upper tail (the median in the bottom twentieth of the whole range) is binned on a
        # log scale
        full_lo, full_hi = _round_out(float(numeric.min()), float(numeric.max()))
        skewed = full_lo >= 0 and full_hi > 0 and float(numeric.median()) - full_lo < 0.05 * (full_hi - full_lo)
        lo, hi = _round_out(*_bulk_range(numeric))
        values, points = _value_set(numeric, is_int, min_category_count)
        if values is not None:
            lo, hi = min(lo, values[0]), max(hi, values[-1])
        return ColumnSpec(name=name, kind="integer" if is_int else "continuous",
                          lower=int(lo) if is_int else lo, upper=int(hi) if is_int else hi, nullable=nullable,
                          binning="log" if skewed and values is None else "uniform", role=role,
                          decimals=None if is_int or values is not None else _decimals(numeric, (lo, hi)),
                          values=values, points=points)
    values = _number_texts(present) if is_numeric else present.astype(str).str.strip()
    counts = values.value_counts()
    cats = natural_order(counts[counts >= min_category_count].index[:max_categories])
    if not cats:
        return f"no value occurs in {min_category_count} rows or more: proposing any would disclose single rows"
    unknown = UNKNOWN if len(cats) < len(counts) and UNKNOWN not in cats else None
    return ColumnSpec(name=name, kind="categorical", categories=cats, nullable=nullable, unknown=unknown, role=role)
