"""SchemaError, and what its messages quote: one module every part of the schema package imports,
so that none needs spec.py (and spec.py can import the modules that check it)."""
from __future__ import annotations

import math
from typing import Any, Iterable

# the largest magnitude of a numeric bound: integers beyond 2^53 lose exactness as floats
MAX_MAGNITUDE = 1e15


class SchemaError(ValueError):
    """A schema or a table does not fit the public facts; the message says what and where."""


def _short(value: Any) -> str:
    """A value as a message quotes it, a very long one cut (a number of 400 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text):,} characters)"


def finite_number(x: Any) -> bool:
    """Whether `x` is a number a float holds: an int or a float, not a bool, finite (an int too
    long for a float, as 1 followed by 400 zeros in a JSON file, is not: it would end in an
    OverflowError)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def _preview(values: Iterable[Any], limit: int = 5) -> str:
    values = list(values)
    shown = ", ".join(repr(v) for v in values[:limit])
    more = f" (and {len(values) - limit} more)" if len(values) > limit else ""
    return shown + more
