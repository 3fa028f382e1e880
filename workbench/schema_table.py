"""The public schema as a table the steward edits (one row per column), and back.

Categories are written comma-separated; a category that itself holds a comma is written in double
quotes, as in a CSV line. Pure functions: no Streamlit here, so they are tested directly.
"""
from __future__ import annotations

import copy
import csv
import io
import math

import pandas as pd

from synth_core.schema import KINDS, ColumnSpec, Schema, SchemaError

EDITOR_COLUMNS = ["column", "kind", "lower", "upper", "categories", "nullable", "role", "binning", "decimals",
                  "source"]
ROLE_CHOICES = ["", "sensitive", "target"]


def categories_to_text(categories: list[str] | None) -> str:
    if not categories:
        return ""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(categories)
    return buf.getvalue().replace(",", ", ")


def text_to_categories(text: str | None) -> list[str]:
    if text is None or (isinstance(text, float) and math.isnan(text)) or not str(text).strip():
        return []
    row = next(csv.reader([str(text)], skipinitialspace=True))
    return [c.strip() for c in row if c.strip()]


def source_label(schema: Schema) -> str:
    if schema.drafted_from_data and not schema.confirmed:
        return "drafted from the data: confirm or edit"
    if schema.drafted_from_data:
        return "drafted from the data, confirmed by you"
    return "declared"


def schema_to_frame(schema: Schema) -> pd.DataFrame:
    label = source_label(schema)
    rows = []
    for c in schema.columns:
        rows.append({
            "column": c.name, "kind": c.kind,
            "lower": None if c.lower is None else float(c.lower),
            "upper": None if c.upper is None else float(c.upper),
            "categories": categories_to_text(c.categories) if c.kind == "categorical" else "",
            "nullable": bool(c.nullable), "role": c.role or "", "binning": c.binning,
            "decimals": None if c.decimals is None else float(c.decimals),
            "source": label,
        })
    return pd.DataFrame(rows, columns=EDITOR_COLUMNS)


def _number(value) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = float(value)
        except ValueError:
            raise SchemaError(f"{value!r} is not a number") from None
    return float(value)


def frame_to_schema(frame: pd.DataFrame, base: Schema) -> Schema:
    """The edited table as a Schema; raises SchemaError naming the column whose facts do not hold.

    Column names and their order come from `base` (the editor does not add or drop columns). If the
    steward changed anything in a schema drafted from the data, it needs confirming again."""
    if list(frame["column"]) != base.names:
        raise SchemaError("the schema table must keep one row per column of the data, in order")
    specs = []
    for row, old in zip(frame.to_dict("records"), base.columns):
        name = old.name
        kind = str(row.get("kind") or "").strip()
        if kind not in KINDS:
            raise SchemaError(f"column {name!r}: kind must be one of {', '.join(KINDS)}")
        try:
            lower, upper = _number(row.get("lower")), _number(row.get("upper"))
            decimals = _number(row.get("decimals"))
        except SchemaError as e:
            raise SchemaError(f"column {name!r}: {e}") from None
        spec = ColumnSpec(name=name, kind=kind, nullable=bool(row.get("nullable")),
                          role=(str(row.get("role") or "").strip() or None),
                          binning=str(row.get("binning") or "uniform"))
        if kind == "categorical":
            spec.categories = text_to_categories(row.get("categories"))
            spec.unknown = old.unknown if old.kind == "categorical" else None
        else:
            if kind == "integer":
                lower = None if lower is None else int(math.floor(lower))
                upper = None if upper is None else int(math.ceil(upper))
            spec.lower, spec.upper = lower, upper
            spec.decimals = None if decimals is None or kind == "integer" else int(decimals)
            spec.date = old.date if kind == "integer" else None  # a column read from dates stays so
        spec.check()
        specs.append(spec)
    new = Schema(columns=specs, drafted_from_data=base.drafted_from_data, confirmed=base.confirmed,
                 missing_markers=list(base.missing_markers), excluded=dict(base.excluded))
    roles = [c.role for c in specs if c.role]
    for role in ("sensitive", "target"):
        if roles.count(role) > 1:
            raise SchemaError(f"only one column can have the role {role!r}")
    new.check()
    if base.drafted_from_data and base.confirmed and _facts(new) != _facts(base):
        new.confirmed = False
    return new


def _facts(schema: Schema) -> list:
    return [(c.kind, c.lower, c.upper, c.categories, c.nullable, c.binning, c.decimals) for c in schema.columns]


def clear_drafted_bounds(schema: Schema) -> Schema:
    """A copy without numeric bounds, to be estimated with DP from part of the budget at training time."""
    out = copy.deepcopy(schema)
    for c in out.columns:
        if c.is_numeric:
            c.lower = c.upper = None
    return out
