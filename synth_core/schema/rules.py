"""Declared rules: facts every row of the table obeys, which every synthetic row then obeys too.

The schema's `"rules"` is a list of expressions in pandas' `DataFrame.query` syntax
(schema/expressions.py: the language, how a missing value counts, what is refused), each true for
every row:

    "rules": ["not (relationship in ['Husband', 'Wife']) or `marital-status` in ['Married-civ-spouse', 'Married-AF-spouse']",
              "`capital-gain` == 0 or `capital-loss` == 0"]

A rule is a public fact, like a bound: declaring it costs no ε. The private table is held to the
rules when it is validated (a row that breaks one is dropped and counted, the counts shown to the
steward only;
a rule that most rows break, or rules that together drop most rows, are refused as probably
mistyped), and a model's rows are held to them when it samples (models/base.py: rejection of the
model's own rows, which is post-processing). This module is the rules' one home: parsing them
against the schema, and which rows break which.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .errors import SchemaError
from .expressions import BOOL, EQUALITY, ORDER, Expression, ExpressionError, parse
from .rule_words import explain

# a rule broken by more than this share of the private rows is refused as probably mistyped, and
# so are the rules together when the rows they drop between them are more than this share
MOSTLY_BROKEN = 0.5


def _quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit - 1] + "…")


def compiled(rules: Any, schema) -> list[Expression]:
    """The schema's rules parsed and checked against its columns; SchemaError naming the rule and
    the problem."""
    if rules is None:
        return []
    if not isinstance(rules, list):
        raise SchemaError("the schema's rules must be a list of texts, each a condition every row meets")
    out, seen = [], set()
    for i, text in enumerate(rules, 1):
        if not isinstance(text, str):
            raise SchemaError(f"rule {i} must be a text (a condition every row meets), not {text!r}")
        if text.strip() in seen:
            raise SchemaError(f"rule {i} {_quote(text)} is listed twice")
        seen.add(text.strip())
        try:
            out.append(parse(text, schema, BOOL))
        except ExpressionError as e:
            raise SchemaError(f"rule {i} {_quote(text)}: {e}") from None
    return out


# `x OP c` read as `c OP' x` when the column is on the right
_FLIPPED = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}


def scale_from_rules(schema) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """What the rules say of each numeric column's scale, read from their text (public, like the
    bounds): (edges, values). Edges: where its bins need an edge so that no bin holds values on both
    sides of what a rule says of it: a value a rule names (`x == 0`, `x in [1, 2]`) gets a bin of
    its own, a threshold it compares with (`x >= 18`) an edge between the values below and from it.
    Without them a discretising model's bin [0, 20) decodes to 0 one time in 21, and holding its
    rows to `x == 0 or …` keeps too few of them. Values: those a rule names, which a model that
    draws numbers as numbers draws exactly (encoding/vectors.py)."""
    edges: dict[str, set] = {}
    values: dict[str, set] = {}
    for spec, named, point, op in _comparisons(schema):
        if point:
            values.setdefault(spec.name, set()).update(named)
        for v in named:
            below, above = spec.point_edges(v)
            # a point: a bin of its own; `x >= v` or `x < v`: an edge below v; `x > v` or `x <= v`:
            # one above it
            edges.setdefault(spec.name, set()).update(
                (below, above) if point else (below,) if op in (ast.GtE, ast.Lt) else (above,))
    return ({name: sorted(e) for name, e in edges.items() if e}, {name: sorted(v) for name, v in values.items() if v})


def _comparisons(schema):
    """Each comparison of a numeric column with numbers in the schema's rules, as `_named` reads
    it."""
    for rule in compiled(schema.rules, schema):
        for node in ast.walk(rule.tree):
            if isinstance(node, ast.Compare):
                left = node.left
                for op, right in zip(node.ops, node.comparators):
                    found = _named(schema, rule.names, left, type(op), right)
                    if found is not None:
                        yield found
                    left = right


def _named(schema, names: dict, left: ast.AST, op: type, right: ast.AST):
    """(the numeric column, the finite values, whether they are points) a comparison names, with the
    operator read from the column's side, or None."""
    spec = _numeric(schema, names, left)
    if spec is None:
        spec, right, op = _numeric(schema, names, right), left, _FLIPPED.get(op, op)
    if spec is None:
        return None
    if op in (ast.In, ast.NotIn) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        values, point = [e.value for e in right.elts if isinstance(e, ast.Constant)], True
    elif isinstance(right, ast.Constant) and (op in EQUALITY or op in ORDER):
        values, point = [right.value], op in EQUALITY
    else:
        return None
    values = [float(v) for v in values if not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)]
    return spec, values, point, op


