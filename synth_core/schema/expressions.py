"""The small expression language of declared rules and computed columns: pandas' `DataFrame.query`
syntax, parsed safely and checked against the public schema.

    not (relationship in ['Husband', 'Wife']) or `marital-status` in ['Married-civ-spouse', 'Married-AF-spouse']
    `capital-gain` == 0 or `capital-loss` == 0
    yr_renovated == 0 or yr_renovated >= yr_built
    sqft_above + sqft_basement                      (a number: a computed column's expression)

What it takes: column names (in backticks when they hold spaces, dashes or other signs), numbers,
texts in quotes, lists of them after `in` / `not in`, comparisons (`==`, `!=`, `<`, `<=`, `>`, `>=`,
chained as in `0 <= x < 10`), `and`, `or`, `not` (and `&`, `|`, `~` for them), arithmetic (`+`, `-`,
`*`, `/`, `//`, `%`), and these calls only: `abs(x)`, `min(x, y, …)`, `max(x, y, …)`, `round(x)`,
`isna(x)`, `notna(x)` (also `x.isna()`, `x.notna()`). Nothing else parses: no other call, no
attribute, no subscript, no lambda, no import; the text is never run as code (it becomes a Python
syntax tree that is walked here, node by node, over a table's columns).

Missing values: a comparison with a missing value is false, whatever the operator (`!=` included),
and so is `in`; arithmetic with a missing value is missing. So `x != 0` holds only where x is
present and not 0; a rule that lets x be missing says so: `isna(x) or x > 0`. `not` turns a false
comparison true: `not (x == 0)` holds where x is missing.

Types come from the schema: a numeric column is a number, a categorical one a text (its categories
as text). Order comparisons and arithmetic take numbers; a text is compared with `==`, `!=`, `in`; a
text literal compared with a categorical column must be one of its public categories (a typo is
caught before anything is spent).
"""
from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .errors import SchemaError, _preview, finite_number

if TYPE_CHECKING:
    from .spec import Schema

MAX_LENGTH = 2000  # characters of one expression
MAX_NODES = 400  # nodes of its syntax tree
MAX_NUMBER = float(np.finfo(float).max)  # the largest number a rule may write (a float's)
FUNCTIONS = ("abs", "min", "max", "round", "isna", "notna")
METHODS = {"isna": "isna", "notna": "notna", "isnull": "isna", "notnull": "notna"}
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
ORDER = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
EQUALITY = {ast.Eq: operator.eq, ast.NotEq: operator.ne}
NUMBER, TEXT, BOOL = "number", "text", "true/false"


class ExpressionError(SchemaError):
    """An expression that does not parse, or does not fit the schema; the message is one line."""


def _placeholders(text: str) -> tuple[str, dict[str, str]]:
    """The text with every `backticked name` replaced by an identifier, and the identifiers' names;
    a line break or tab outside quotes becomes a space (a rule typed over several lines), what is
    inside quotes is kept."""
    out, names, i, quote = [], {}, 0, None
    while i < len(text):
        ch = text[i]
        if quote:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise ExpressionError("a backtick opens a column name that no backtick closes")
            name = text[i + 1:end]
            if not name:
                raise ExpressionError("`` names no column")
            key = next((k for k, v in names.items() if v == name), f"_column_{len(names)}_")
            names[key] = name
            out.append(f" {key} ")
            i = end
        else:
            out.append(" " if ch in "\n\r\t" else ch)
        i += 1
    if quote:
        raise ExpressionError(f"a text opened with {quote} is never closed")
    return "".join(out), names


@dataclass(frozen=True)
class Expression:
    """One parsed expression: `kind` is NUMBER or BOOL (TEXT for a bare column), `columns` the
    columns it reads."""

    text: str
    tree: ast.AST = field(repr=False)
    names: dict = field(repr=False)  # identifier in the tree → column name
    kind: str = BOOL
    columns: tuple = ()

    def evaluate(self, table: pd.DataFrame) -> np.ndarray:
        """Its value on every row of a table in canonical form (schema/tables.py): booleans, or
        numbers with NaN for missing."""
        value = _Evaluator(table, self.names, len(table)).run(self.tree)
        return _broadcast(value, len(table))

    def bounds(self, schema: Schema) -> tuple[float, float] | None:
        """The interval a number expression's values lie in, from its columns' public bounds (None:
        unbounded, or a column without bounds)."""
        return _interval(self.tree, self.names, schema)


