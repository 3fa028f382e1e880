"""Derived columns: a column the steward declares computed from another column by a public rule.

A derived column is never modelled: models, their encoders and the measured marginals see
`Schema.modelled()`, and sampling computes the column from its rule once the model's rows are drawn
(`Schema.derive`), so every synthetic row agrees with the rule. The rule is a public declaration,
like a category list: computing it costs no privacy. In the schema JSON (`ColumnSpec.derived`):

    {"from": "age", "bins": [0, 25, 45, 65, 120], "labels": ["0-24", "25-44", "45-64", "65+"]}
        a numeric source cut at the edges: label i for edges[i] <= x < edges[i+1] (right-open intervals;
        the last one also holds its upper edge). The edges cover the source's public bounds; a value
        beyond them (bounds estimated with DP) falls in the nearest outer bin.
    {"from": "state", "map": {"CA": "West", "NY": "East"}}
        a categorical source looked up: every public category of the source (and its unknown category)
        has a value.
    {"expr": "sqft_above + sqft_basement"}
        a number computed from numeric columns by an arithmetic expression (schema/expressions.py: + - * / // %,
        abs, min, max, round; column names with spaces or signs in backticks). Its public bounds are what the
        sources' bounds give (interval arithmetic), filled in when the column has none; declared bounds must
        cover them, and where the sources' bounds say nothing (a division by a range holding 0) the declared
        bounds clip. An integer column's values are rounded to whole numbers, a continuous one's to its decimals.

A binned or looked-up column is categorical and lists every value its rule gives among its public
categories; a computed one is numeric. Sources are columns of the schema that are not derived
themselves (so rules neither chain nor loop). A missing source value gives a missing value (so does
a division by zero): a column derived from a nullable source, or that divides, is nullable.

`spec.py` asks here (ColumnSpec.check, Schema.check, Schema.derive); this module is the rule's one
home. (Rules that rows obey, rather than columns they compute: schema/rules.py.)
"""
from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .errors import MAX_MAGNITUDE, SchemaError, _preview, finite_number
from .expressions import NUMBER, Expression, ExpressionError, parse

if TYPE_CHECKING:
    from .spec import ColumnSpec

RULE_KEYS = ("from", "bins", "labels", "map", "expr")




def canonical(spec: ColumnSpec) -> dict:
    """The rule of a derived column checked on its own, its labels and lookup values as strings (the
    form the JSON keeps); SchemaError saying what is wrong. The column's categories are checked
    already."""
    rule, where = spec.derived, f"column {spec.name!r}"
    if not isinstance(rule, dict):
        raise SchemaError(f"{where}: 'derived' is an object, {{\"from\": column, \"bins\": [...], \"labels\": [...]}} "
                          "or {\"from\": column, \"map\": {...}}")
    unknown = sorted(set(rule) - set(RULE_KEYS))
    if unknown:
        raise SchemaError(f"{where}: 'derived' has unknown fields {_preview(unknown)} (it takes {', '.join(RULE_KEYS)})")
    if "expr" in rule:
        if set(rule) != {"expr"}:
            raise SchemaError(f"{where}: a computed column's 'derived' holds its 'expr' alone")
        if not isinstance(rule["expr"], str) or not rule["expr"].strip():
            raise SchemaError(f"{where}: 'expr' is the arithmetic that computes it, e.g. \"sqft_above + sqft_basement\"")
        if not spec.is_numeric:
            raise SchemaError(f"{where}: a column computed by 'expr' is a number (integer or continuous), not "
                              f"{spec.kind}")
        return {"expr": rule["expr"].strip()}
    source = rule.get("from")
    if not isinstance(source, str) or not source:
        raise SchemaError(f"{where}: 'derived' needs 'from', the name of the column it is computed from")
    if source == spec.name:
        raise SchemaError(f"{where} cannot be derived from itself")
    binned, mapped = "bins" in rule or "labels" in rule, "map" in rule
    if binned == mapped:
        raise SchemaError(f"{where}: 'derived' takes either 'bins' with 'labels' (of a numeric column) or a 'map' "
                          "(of a categorical column)" + (", not both" if binned else ""))
    if spec.kind != "categorical":
        raise SchemaError(f"{where}: a derived column is categorical (its values are its rule's), not {spec.kind}")
    if binned:
        edges, labels = rule.get("bins"), rule.get("labels")
        if not isinstance(edges, list) or len(edges) < 2 \
                or not all(finite_number(e) for e in edges):
            raise SchemaError(f"{where}: 'bins' must be a list of at least 2 finite numbers (the edges), not {edges!r}")
        for a, b in zip(edges, edges[1:]):
            if b <= a:
                raise SchemaError(f"{where}: the edges in 'bins' must increase, but {a:g} is followed by {b:g}")
        if not isinstance(labels, list) or len(labels) != len(edges) - 1:
            got = len(labels) if isinstance(labels, list) else repr(labels)
            raise SchemaError(f"{where}: {len(edges)} edges make {len(edges) - 1} bins, so 'labels' needs "
                              f"{len(edges) - 1} labels, not {got}")
        rule = {"from": source, "bins": list(edges), "labels": [str(x) for x in labels]}
        values = rule["labels"]
    else:
        mapping = rule["map"]
        if not isinstance(mapping, dict) or not mapping:
            raise SchemaError(f"{where}: 'map' must be a non-empty object {{source value: derived value}}")
        empty = [k for k, v in mapping.items() if v is None]
        if empty:
            raise SchemaError(f"{where}: 'map' gives no value for {_preview(empty)}")
        rule = {"from": source, "map": {str(k): str(v) for k, v in mapping.items()}}
        values = list(rule["map"].values())
    outside = [v for v in dict.fromkeys(values) if v not in spec.vocabulary()]
    if outside:
        raise SchemaError(f"{where}: its rule gives values that are not among its public categories: {_preview(outside)}")
    return rule


