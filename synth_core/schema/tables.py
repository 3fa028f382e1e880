"""Private tables against the public schema: read a file, validate a table, draft a schema from one, and
draw random rows from the schema alone."""
from __future__ import annotations

import csv
import io
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .spec import ColumnSpec, Schema, SchemaError, _preview


# --- validation --------------------------------------------------------------------------------
@dataclass
class ColumnReport:
    clipped_low: int = 0
    clipped_high: int = 0
    rounded: int = 0
    mapped_unknown: int = 0
    missing: int = 0


@dataclass
class ValidationReport:
    """What validation changed, per column; nothing is dropped without appearing here."""

    rows: int
    columns: dict[str, ColumnReport]
    ignored_columns: list[str]

    def summary(self) -> list[str]:
        lines = []
        for name, r in self.columns.items():
            if r.clipped_low or r.clipped_high:
                lines.append(f"{name}: {r.clipped_low} values below and {r.clipped_high} above the public bounds were clipped")
            if r.rounded:
                lines.append(f"{name}: {r.rounded} non-integer values were rounded")
            if r.mapped_unknown:
                lines.append(f"{name}: {r.mapped_unknown} values outside the public categories were mapped to the unknown category")
        if self.ignored_columns:
            lines.append(f"columns not in the schema, ignored: {', '.join(self.ignored_columns)}")
        return lines

    def to_dict(self) -> dict:
        return {"rows": self.rows, "columns": {k: asdict(v) for k, v in self.columns.items()},
                "ignored_columns": self.ignored_columns}


def _is_missing(series: pd.Series, markers: Iterable[str]) -> pd.Series:
    miss = series.isna()
    markers = list(markers)
    if markers and (series.dtype == object or pd.api.types.is_string_dtype(series)):
        miss |= series.astype(str).str.strip().isin(markers)
    return miss


def validate_table(table: pd.DataFrame, schema: Schema) -> tuple[pd.DataFrame, ValidationReport]:
    """Check a private table against the public schema and return it in canonical form.

    Canonical form: the schema's columns in the schema's order; categoricals as strings (missing as NA
    ); numbers as float (integers rounded), clipped to the public bounds, missing as NaN.
    Raises SchemaError for anything that cannot be fixed without inventing or dropping data.
    """
    if not isinstance(table, pd.DataFrame):
        raise SchemaError("the table must be a pandas DataFrame")
    if len(table.columns) == 0 or len(table) == 0:
        raise SchemaError("the table is empty: it has no rows" if len(table.columns) else "the table has no columns")
    cols = [str(c) for c in table.columns]
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    if dupes:
        raise SchemaError(f"the table has duplicated column names: {_preview(dupes)}")
    missing_cols = [n for n in schema.names if n not in cols]
    if missing_cols:
        raise SchemaError(f"the table lacks columns the schema declares: {_preview(missing_cols)}")
    table = table.copy()
    table.columns = cols
    markers = list(schema.missing_markers) or []
    out: dict[str, Any] = {}
    reports: dict[str, ColumnReport] = {}
    for spec in schema.columns:
        raw = table[spec.name]
        rep = ColumnReport()
        miss = _is_missing(raw, markers)
        rep.missing = int(miss.sum())
        if rep.missing and not spec.nullable:
            raise SchemaError(
                f"column {spec.name!r} has {rep.missing} missing values but the schema says it is not nullable; "
                "mark it nullable or fill the gaps before synthesis"
            )
        if spec.is_numeric:
            if pd.api.types.is_bool_dtype(raw):
                raw = raw.astype(float)
            values = pd.to_numeric(raw.where(~miss), errors="coerce")
            bad = values.isna() & ~miss
            if bad.any():
                raise SchemaError(
                    f"column {spec.name!r} is declared {spec.kind} but holds non-numeric values: "
                    f"{_preview(pd.unique(raw[bad].astype(str)))}"
                )
            values = values.astype(float)
            if not np.isfinite(values[~miss]).all():
                raise SchemaError(f"column {spec.name!r} holds infinite values")
            if spec.kind == "integer":
                rounded = values.round()
                rep.rounded = int(((rounded != values) & ~miss).sum())
                values = rounded
            if spec.lower is not None:
                rep.clipped_low = int((values < spec.lower).sum())
                values = values.clip(lower=spec.lower)
            if spec.upper is not None:
                rep.clipped_high = int((values > spec.upper).sum())
                values = values.clip(upper=spec.upper)
            out[spec.name] = values.to_numpy(dtype=float)
        else:
            values = raw.astype(object).where(~miss, None)
            present = values[~miss]
            if pd.api.types.is_float_dtype(raw):
                # 1.0 read from a CSV means the category "1" when the public list says "1"
                present = present.map(lambda v: str(int(v)) if float(v).is_integer() else str(v))
            else:
                present = present.map(lambda v: str(v).strip())
            allowed = set(spec.categories or [])
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
            out[spec.name] = col.to_numpy(dtype=object)
        reports[spec.name] = rep
    clean = pd.DataFrame(out, columns=schema.names)
    ignored = [c for c in cols if c not in schema.names]
    return clean, ValidationReport(rows=len(clean), columns=reports, ignored_columns=ignored)