def parse(text: Any, schema: Schema, want: str = BOOL) -> Expression:
    """An expression checked against the schema; ExpressionError (one line) if it is not one of
    `want`'s kind."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"an expression is a non-empty text, not {text!r}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"the expression is {len(text):,} characters long; at most {MAX_LENGTH:,}")
    source, names = _placeholders(text.strip())
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except SyntaxError as e:
        raise ExpressionError(f"it does not parse ({e.msg})") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        raise ExpressionError(f"the expression has {nodes} parts; at most {MAX_NODES}")
    checker = _Checker(schema, names)
    kind = checker.kind(tree)
    if kind != want:
        what = {BOOL: "true or false for every row (a comparison)", NUMBER: "a number"}[want]
        raise ExpressionError(f"it must be {what}, and it is a {kind}")
    return Expression(text, tree, names, kind, tuple(dict.fromkeys(checker.columns)))


def source_text(node: ast.AST, names: dict) -> str:
    """A node of a parsed expression written back as the steward would type it (names in
    backticks)."""
    text = ast.unparse(node)
    for key, name in names.items():
        text = text.replace(key, f"`{name}`")
    return text


class _Checker:
    """Walks a tree: refuses anything outside the language, and returns each node's kind."""

    def __init__(self, schema: Schema, names: dict):
        self.schema, self.names, self.columns = schema, names, []

    def column(self, node: ast.AST):
        """The schema's column a node names, or None."""
        if isinstance(node, ast.Name):
            name = self.names.get(node.id, node.id)
            return self.schema[name] if name in self.schema else None
        return None

    def kind(self, node: ast.AST) -> str:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise ExpressionError(f"{source_text(node, self.names)!r}: {_refused(node)}")
        return method(node)

    def _Name(self, node):
        spec = self.column(node)
        if spec is None:
            name = self.names.get(node.id, node.id)
            raise ExpressionError(f"{name!r} is not a column of the schema" + (
                "" if node.id in self.names else " (a name with spaces or signs goes in backticks: `my column`; "
                "a text goes in quotes: 'value')"))
        self.columns.append(spec.name)
        return NUMBER if spec.is_numeric else TEXT

    def _Constant(self, node):
        value = node.value
        if isinstance(value, bool):
            return BOOL
        if isinstance(value, (int, float)):
            return _number(value)
        if isinstance(value, str):
            return TEXT
        raise ExpressionError(f"{value!r}: only numbers, texts in quotes and column names are values here")

    def _BoolOp(self, node):
        for value in node.values:
            self.want(value, BOOL, "and/or")
        return BOOL

    def _UnaryOp(self, node):
        if isinstance(node.op, (ast.Not, ast.Invert)):
            self.want(node.operand, BOOL, "not")
            return BOOL
        self.want(node.operand, NUMBER, "a sign")
        return NUMBER

    def _BinOp(self, node):
        if isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            self.want(node.left, BOOL, "& / |")
            self.want(node.right, BOOL, "& / |")
            return BOOL
        if type(node.op) not in ARITHMETIC:
            raise ExpressionError(f"{source_text(node, self.names)!r}: the operator is not one of + - * / // % & |")
        self.want(node.left, NUMBER, SYMBOLS[type(node.op)])
        self.want(node.right, NUMBER, SYMBOLS[type(node.op)])
        return NUMBER

    def _Compare(self, node):
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                self.membership(left, right)
            elif type(op) in ORDER:
                self.want(left, NUMBER, "an order comparison (< <= > >=)")
                self.want(right, NUMBER, "an order comparison (< <= > >=)")
            elif type(op) in EQUALITY:
                a, b = self.kind(left), self.kind(right)
                if a != b:
                    raise ExpressionError(f"{source_text(node, self.names)!r} compares a {a} with a {b}" + (
                        " (a categorical column's values are texts: put the value in quotes)"
                        if {a, b} == {NUMBER, TEXT} else ""))
                self.known_category(left, right)
                self.known_category(right, left)
            else:
                raise ExpressionError(f"{source_text(node, self.names)!r}: {_refused(op)}")
            left = right
        return BOOL

    def membership(self, left, right):
        kind = self.kind(left)
        if kind not in (NUMBER, TEXT):
            raise ExpressionError(f"{source_text(left, self.names)!r}: `in` tests a value, not a {kind}")
        if not isinstance(right, (ast.List, ast.Tuple, ast.Set)) or not right.elts:
            raise ExpressionError(f"{source_text(right, self.names)!r}: `in` takes a list of values, ['a', 'b']")
        for item in right.elts:
            if not isinstance(item, ast.Constant) or self.kind(item) != kind:
                raise ExpressionError(f"{source_text(right, self.names)!r}: a list after `in` holds {kind}s only, "
                                      f"written out ({source_text(left, self.names)} is a {kind})")
            self.known_category(left, item)

    def known_category(self, column, literal):
        spec = self.column(column)
        if spec is None or spec.is_numeric or not isinstance(literal, ast.Constant):
            return
        if str(literal.value) not in spec.vocabulary():
            raise ExpressionError(f"{literal.value!r} is not a category of {spec.name!r} (its categories: "
                                  f"{_preview(spec.vocabulary(), 8)})")

    def _Call(self, node):
        if node.keywords:
            raise ExpressionError(f"{source_text(node, self.names)!r}: calls take no named arguments here")
        if isinstance(node.func, ast.Attribute):  # x.isna(), x.notna()
            if node.func.attr not in METHODS or node.args or self.column(node.func.value) is None:
                raise ExpressionError(f"{source_text(node, self.names)!r}: the only methods here are a column's "
                                      ".isna() and .notna()")
            self.kind(node.func.value)
            return BOOL
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ExpressionError(f"{source_text(node, self.names)!r}: the only calls here are "
                                  f"{', '.join(f + '()' for f in FUNCTIONS)}")
        name, args = node.func.id, node.args
        if name in ("isna", "notna"):
            if len(args) != 1 or self.column(args[0]) is None:
                raise ExpressionError(f"{source_text(node, self.names)!r}: {name}() takes one column")
            self.kind(args[0])
            return BOOL
        if name in ("abs", "round") and len(args) != 1 or name in ("min", "max") and len(args) < 2:
            raise ExpressionError(f"{source_text(node, self.names)!r}: {name}() takes "
                                  f"{'one number' if name in ('abs', 'round') else 'two or more numbers'}")
        for arg in args:
            self.want(arg, NUMBER, f"{name}()")
        return NUMBER

    def want(self, node, kind: str, where: str) -> None:
        got = self.kind(node)
        if got != kind:
            raise ExpressionError(f"{source_text(node, self.names)!r} is a {got}; {where} takes a {kind}")