def _expression(spec: ColumnSpec, schema) -> Expression:
    try:
        return parse(spec.derived["expr"], schema, NUMBER)
    except ExpressionError as e:
        raise SchemaError(f"column {spec.name!r} is computed by {spec.derived['expr']!r}: {e}") from None


def sources(spec: ColumnSpec, schema) -> list[str]:
    """The columns a derived column is computed from."""
    return list(_expression(spec, schema).columns) if "expr" in spec.derived else [spec.derived["from"]]


def check_sources(spec: ColumnSpec, schema) -> None:
    """SchemaError if a derived column's rule does not fit the schema's columns it reads
    (check_source); a computed column's bounds are filled in from its sources' when it has none."""
    names = sources(spec, schema)
    for name in names:
        if name not in schema:
            raise SchemaError(f"column {spec.name!r} is derived from {name!r}, which is not a column of the schema")
        if name == spec.name:
            raise SchemaError(f"column {spec.name!r} cannot be derived from itself")
    if "expr" not in spec.derived:
        return check_source(spec, schema[names[0]])
    for name in names:
        if schema[name].derived:
            raise SchemaError(f"column {spec.name!r} is computed from {name!r}, which is derived itself: write "
                              f"{name!r}'s own rule into the expression instead")
    expression, where = _expression(spec, schema), f"column {spec.name!r}"
    bounds = expression.bounds(schema)
    divides = any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod))
                  for n in ast.walk(expression.tree))
    nullable = [n for n in names if schema[n].nullable]
    if (nullable or (divides and bounds is None)) and not spec.nullable:
        why = f"{_preview(nullable)} may be missing" if nullable else "it divides by a range that holds 0"
        raise SchemaError(f"{where} is computed by {spec.derived['expr']!r} and {why}: mark {spec.name!r} nullable")
    if bounds is None:
        if not spec.has_bounds:
            raise SchemaError(f"{where}: its sources' bounds do not bound {spec.derived['expr']!r}; declare "
                              f"{spec.name!r}'s public bounds (its values are clipped to them)")
        return
    lo, hi = bounds
    if not (math.isfinite(lo) and math.isfinite(hi)) or max(abs(lo), abs(hi)) > MAX_MAGNITUDE:
        reach = hi if abs(hi) >= abs(lo) else lo
        raise SchemaError(f"{where}: {spec.derived['expr']!r} would reach {reach:g} by its "
                          f"sources' public bounds, beyond ±{MAX_MAGNITUDE:g}, the most a number "
                          "column holds exactly; rescale it (e.g. divide by 1000)")
    if spec.kind == "integer":
        lo, hi = math.floor(lo), math.ceil(hi)
    if spec.lower is None and spec.upper is None:
        spec.lower, spec.upper = lo, hi
    elif (spec.lower is not None and spec.lower > lo) or (spec.upper is not None and spec.upper < hi):
        raise SchemaError(f"{where}: {spec.derived['expr']!r} ranges over {lo:g} … {hi:g} by its sources' public "
                          f"bounds; {spec.name!r}'s bounds must cover that (or leave them out to have them filled in)")


