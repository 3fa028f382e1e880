"""A panel: a person's child rows along time, declared public by the steward on a linked schema.

    time_index   the order column as a time index: each value at most once per person
                 ({"unique": true}), optionally without gaps ({"consecutive": true}: a first value
                 and one more per row); an integer column (a year, a wave, a month's number)
    changes      {child column: step}: a numeric column that moves by exactly `step` per unit of the
                 time index (years of experience: +1 a year; the same in every row of a person: 0)

    time_index_of, check_panel   a declaration as the schema holds it; SchemaError in one line where
                 it cannot be (or where the public bounds could not hold a person's whole sequence)
    panel_words  the declaration in a sentence
    obeyed       which persons' rows obey which declared fact (the review, the private count)
    hold_panel   sampled persons' rows built to obey them: post-processing of a model's own output
    draft_panel  what a draft proposes, where every person's rows show it

Declaring them costs no ε: they are public facts, as rules are. Real persons whose rows break them
are kept as they are (counted for the steward alone); sampled persons are built to obey them, never
rejected and drawn again.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .spec import ColumnSpec, Schema, SchemaError, _short, finite_number

TIME_FIELDS = {"unique", "consecutive"}
# a draft proposes a fact of the panel only where at least this many persons have two rows or more
# (the draft's fewest rows for a category): never a fact read off one or two persons
MIN_PERSONS = 10


def time_index_of(value) -> dict | None:
    """A declared time index as a linked schema holds it ({"unique": True, "consecutive": bool}), or
    None for none; SchemaError in one line for anything else."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - TIME_FIELDS:
        raise SchemaError('a time index is an object {"unique": true, "consecutive": true or '
                          f"false}}, not {_short(value)}")
    if value.get("unique", True) is not True:
        raise SchemaError("a time index holds each value at most once per person (unique: true); a "
                          "column that repeats within a person is an order column only")
    consecutive = value.get("consecutive", False)
    if not isinstance(consecutive, bool):
        raise SchemaError("the time index's consecutive must be true or false, not "
                          f"{_short(consecutive)}")
    return {"unique": True, "consecutive": consecutive}


def _span(spec: ColumnSpec) -> int | None:
    """The steps an integer column's public range holds (its whole numbers less one), or None."""
    return int(math.floor(spec.upper) - math.ceil(spec.lower)) if spec.has_bounds else None


def check_panel(child: Schema, order: str | None, time_index: dict | None, changes,
                max_children: int) -> None:
    """SchemaError in one line unless the time index is the order column, an integer column whose
    public range holds max_children values, and every change is a finite step of a numeric child
    column, at its precision, whose bounds hold a whole person's sequence (sampling builds that)."""
    if not isinstance(changes, dict):
        raise SchemaError("changes is an object of a child column and its change per step of the "
                          f"time index, not {_short(changes)}")
    if time_index is None:
        if changes:
            raise SchemaError("changes run along a time index: declare the order column a time "
                              "index first")
        return
    if order is None:
        raise SchemaError("a time index is the order column of a person's rows: name that column "
                          "(order) first")
    spec = child[order]
    if spec.kind != "integer":
        raise SchemaError(f"the time index {order!r} must be an integer column (a year, a wave, a "
                          f"month's number), not a {spec.kind} one")
    span = _span(spec)
    if span is not None and span + 1 < max_children:
        raise SchemaError(f"the time index {order!r} runs from {spec.lower:g} to {spec.upper:g}: "
                          f"{span + 1} values, fewer than the {max_children} rows a person may "
                          "have; widen its bounds or lower max_children")
    steps = max_children - 1 if time_index["consecutive"] else span
    for name, step in changes.items():
        problem = change_problem(child, order, name, step, steps)
        if problem:
            raise SchemaError(problem)


def change_problem(child: Schema, order: str, name, step, steps: int | None) -> str | None:
    """Why `name` cannot change by `step` per step of the time index `order` over up to `steps`
    steps, in one line; None where it can."""
    if not isinstance(name, str) or name not in child:
        return f"a change is declared on {_short(name)}: no such column of the children's schema"
    if name == order:
        return f"{name!r} is the time index: its steps are the time, it has no change of its own"
    spec = child[name]
    if not spec.is_numeric:
        return f"a change is declared on {name!r}, a {spec.kind} column: only a number has a step"
    if not finite_number(step):
        return (f"the change of {name!r} per step must be a finite number (such as 1), not "
                f"{_short(step)}")
    unit = spec.step
    if unit is not None and abs(step / unit - round(step / unit)) > 1e-9:
        return (f"{name!r} is written in steps of {unit:g}: its change per step must be too, not "
                f"{step!r}")
    if steps is not None and spec.has_bounds and abs(step) * steps > spec.upper - spec.lower + 1e-9:
        return (f"{name!r} runs from {spec.lower:g} to {spec.upper:g}: a change of {step:+g} a "
                f"step over up to {steps} steps needs a range of {abs(step) * steps:g}; widen its "
                "bounds")
    return None