def _number(value: int | float) -> str:
    """NUMBER for a number a rule can hold, a float's range; one too long for a float (1 followed
    by 400 zeros) or written as 1e400 (which reads as infinity) is refused in one line, not with
    an OverflowError."""
    if finite_number(value):
        return NUMBER
    shown = (f"a number of {len(str(abs(value))):,} digits" if isinstance(value, int) else
             "a number beyond a float's range (it reads as infinity)")
    raise ExpressionError(f"{shown} is too large for a rule: its numbers lie within "
                          f"±{MAX_NUMBER:.3g}")


def _refused(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return "attributes are not part of a rule (only a column's .isna() and .notna())"
    if isinstance(node, (ast.Subscript, ast.Starred)):
        return "subscripts are not part of a rule"
    if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.IfExp, ast.ListComp, ast.GeneratorExp, ast.DictComp,
                         ast.SetComp, ast.Dict, ast.JoinedStr, ast.Await, ast.Yield)):
        return "this construct is not part of the rule language"
    if isinstance(node, (ast.Is, ast.IsNot)):
        return "use == / != (or isna()), not `is`"
    return f"{type(node).__name__} is not part of the rule language"


def _broadcast(value, n: int) -> np.ndarray:
    array = np.asarray(value)
    return np.broadcast_to(array, (n,)).copy() if array.ndim == 0 else array