def check_source(spec: ColumnSpec, source: ColumnSpec) -> None:
    """SchemaError if a binned or looked-up column's rule does not fit its source column: the
    source's kind, the bounds the edges must cover, the categories the map must cover, missing
    values the derived column must allow."""
    rule, where, src = spec.derived, f"column {spec.name!r}", source.name
    if source.derived:
        raise SchemaError(f"{where} is derived from {src!r}, which is derived itself: derive it from "
                          f"{source.derived['from']!r} instead")
    if "bins" in rule:
        if not source.is_numeric:
            raise SchemaError(f"{where}: 'bins' need a numeric source, and {src!r} is categorical: use a 'map'")
        edges = rule["bins"]
        if (source.lower is not None and edges[0] > source.lower) or (source.upper is not None and edges[-1] < source.upper):
            lo, hi = ("…" if v is None else f"{v:g}" for v in (source.lower, source.upper))
            raise SchemaError(f"{where}: its edges {edges[0]:g} … {edges[-1]:g} must cover the public bounds of "
                              f"{src!r}, {lo} to {hi}")
    else:
        if source.is_numeric:
            raise SchemaError(f"{where}: a 'map' needs a categorical source, and {src!r} is {source.kind}: use 'bins'")
        vocabulary = source.vocabulary()
        missing = [v for v in vocabulary if v not in rule["map"]]
        if missing:
            raise SchemaError(f"{where}: its map gives no value for these categories of {src!r}: {_preview(missing)}")
        extra = [k for k in rule["map"] if k not in vocabulary]
        if extra:
            raise SchemaError(f"{where}: its map names values that are not categories of {src!r}: {_preview(extra)}")
    if source.nullable and not spec.nullable:
        raise SchemaError(f"{where} is derived from {src!r}, which may be missing: mark {spec.name!r} nullable too")


def compute(spec: ColumnSpec, table: pd.DataFrame, schema) -> np.ndarray:
    """A derived column's values for a table holding its sources."""
    if "expr" not in spec.derived:
        return apply(spec.derived, table[spec.derived["from"]])
    values = _expression(spec, schema).evaluate(table).astype(float)
    if spec.kind == "integer":
        values = np.round(values)
    elif spec.decimals is not None:
        values = np.round(values, spec.decimals)
    if spec.has_bounds:
        values = np.clip(values, spec.lower, spec.upper)
    return spec.as_written(values)


def apply(rule: dict, values: pd.Series | np.ndarray) -> np.ndarray:
    """The derived values (strings; None where the source is missing) of a source column's
    values."""
    values = pd.Series(values).reset_index(drop=True)
    missing = values.isna().to_numpy()
    out = np.full(len(values), None, dtype=object)
    if "bins" in rule:
        x = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        edges, labels = np.asarray(rule["bins"], dtype=float), np.asarray(rule["labels"], dtype=object)
        idx = np.clip(np.searchsorted(edges, np.where(missing, edges[0], x), side="right") - 1, 0, len(labels) - 1)
        out[~missing] = labels[idx[~missing]]
    else:
        present = values[~missing].astype(str)
        looked_up = present.map(rule["map"])
        if looked_up.isna().any():
            raise SchemaError(f"values the map of {rule['from']!r} does not cover: "
                              f"{_preview(pd.unique(present[looked_up.isna()]))}")
        out[~missing] = looked_up.to_numpy(dtype=object)
    return out


def describe(rule: dict, limit: int = 4) -> str:
    """The rule in words, for the steward: 'bins of age: [0, 25) → 0-24, …, [65, 120] → 65+'."""
    if "expr" in rule:
        return f"computed: {rule['expr']}"
    if "bins" in rule:
        edges, labels = rule["bins"], rule["labels"]
        parts = [f"[{a:g}, {b:g}{']' if i == len(labels) - 1 else ')'} → {label}"
                 for i, (a, b, label) in enumerate(zip(edges, edges[1:], labels))]
        kind = "bins"
    else:
        parts = [f"{k} → {v}" for k, v in rule["map"].items()]
        kind = "lookup"
    if len(parts) > limit:
        parts = parts[:limit - 1] + ["…", parts[-1]]
    return f"{kind} of {rule['from']}: " + ", ".join(parts)
