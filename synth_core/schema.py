"""The public schema: what the data steward declares public about a table.

Everything a model, an encoder or a sampler may know about the private table without paying for it
from the privacy budget lives here: column names, kinds, numeric bounds, category lists, whether a
column may be missing. `validate_table` checks a private table against a schema and never drops a row
silently; `draft_schema` proposes a schema by *reading the data*, and marks it as such until the
steward confirms that every fact in it is public.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

SCHEMA_VERSION = 1
KINDS = ("categorical", "integer", "continuous")
BINNINGS = ("uniform", "log")
ROLES = (None, "sensitive", "target")


class SchemaError(ValueError):
    """A schema or a table does not fit the public facts; the message says what and where."""


def _preview(values: Iterable[Any], limit: int = 5) -> str:
    values = list(values)
    shown = ", ".join(repr(v) for v in values[:limit])
    more = f" (and {len(values) - limit} more)" if len(values) > limit else ""
    return shown + more


@dataclass
class ColumnSpec:
    """One column's public facts.

    lower/upper: public bounds of a numeric column; values outside are clipped (and counted).
    categories: the public list of a categorical column's values, compared as strings.
    unknown: if set, a category outside the public list is mapped to this reserved category
        instead of being an error.
    binning: how a discretising model cuts the public range: "uniform" or "log" (log1p of the
        distance to the lower bound: fine bins near the lower bound, for heavy-tailed amounts).
    decimals: precision a continuous value is written with (None: as sampled).
    role: "sensitive" or "target" for fairness tooling; no effect on privacy.
    """

    name: str
    kind: str
    lower: float | None = None
    upper: float | None = None
    categories: list[str] | None = None
    nullable: bool = False
    unknown: str | None = None
    binning: str = "uniform"
    decimals: int | None = None
    role: str | None = None

    @property
    def is_numeric(self) -> bool:
        return self.kind in ("integer", "continuous")

    @property
    def has_bounds(self) -> bool:
        return self.lower is not None and self.upper is not None

    def check(self) -> None:
        """Raise SchemaError if this column's facts contradict each other."""
        where = f"column {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError("every column needs a non-empty name")
        if self.kind not in KINDS:
            raise SchemaError(f"{where}: kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.binning not in BINNINGS:
            raise SchemaError(f"{where}: binning must be one of {', '.join(BINNINGS)}, not {self.binning!r}")
        if self.role not in ROLES:
            raise SchemaError(f"{where}: role must be 'sensitive', 'target' or empty, not {self.role!r}")
        if self.is_numeric:
            for label, bound in (("lower", self.lower), ("upper", self.upper)):
                if bound is not None and (not isinstance(bound, (int, float)) or not math.isfinite(bound)):
                    raise SchemaError(f"{where}: {label} bound must be a finite number, not {bound!r}")
            if self.has_bounds and self.lower >= self.upper:
                raise SchemaError(f"{where}: lower bound {self.lower} must be below upper bound {self.upper}")
            if self.categories:
                raise SchemaError(f"{where}: a numeric column has no category list")
        else:
            if not self.categories:
                raise SchemaError(f"{where}: a categorical column needs a non-empty public category list")
            cats = [str(c) for c in self.categories]
            dupes = sorted({c for c in cats if cats.count(c) > 1})
            if dupes:
                raise SchemaError(f"{where}: categories listed twice: {_preview(dupes)}")
            self.categories = cats
            if self.unknown is not None:
                self.unknown = str(self.unknown)

    def vocabulary(self) -> list[str]:
        """The categories a model may emit: the public list plus the reserved unknown category."""
        cats = list(self.categories or [])
        if self.unknown is not None and self.unknown not in cats:
            cats.append(self.unknown)
        return cats


@dataclass
class Schema:
    """The public facts of a table, with where they came from.

    drafted_from_data: the facts were proposed by reading the private table (`draft_schema`).
    confirmed: the steward confirmed every fact is public. A drafted, unconfirmed schema is flagged
        in the run's ledger and in every report.
    """

    columns: list[ColumnSpec]
    drafted_from_data: bool = False
    confirmed: bool = True
    missing_markers: list[str] = field(default_factory=list)
    version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        self.columns = [c if isinstance(c, ColumnSpec) else ColumnSpec(**c) for c in self.columns]
        self.check()

    # --- access -------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def __getitem__(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"no column {name!r} in the schema")

    def __contains__(self, name: str) -> bool:
        return name in self.names

    @property
    def numeric_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.is_numeric]

    @property
    def categorical_columns(self) -> list[str]:
        return [c.name for c in self.columns if not c.is_numeric]

    @property
    def provenance(self) -> dict:
        """What the ledger and reports say about where the public facts came from."""
        flagged = self.drafted_from_data and not self.confirmed
        return {
            "drafted_from_data": self.drafted_from_data,
            "confirmed": self.confirmed,
            "warning": (
                "The schema was drafted by reading the private table and was never confirmed as "
                "public: its bounds and category lists may disclose facts about the data."
                if flagged else None
            ),
        }

    def confirm(self) -> "Schema":
        """The steward states that every fact in this schema is public."""
        self.confirmed = True
        return self

    def check(self) -> None:
        if not self.columns:
            raise SchemaError("the schema has no columns")
        names = [c.name for c in self.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"the schema names a column twice: {_preview(dupes)}")
        for c in self.columns:
            c.check()
        if self.version != SCHEMA_VERSION:
            raise SchemaError(f"schema version {self.version} is not supported (this is version {SCHEMA_VERSION})")

    def require_bounds(self) -> None:
        missing = [c.name for c in self.columns if c.is_numeric and not c.has_bounds]
        if missing:
            raise SchemaError(
                f"numeric columns without public bounds: {_preview(missing)}. Declare lower/upper in the "
                "schema, or pay part of the budget to estimate them privately (--bounds-epsilon)."
            )

    # --- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "drafted_from_data": self.drafted_from_data,
            "confirmed": self.confirmed,
            "missing_markers": list(self.missing_markers),
            "columns": [{k: v for k, v in asdict(c).items() if v is not None or k in ("lower", "upper")}
                        for c in self.columns],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Schema":
        if not isinstance(data, dict) or "columns" not in data:
            raise SchemaError("a schema is a JSON object with a 'columns' list")
        if "version" not in data:
            raise SchemaError("the schema has no 'version' field")
        allowed = set(ColumnSpec.__dataclass_fields__)
        columns = []
        for i, col in enumerate(data["columns"]):
            if not isinstance(col, dict):
                raise SchemaError(f"schema column #{i + 1} is not an object")
            extra = set(col) - allowed
            if extra:
                raise SchemaError(f"schema column {col.get('name', i + 1)!r} has unknown fields: {_preview(sorted(extra))}")
            if "name" not in col or "kind" not in col:
                raise SchemaError(f"schema column #{i + 1} needs a 'name' and a 'kind'")
            columns.append(ColumnSpec(**col))
        return cls(
            columns=columns,
            drafted_from_data=bool(data.get("drafted_from_data", False)),
            confirmed=bool(data.get("confirmed", True)),
            missing_markers=list(data.get("missing_markers", [])),
            version=data["version"],
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "Schema":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SchemaError(f"the schema is not valid JSON: {e}") from None
        return cls.from_dict(data)

    def save(self, path: str | os.PathLike) -> None:
        write_atomic(Path(path), self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Schema":
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise SchemaError(f"cannot read the schema file {path}: {e.strerror}") from None
        return cls.from_json(text)


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that a reader sees the old or the new content, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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
            if spec.binning == "log":
                values = lo + np.expm1(rng.uniform(0.0, np.log1p(hi - lo), n))
            else:
                values = rng.uniform(lo, hi, n)
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