class _Evaluator:
    """Walks a checked tree over a table's columns (numpy arrays; NaN / None for missing)."""

    def __init__(self, table: pd.DataFrame, names: dict, n: int):
        self.table, self.names, self.n = table, names, n

    def run(self, node):
        return getattr(self, f"_{type(node).__name__}")(node)

    def _Name(self, node):
        values = self.table[self.names.get(node.id, node.id)]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            return values.to_numpy(dtype=float, na_value=np.nan)
        missing = values.isna().to_numpy()
        texts = values.astype(object).astype(str).to_numpy(dtype=object)
        texts[missing] = None
        return texts

    def _Constant(self, node):
        return node.value

    def _BoolOp(self, node):
        values = [_broadcast(self.run(v), self.n).astype(bool) for v in node.values]
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return combine.reduce(values)

    def _UnaryOp(self, node):
        value = self.run(node.operand)
        if isinstance(node.op, (ast.Not, ast.Invert)):
            return ~_broadcast(value, self.n).astype(bool)
        return -np.asarray(value, dtype=float) if isinstance(node.op, ast.USub) else np.asarray(value, dtype=float)

    def _BinOp(self, node):
        left, right = self.run(node.left), self.run(node.right)
        if isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            combine = np.logical_and if isinstance(node.op, ast.BitAnd) else np.logical_or
            return combine(_broadcast(left, self.n).astype(bool), _broadcast(right, self.n).astype(bool))
        with np.errstate(all="ignore"):
            out = ARITHMETIC[type(node.op)](np.asarray(left, dtype=float), np.asarray(right, dtype=float))
        return np.where(np.isfinite(out), out, np.nan)  # a division by zero gives a missing value

    def _Compare(self, node):
        result, left = np.ones(self.n, dtype=bool), self.run(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                right = [item.value for item in right_node.elts]
                result &= self.member(left, right, isinstance(op, ast.NotIn))
                continue
            right = self.run(right_node)
            a, b = _broadcast(left, self.n), _broadcast(right, self.n)
            present = ~_missing(a) & ~_missing(b)
            compare = ORDER.get(type(op)) or EQUALITY[type(op)]
            out = np.zeros(self.n, dtype=bool)
            if present.any():
                out[present] = compare(a[present], b[present])
            result &= out
            left = right
        return result

    def member(self, left, items: list, negated: bool) -> np.ndarray:
        values = _broadcast(left, self.n)
        present = ~_missing(values)
        out = np.zeros(self.n, dtype=bool)
        if values.dtype.kind in "OUS":
            found = pd.Series(values[present]).isin([str(v) for v in items]).to_numpy()
        else:
            found = np.isin(values[present], np.asarray(items, dtype=float))
        out[present] = ~found if negated else found
        return out

    def _Call(self, node):
        if isinstance(node.func, ast.Attribute):
            missing = _missing(_broadcast(self.run(node.func.value), self.n))
            return missing if METHODS[node.func.attr] == "isna" else ~missing
        name, args = node.func.id, [self.run(a) for a in node.args]
        if name in ("isna", "notna"):
            missing = _missing(_broadcast(args[0], self.n))
            return missing if name == "isna" else ~missing
        numbers = [np.asarray(a, dtype=float) for a in args]
        if name == "abs":
            return np.abs(numbers[0])
        if name == "round":
            return np.round(numbers[0])
        stacked = np.vstack([_broadcast(a, self.n) for a in numbers])
        with np.errstate(all="ignore"):  # a missing argument gives a missing value
            return (np.max if name == "max" else np.min)(stacked, axis=0)


def _missing(values: np.ndarray) -> np.ndarray:
    if values.dtype == object:
        return pd.isna(values)
    if values.dtype.kind in "US":  # a text written in the rule
        return np.zeros(len(values), dtype=bool)
    return np.isnan(values.astype(float))


def _interval(node: ast.AST, names: dict, schema: Schema) -> tuple[float, float] | None:
    """Interval arithmetic over the public bounds (None where unknown or unbounded)."""
    if isinstance(node, ast.Constant):
        return float(node.value), float(node.value)
    if isinstance(node, ast.Name):
        spec = schema[names.get(node.id, node.id)]
        return (float(spec.lower), float(spec.upper)) if spec.has_bounds else None
    if isinstance(node, ast.UnaryOp):
        inner = _interval(node.operand, names, schema)
        return None if inner is None else ((-inner[1], -inner[0]) if isinstance(node.op, ast.USub) else inner)
    parts = [_interval(p, names, schema) for p in (
        [node.left, node.right] if isinstance(node, ast.BinOp) else node.args if isinstance(node, ast.Call) else [])]
    if not parts or any(p is None for p in parts):
        return None
    if isinstance(node, ast.Call):
        name = node.func.id
        if name == "abs":
            (lo, hi), = parts
            return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
        if name == "round":
            (lo, hi), = parts
            return float(round(lo)), float(round(hi))
        pick = max if name == "max" else min
        return pick(p[0] for p in parts), pick(p[1] for p in parts)
    (a, b), (c, d) = parts
    op = type(node.op)
    if op is ast.Add:
        return a + c, b + d
    if op is ast.Sub:
        return a - d, b - c
    if op is ast.Mult:
        corners = [a * c, a * d, b * c, b * d]
        return min(corners), max(corners)
    if op in (ast.Div, ast.FloorDiv) and not c <= 0 <= d:
        corners = [a / c, a / d, b / c, b / d]
        lo, hi = min(corners), max(corners)
        return (math.floor(lo), math.floor(hi)) if op is ast.FloorDiv else (lo, hi)
    if op is ast.Mod and c > 0:
        return 0.0, d
    return None

