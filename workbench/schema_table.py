"""The public schema as a table the steward edits (one row per column), and back.

Categories are written comma-separated in the table (a category that itself holds a comma is written
in double quotes, as in a CSV line) and one per line in the column form; their order is the
steward's. A derived column shows its rule in words; `with_rule` makes a column derived (the rule's
checks are the core's, synth_core/schema/derived.py). Pure functions: no Streamlit here, so they are
tested directly.
"""
from __future__ import annotations

import copy
import csv
import io
import math

import pandas as pd

from synth_core.schema import KINDS, ColumnSpec, Schema, SchemaError
from synth_core.schema.derived import describe
from synth_core.schema.linked import LinkedSchema
from synth_core.shape import shape_of, shape_of_data

EDITOR_COLUMNS = ["column", "kind", "lower", "upper", "categories", "values", "points", "nullable", "role",
                  "binning", "decimals", "derived", "source"]
# the reason Schema.excluded gives for a column the steward left out (the draft gives its own)
LEFT_OUT_BY_YOU = "left out by you"
NO_ROLE = "—"  # shown for a column without a role (an empty cell reads "None" in Streamlit's grid)
ROLE_CHOICES = [NO_ROLE, "sensitive", "target"]


def categories_to_text(categories: list[str] | None) -> str:
    """Categories comma-separated, each quoted as a CSV field where it needs it ("a,b" keeps its
    comma)."""
    def field(category: str) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="").writerow([category])
        return buf.getvalue()
    return ", ".join(field(c) for c in categories or [])


def text_to_categories(text: str | None) -> list[str]:
    if text is None or (isinstance(text, float) and math.isnan(text)) or not str(text).strip():
        return []
    row = next(csv.reader([str(text)], skipinitialspace=True))
    return [c.strip() for c in row if c.strip()]


def lines_to_categories(text: str | None) -> list[str]:
    """Categories written one per line, in their order (blank lines skipped)."""
    return [line.strip() for line in str(text or "").splitlines() if line.strip()]


