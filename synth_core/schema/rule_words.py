"""A rule in plain words, for the steward checking what they typed (schema/expressions.py parses
it): "if relationship is one of Husband, Wife, then marital-status is one of Married-civ-spouse,
Married-AF-spouse"."""
from __future__ import annotations

import ast

from .expressions import METHODS, Expression, source_text


_WORDS = {ast.Eq: "is", ast.NotEq: "is not", ast.Lt: "is below", ast.LtE: "is at most", ast.Gt: "is above",
          ast.GtE: "is at least", ast.In: "is one of", ast.NotIn: "is none of"}
_OPPOSITE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In}


def explain(expression: Expression) -> str:
    """The expression in plain words, for a steward checking what they typed: "if relationship is
    one of Husband, Wife, then marital-status is one of Married-civ-spouse, Married-AF-spouse"."""
    return _words(expression.tree, expression.names)


def _words(node: ast.AST, names: dict, nested: bool = False) -> str:
    if isinstance(node, ast.BoolOp):
        values = node.values
        if isinstance(node.op, ast.Or) and len(values) == 2 and isinstance(values[0], ast.UnaryOp) \
                and isinstance(values[0].op, (ast.Not, ast.Invert)):  # not A or B: if A, then B
            text = f"if {_words(values[0].operand, names, True)}, then {_words(values[1], names, True)}"
        else:
            joint = " and " if isinstance(node.op, ast.And) else " or "
            text = joint.join(_words(v, names, True) for v in values)
        return f"({text})" if nested else text
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        joint = " and " if isinstance(node.op, ast.BitAnd) else " or "
        text = f"{_words(node.left, names, True)}{joint}{_words(node.right, names, True)}"
        return f"({text})" if nested else text
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
        inner = node.operand
        if isinstance(inner, ast.Compare) and len(inner.ops) == 1 and type(inner.ops[0]) in _OPPOSITE:
            return _words(ast.Compare(inner.left, [_OPPOSITE[type(inner.ops[0])]()], inner.comparators), names)
        return f"not {_words(inner, names, True)}"
    if isinstance(node, ast.Compare):
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(f"{_words(left, names)} {_WORDS[type(op)]} {_words(right, names)}")
            left = right
        return " and ".join(parts)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            subject, name = node.func.value, METHODS[node.func.attr]
        elif node.func.id in ("isna", "notna"):
            subject, name = node.args[0], node.func.id
        else:
            return source_text(node, names).replace("`", "")
        return f"{_words(subject, names)} is {'missing' if name == 'isna' else 'present'}"
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return ", ".join(_words(item, names) for item in node.elts)
    if isinstance(node, ast.Constant):
        return str(node.value)
    return source_text(node, names).replace("`", "")