def fact_names(schema) -> list[str]:
    """The declared facts of a linked schema's panel, in words (the columns of `obeyed`)."""
    if schema.time_index is None:
        return []
    names = [f"{schema.order} at most once per person"]
    if schema.time_index["consecutive"]:
        names.append(f"{schema.order} without gaps")
    return names + [f"{name} {step:+g} per step of {schema.order}"
                    for name, step in schema.changes.items()]


def panel_words(order: str | None, time_index: dict | None, changes: dict) -> str | None:
    """The declared panel in a sentence (the CLI's summary, the privacy report), or None."""
    if time_index is None:
        return None
    gaps = ", without gaps" if time_index["consecutive"] else ""
    moves = "".join(f"; {name} changes by exactly {step:+g} per step of it"
                    for name, step in changes.items())
    return f"a person's rows run along {order}: each value at most once per person{gaps}{moves}"


def obeyed(children: pd.DataFrame, owner: np.ndarray, schema) -> pd.DataFrame | None:
    """For each person with two child rows or more (the index: their `owner`), whether their rows
    obey each declared fact (a column a fact, `fact_names`; True: obeyed); None where the schema
    declares none. A missing time breaks the time index; a change is judged between the rows where
    the column is present."""
    if schema.time_index is None:
        return None
    times = pd.to_numeric(children[schema.order], errors="coerce").to_numpy(dtype=float)
    frame = pd.DataFrame({"owner": np.asarray(owner), "t": times})
    for name in schema.changes:
        frame[name] = pd.to_numeric(children[name], errors="coerce").to_numpy(dtype=float)
    frame = frame.sort_values(["owner", "t"], kind="stable").reset_index(drop=True)
    by = frame.groupby("owner")
    size = by.size()
    elapsed, first, present = by["t"].diff(), by.cumcount() == 0, frame["t"].notna()
    names = fact_names(schema)
    rows = [present & (elapsed != 0)]
    if schema.time_index["consecutive"]:
        rows.append(present & (first | (elapsed == 1)))
    out = pd.DataFrame({name: ok.groupby(frame["owner"]).all() for name, ok in zip(names, rows)})
    for fact, (name, step) in zip(names[len(rows):], schema.changes.items()):
        kept = frame.dropna(subset=[name, "t"])
        moved, took = kept.groupby("owner")[name].diff(), kept.groupby("owner")["t"].diff()
        close = np.isclose(moved, step * took, rtol=1e-9, atol=1e-6 * max(1.0, abs(step)))
        out[fact] = (moved.isna() | close).groupby(kept["owner"]).all()
    return out.reindex(size.index[size >= 2]).astype("boolean").fillna(True).astype(bool)


def _written(spec: ColumnSpec, x: np.ndarray) -> np.ndarray:
    """Numbers at the precision the column is written at (whole, its decimals), else as they are."""
    if spec.kind == "integer":
        return np.round(x)
    return np.round(x, spec.decimals) if spec.decimals is not None else x


def _fitting(spec: ColumnSpec, low: np.ndarray, high: np.ndarray) -> tuple:
    """The starts whose sequence (offsets `low`… `high` from it) stays within the column's bounds,
    narrowed to the values the column is written at: (least, most)."""
    lo = spec.lower - low if spec.lower is not None else np.full(len(low), -np.inf)
    hi = spec.upper - high if spec.upper is not None else np.full(len(high), np.inf)
    unit = spec.step
    if unit is None:
        return lo, hi
    return np.ceil(lo / unit - 1e-9) * unit, np.floor(hi / unit + 1e-9) * unit