def text_to_numbers(text: str | None, what: str = "the edges") -> list[float]:
    """Numbers written with commas or spaces between them ("0, 25, 45"); whole numbers as
    integers."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return []
    try:
        numbers = [float(x) for x in str(text or "").replace(",", " ").split()]
        return [int(x) if x.is_integer() else x for x in numbers]
    except ValueError:
        raise SchemaError(f"{what} must be numbers separated by commas, not {text!r}") from None


def numbers_to_text(numbers: list | None) -> str:
    """A list of numbers as the steward reads and types it: "0, 1.2, 3.26"."""
    return ", ".join(number_text(x) for x in numbers or [])


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
            # numbers as text: an empty cell stays empty (a number column writes "None" in it)
            "lower": number_text(c.lower), "upper": number_text(c.upper),
            "categories": categories_to_text(c.categories) if c.kind == "categorical" else "",
            # a numeric column's value set (codes, brackets, a scale) and its point masses (the 0 of
            # amounts)
            "values": numbers_to_text(c.values), "points": numbers_to_text(c.points),
            "nullable": bool(c.nullable), "role": c.role or NO_ROLE, "binning": c.binning,
            "decimals": number_text(c.decimals),
            "derived": describe(c.derived) if c.derived else "",
            "source": label,
        })
    return pd.DataFrame(rows, columns=EDITOR_COLUMNS)


def number_text(value) -> str:
    """A bound or a count as the steward reads and types it: "" for none, "2000000" (not 2e+06),
    "0.25"."""
    if value is None:
        return ""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.10g}"


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
                          role=(str(row.get("role") or "").strip().replace(NO_ROLE, "") or None),
                          binning=str(row.get("binning") or "uniform"), derived=old.derived)
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
            try:
                spec.values = text_to_numbers(row.get("values"), "its values") or None
                spec.points = text_to_numbers(row.get("points"), "its points") or None
            except SchemaError as e:
                raise SchemaError(f"column {name!r}: {e}") from None
        spec.check()
        specs.append(spec)
    return _edited(base, specs)


def with_rule(schema: Schema, name: str, rule: dict | None) -> Schema:
    """The schema with column `name` derived by `rule` (see synth_core/schema/derived.py), or
    modelled again (rule None). A column cut into bins becomes categorical, its categories the
    labels in their order, and may be missing where its source may."""
    specs = [copy.deepcopy(c) for c in schema.columns]
    spec = next(c for c in specs if c.name == name)
    spec.derived = rule
    if rule and "bins" in rule:
        source = schema[rule["from"]] if rule["from"] in schema else None
        spec.kind, spec.lower, spec.upper, spec.decimals, spec.date, spec.binning = \
            "categorical", None, None, None, None, "uniform"
        spec.categories = [str(label) for label in rule.get("labels") or []]
        spec.nullable = bool(source and source.nullable)
    return _edited(schema, specs)


def leave_out(schema: Schema, name: str) -> Schema:
    """The schema without column `name`, listed in `excluded` as "left out by you": the path the
    draft's own exclusions take (the model, validation, the export and the budget book's identity
    see only the schema's columns). A confirmed schema stays so: no fact is added. SchemaError if a
    rule or a derived column reads it, or if it is the last column."""
    if name not in schema:
        raise SchemaError(f"no column {name!r} in the schema")
    if len(schema.columns) == 1:
        raise SchemaError(f"{name!r} is the only column left to model")
    excluded = {**schema.excluded, name: LEFT_OUT_BY_YOU}
    try:
        kept = [copy.deepcopy(c) for c in schema.columns if c.name != name]
        new = _edited(schema, kept, excluded)
    except SchemaError as e:
        raise SchemaError(f"{name!r} cannot be left out: {e}") from None
    new.confirmed = schema.confirmed
    return new


def bring_back(schema: Schema, spec: ColumnSpec, position: int) -> Schema:
    """The schema with a column the steward left out modelled again, as it was (`spec`), at
    `position` among the columns; a confirmed draft needs confirming again, as after any edit."""
    specs = [copy.deepcopy(c) for c in schema.columns]
    specs.insert(min(position, len(specs)), copy.deepcopy(spec))
    excluded = {k: v for k, v in schema.excluded.items() if k != spec.name}
    return _edited(schema, specs, excluded)


def _edited(base: Schema, specs: list[ColumnSpec], excluded: dict | None = None) -> Schema:
    """The schema with edited columns (and columns left out: `excluded`, else the base's), checked;
    a confirmed draft whose facts changed needs confirming again."""
    new = Schema(columns=specs, drafted_from_data=base.drafted_from_data, confirmed=base.confirmed,
                 missing_markers=list(base.missing_markers),
                 excluded=dict(base.excluded if excluded is None else excluded), rows=base.rows,
                 rules=list(base.rules))
    new.check()  # one column per role, among the rest
    if base.drafted_from_data and base.confirmed and _facts(new) != _facts(base):
        new.confirmed = False
    return new


def _facts(schema: Schema) -> list:
    return [(c.kind, c.lower, c.upper, c.categories, c.nullable, c.binning, c.decimals, c.derived, c.values,
             c.points) for c in schema.columns]


def fitted_to(table, new: Schema | LinkedSchema) -> Schema | LinkedSchema:
    """An imported schema checked against the steward's data (each part against its table, the key
    apart), columns in the table's order then derived columns the table lacks; SchemaError naming
    what differs. A column the schema leaves out (`excluded`: the draft's or the steward's) is no
    difference."""
    shape, have = shape_of(new), shape_of_data(table)
    if shape is not have:
        raise SchemaError(f"the schema describes {shape.counted}, but the data loaded on step 1 is "
                          f"{have.counted}")
    if len(shape.part_owners) > 1:
        for i, (frame, part) in enumerate(zip(shape.part_frames(table, new), shape.parts(new))):
            try:
                new = shape.with_part(new, i, fitted_to(frame, part))
            except SchemaError as e:
                raise SchemaError(f"{shape.part_owners[i]}: {e}") from None
        return new
    missing = [str(n) for n in table.columns if n not in new and str(n) not in new.excluded]
    extra = [c.name for c in new.columns if c.name not in table.columns and not c.derived]
    if missing or extra:
        raise SchemaError("the schema does not match the table: " + "; ".join(p for p in (
            f"columns of the table it lacks: {', '.join(missing)}" if missing else "",
            f"columns it names that the table lacks: {', '.join(extra)}" if extra else "") if p))
    new.columns = [new[n] for n in table.columns if n in new] + [c for c in new.derived_columns
                                                                  if c.name not in table.columns]
    return new


def clear_drafted_bounds(schema: Schema) -> Schema:
    """A copy without numeric bounds, to be estimated with DP from part of the budget at training
    time."""
    out = copy.deepcopy(schema)
    for c in out.columns:
        if c.is_numeric:
            c.lower = c.upper = None
    return out