def _numeric(schema, names: dict, node: ast.AST):
    if isinstance(node, ast.Name):
        name = names.get(node.id, node.id)
        if name in schema and schema[name].is_numeric and not schema[name].derived:
            return schema[name]
    return None


def breaking(rules: list[Expression], table: pd.DataFrame) -> dict[str, np.ndarray]:
    """For each rule, which of the table's rows break it (True where a row breaks it)."""
    return {rule.text: ~rule.evaluate(table) for rule in rules}


def obeying(rules: list[Expression], table: pd.DataFrame) -> np.ndarray:
    """Which rows obey every rule."""
    keep = np.ones(len(table), dtype=bool)
    for broken in breaking(rules, table).values():
        keep &= ~broken
    return keep


def hold_private_table(rules: list[Expression], table: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The private table without the rows that break a rule, and how many rows break each
    (private counts, for the steward's eyes); SchemaError for a rule most rows break (probably
    mistyped), or rules that together drop most rows (MOSTLY_BROKEN: the same limit)."""
    if not rules or table.empty:
        return table, {}
    tally = RuleTally.of(rules, table)
    tally.refuse_mostly_broken(rules)
    return table.loc[tally.keep].reset_index(drop=True), tally.counts


@dataclass
class RuleTally:
    """What the rules make of some rows: which rows obey them all (`keep`), how many break each
    rule, how many of those miss a value of each column it reads, the rows seen and dropped. A
    table read a batch at a time adds its batches' up (schema.batches.Counted) and is refused
    exactly as the whole one is."""
    keep: np.ndarray
    counts: dict[str, int]
    missing: dict[tuple[str, str], int]
    rows: int
    dropped: int

    @classmethod
    def of(cls, rules: list[Expression], table: pd.DataFrame) -> "RuleTally":
        broken = breaking(rules, table)
        keep = ~np.logical_or.reduce(list(broken.values())) if broken else np.ones(len(table), bool)
        missing = {(rule.text, c): int((table[c].isna().to_numpy() & broken[rule.text]).sum())
                   for rule in rules for c in rule.columns}
        return cls(keep, {text: int(rows.sum()) for text, rows in broken.items()}, missing,
                   len(table), int((~keep).sum()))

    def refuse_mostly_broken(self, rules: list[Expression]) -> None:
        """SchemaError for a rule most rows break, or rules that together drop most rows."""
        n = self.rows
        for rule in rules:
            count = self.counts[rule.text]
            if count > MOSTLY_BROKEN * n:
                missing = [c for c in rule.columns if self.missing[rule.text, c] > 0.5 * count]
                why = (f"most of them miss a value of {', '.join(map(repr, missing))}, and a "
                       "comparison with a missing value is false: allow it with "
                       f"isna({_backticked(missing[0])}) or …" if missing else
                       "probably mistyped; correct it or take it out")
                raise SchemaError(f"rule {_quote(rule.text)} is broken by {count:,} of the table's "
                                  f"{n:,} rows ({count / n:.0%}): {why}")
        if self.dropped > MOSTLY_BROKEN * n:  # the rules together, held to what one rule is held to
            each = ", ".join(f"{_quote(text, 40)} {count:,}"
                             for text, count in self.counts.items() if count)
            raise SchemaError(f"the rules together drop {self.dropped:,} of the table's {n:,} "
                              f"rows ({self.dropped / n:.0%}), more than half though each alone "
                              f"drops less ({each}): probably one is mistyped or they "
                              "contradict each other; correct or take out one")


def contradiction(rules: list[Expression], conditions: dict, schema) -> str | None:
    """The first rule that sampling conditions (checked: Schema.check_conditions) make impossible,
    as one line; None if none does. A rule is judged where the conditions fix every column it reads;
    one they fix in part is left to sampling, which says so when too few rows meet it."""
    fixed = set(conditions or {})
    judged = [rule for rule in rules if rule.columns and set(rule.columns) <= fixed]
    if not judged:
        return None
    row = pd.DataFrame({name: pd.Series([value], dtype=float if schema[name].is_numeric else object)
                        for name, value in conditions.items()})
    for rule in judged:
        if not bool(rule.evaluate(row)[0]):
            shown = ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v!r}"
                              for k, v in conditions.items() if k in rule.columns)
            return f"the conditions ({shown}) break the rule {_quote(rule.text)}: no row can meet both"
    return None


@dataclass(frozen=True)
class RulePreview:
    """A rule as the steward typed it, checked: its words, and how many of their rows break it (a
    private count, for their screen only)."""

    text: str
    words: str
    breaking: int
    rows: int


def preview(text: str, schema, table: pd.DataFrame | None = None) -> RulePreview:
    """A rule checked against the schema (SchemaError, one line, if it is not one) and, given the
    private table (validated: schema/tables.py), the rows that break it."""
    try:
        rule = parse(text, schema, BOOL)
    except ExpressionError as e:
        raise SchemaError(f"{_quote(text)}: {e}") from None
    broken = int((~rule.evaluate(table)).sum()) if table is not None else 0
    return RulePreview(text, explain(rule), broken, 0 if table is None else len(table))


# pairs of column-name words that read as "the second comes after the first" (a template, never a
# fact read from the rows: the steward checks it against their rows' counts before adding it)
_ORDERED = (("built", "renovated"), ("start", "end"), ("min", "max"), ("from", "to"), ("open", "close"),
            ("birth", "death"), ("admission", "discharge"), ("low", "high"), ("first", "last"))


def templates(schema, limit: int = 6) -> list[str]:
    """Rules a steward may mean, suggested from the column names only (never from the rows): an
    order between two numbers whose names pair up (`yr_built` / `yr_renovated`), a gain and a loss
    that are not both non-zero."""
    numbers = [c for c in schema.columns if c.is_numeric and not c.derived]
    out = []
    for a in numbers:
        for b in numbers:
            la, lb = a.name.lower(), b.name.lower()
            for first, second in _ORDERED:
                if a is not b and first in la and second in lb and la.replace(first, "") == lb.replace(second, ""):
                    later = f"{_name(b)} >= {_name(a)}"
                    out.append(f"{_name(b)} == 0 or {later}" if "renov" in lb else later)
            if la.endswith("gain") and lb.endswith("loss") and la[:-4] == lb[:-4]:
                out.append(f"{_name(a)} == 0 or {_name(b)} == 0")
    return _parsing(out, schema)[:limit]


def forms(schema) -> list[str]:
    """The rule forms written with this schema's own columns and public categories, for a steward to
    adapt: an if-then between categories, an order between numbers, a value allowed to be
    missing."""
    numbers = [c for c in schema.columns if c.is_numeric and not c.derived]
    categories = [c for c in schema.columns if not c.is_numeric and not c.derived and len(c.vocabulary()) > 1]
    out = []
    if len(categories) >= 2:
        a, b = categories[:2]
        out.append(f"not ({_name(a)} == {a.vocabulary()[0]!r}) or {_name(b)} in {b.vocabulary()[:2]!r}")
    if len(numbers) >= 2:
        out.append(f"{_name(numbers[0])} <= {_name(numbers[1])}")
    nullable = next((c for c in numbers if c.nullable), None)
    if nullable is not None:
        out.append(f"isna({_name(nullable)}) or {_name(nullable)} > 0")
    return _parsing(out, schema)


def _parsing(texts: list[str], schema) -> list[str]:
    kept = []
    for text in dict.fromkeys(texts):
        try:
            parse(text, schema, BOOL)
        except ExpressionError:
            continue
        kept.append(text)
    return kept


def _name(column) -> str:
    return _backticked(column.name)


def _backticked(name: str) -> str:
    return name if name.isidentifier() else f"`{name}`"