def hold_panel(children: pd.DataFrame, person: np.ndarray, schema) -> tuple:
    """(children, person): sampled child rows (`person[i]`: row i's person) in each person's time
    order, built to obey the declared time index and changes; unchanged where none is declared.
    Post-processing of the model's own rows: it reads no private value, so it costs no ε.

    Time index: the model's times in order, less each row's rank in its person, are made
    non-decreasing (a running maximum) and the rank added back: each time as near the model's as
    can be, none repeated; consecutive: the person's first time and one more a row. The start is
    clipped so that the whole sequence fits the public range (a person of n rows starts at most
    at upper − (n − 1)): the model's count of rows is kept, its start moved. A missing time takes
    the person's previous one.
    Changes: the person's start value is the median of what each row's value implies for it (the
    value less the step times the time elapsed), at the column's precision and clipped so that the
    whole sequence fits the column's bounds (check_panel makes sure it can); every present value
    then follows by the step; a missing one stays missing."""
    if schema.time_index is None or children.empty:
        return children, person
    spec = schema.child[schema.order]
    t = pd.to_numeric(children[schema.order], errors="coerce").to_numpy(dtype=float)
    ordered = np.lexsort((np.where(np.isnan(t), np.inf, t), person))
    children = children.iloc[ordered].reset_index(drop=True)
    person, t = np.asarray(person)[ordered], t[ordered]
    lower = math.ceil(spec.lower) if spec.lower is not None else -np.inf
    upper = math.floor(spec.upper) if spec.upper is not None else np.inf
    t = pd.Series(t).groupby(person).ffill().fillna(lower if np.isfinite(lower) else 0).to_numpy()
    rank = pd.Series(person).groupby(person).cumcount().to_numpy()
    start = pd.Series(np.round(t) - rank).groupby(person)
    start = start.transform("first") if schema.time_index["consecutive"] else start.cummax()
    last = upper - (np.bincount(person)[person] - 1)
    times = np.minimum(np.maximum(start.to_numpy(), lower), last) + rank
    children[schema.order] = spec.as_written(times)
    elapsed = times - pd.Series(times).groupby(person).transform("first").to_numpy()
    for name, step in schema.changes.items():
        column = schema.child[name]
        x = pd.to_numeric(children[name], errors="coerce").to_numpy(dtype=float)
        offset = step * elapsed
        first = pd.Series(x - offset).groupby(person).transform("median").to_numpy()
        spread = pd.Series(offset).groupby(person)
        lo, hi = _fitting(column, spread.transform("min").to_numpy(),
                          spread.transform("max").to_numpy())
        first = np.minimum(np.maximum(_written(column, first), lo), hi)
        missing = np.isnan(x) | np.isnan(first)
        children[name] = column.as_written(_written(column, first + offset), missing)
    return children, person


def draft_panel(children: pd.DataFrame, owner: pd.Series, order: str | None, child: Schema,
                max_children: int) -> tuple[dict | None, dict]:
    """(time_index, changes) a draft proposes, READING THE CHILDREN'S TABLE as read (`owner`: each
    row's person, missing where it has no key): the order column a time index where every person's
    times are present and never repeat (consecutive where none has a gap), and a numeric column's
    step where every person's rows move by that step per unit of time; only where at least
    MIN_PERSONS persons have two rows or more, and only what `check_panel` accepts under the drafted
    bounds. The order column must be an integer one, not read from dates."""
    if order not in child or child[order].kind != "integer" or child[order].date is not None:
        return None, {}
    frame = pd.DataFrame({"owner": owner, "t": pd.to_numeric(children[order], errors="coerce")})
    frame = frame[frame["owner"].notna()].sort_values(["owner", "t"], kind="stable")
    by = frame.groupby("owner")
    elapsed = by["t"].diff()
    if frame["t"].isna().any() or (by.size() >= 2).sum() < MIN_PERSONS or (elapsed == 0).any():
        return None, {}
    time_index = {"unique": True, "consecutive": bool((elapsed.dropna() == 1).all())}
    try:
        check_panel(child, order, time_index, {}, max_children)
    except SchemaError:
        return None, {}
    steps = max_children - 1 if time_index["consecutive"] else _span(child[order])
    changes = {}
    for spec in child.columns:
        if not spec.is_numeric or spec.name == order:
            continue
        kept = frame.assign(x=pd.to_numeric(children[spec.name], errors="coerce")).dropna()
        by = kept.groupby("owner")
        ratio = (by["x"].diff() / by["t"].diff()).dropna()
        if (by.size() >= 2).sum() < MIN_PERSONS or ratio.empty:
            continue
        step = float(ratio.iloc[0])
        step = round(step / spec.step) * spec.step if spec.step else step
        step = int(step) if float(step).is_integer() else round(step, spec.decimals or 12)
        if np.allclose(ratio, step, rtol=1e-9, atol=1e-9) and \
                not change_problem(child, order, spec.name, step, steps):
            changes[spec.name] = step
    return time_index, changes