# --- reading files ------------------------------------------------------------------------------
def read_table(path: str | os.PathLike, schema: Schema | None = None, missing_markers: Iterable[str] = ()) -> pd.DataFrame:
    """Read a CSV or Parquet file; a clear SchemaError for an unreadable, empty or ambiguous file."""
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"no such file: {path}")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SchemaError(f"cannot read {path.name}: {e.strerror or e}") from None
    return read_table_bytes(data, path.name, schema, missing_markers)


def read_table_bytes(data: bytes, filename: str, schema: Schema | None = None,
                     missing_markers: Iterable[str] = ()) -> pd.DataFrame:
    """Read an uploaded CSV or Parquet file from memory (nothing is written to disk)."""
    markers = list(missing_markers) or (list(schema.missing_markers) if schema else [])
    name = Path(filename).name
    try:
        if Path(name).suffix.lower() in (".parquet", ".pq"):
            table = pd.read_parquet(io.BytesIO(data))
        else:
            text = data.decode("utf-8-sig")
            header = text.split("\n", 1)[0]
            if not header.strip():
                raise SchemaError(f"{name} is empty")
            dtype = {c.name: str for c in schema.columns if not c.is_numeric} if schema else None
            table = pd.read_csv(io.StringIO(text), dtype=dtype, skipinitialspace=True,
                                na_values=markers or None, keep_default_na=True)
            # pandas renames a repeated header "a" to "a.1"; the steward must hear about it
            raw_names = [n.strip() for n in next(csv.reader([header.rstrip("\r")]))]
            dupes = sorted({n for n in raw_names if raw_names.count(n) > 1})
            if dupes:
                raise SchemaError(f"{name} has duplicated column names: {_preview(dupes)}")
    except SchemaError:
        raise
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, UnicodeDecodeError):
            reason = "it is not UTF-8 text (is it a spreadsheet or another format?)"
        raise SchemaError(f"cannot read {name} as a table: {reason}") from None
    except Exception as e:  # pyarrow raises its own types for a damaged Parquet file
        raise SchemaError(f"cannot read {name} as a table: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    if len(table.columns) == 0:
        raise SchemaError(f"{name} has no columns")
    if len(table) == 0:
        raise SchemaError(f"{name} has a header but no rows")
    return table


# --- drafting -----------------------------------------------------------------------------------
def draft_schema(table: pd.DataFrame, max_categories: int = 50, missing_markers: Iterable[str] = ()) -> Schema:
    """Propose a schema by READING THE PRIVATE TABLE.

    Bounds are the observed min/max and category lists the observed values: both disclose facts
    about the data. The schema is marked drafted_from_data and unconfirmed; the steward must edit
    it into public facts (e.g. round bounds, full category lists) and confirm it, or the run's
    ledger and reports flag it.
    """
    if len(table) == 0 or len(table.columns) == 0:
        raise SchemaError("cannot draft a schema from an empty table")
    cols = [str(c) for c in table.columns]
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    if dupes:
        raise SchemaError(f"the table has duplicated column names: {_preview(dupes)}")
    markers = list(missing_markers)
    specs = []
    for name in table.columns:
        raw = table[name]
        miss = _is_missing(raw, markers)
        present = raw[~miss]
        nullable = bool(miss.any())
        numeric = pd.to_numeric(present, errors="coerce")
        is_numeric = len(present) > 0 and numeric.notna().all() and not pd.api.types.is_bool_dtype(raw)
        if is_numeric and numeric.nunique() > 2:
            is_int = bool((numeric.round() == numeric).all())
            lo, hi = float(numeric.min()), float(numeric.max())
            if lo == hi:
                hi = lo + 1
            skewed = lo >= 0 and hi > 0 and float(numeric.median()) - lo < 0.05 * (hi - lo)
            specs.append(ColumnSpec(
                name=str(name), kind="integer" if is_int else "continuous",
                lower=int(lo) if is_int else lo, upper=int(hi) if is_int else hi, nullable=nullable,
                binning="log" if skewed else "uniform",
            ))
        else:
            if is_numeric:
                cats = sorted({str(int(v)) if float(v).is_integer() else str(v) for v in numeric})
            else:
                cats = sorted({str(v).strip() for v in present})
            if len(cats) > max_categories:
                # keep the most common values; the rest map to a reserved category
                counts = present.astype(str).str.strip().value_counts()
                cats = sorted(counts.index[:max_categories])
                specs.append(ColumnSpec(name=str(name), kind="categorical", categories=cats,
                                        nullable=nullable, unknown="(other)"))
            else:
                specs.append(ColumnSpec(name=str(name), kind="categorical", categories=cats or ["(none)"],
                                        nullable=nullable))
    return Schema(columns=specs, drafted_from_data=True, confirmed=False, missing_markers=markers)


def random_table(schema: Schema, n: int, seed: int | None = None, missing_share: float = 0.05) -> pd.DataFrame:
    """n rows drawn from the public schema alone: uniform over each column's public categories, uniform
    within its public bounds (log-uniform for log binning), some missing values in nullable columns.

    It reads no private data, so it may be used freely: timing a model before training, format learning
    for language models (DP-LLMTGen stage 1), tests."""
    schema.check()
    schema.require_bounds()
    rng = np.random.default_rng(seed)
    out = {}
    for spec in schema.columns:
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
    return pd.DataFrame(out)
