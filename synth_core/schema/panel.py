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


def _count(spec: ColumnSpec) -> int | None:
    """How many times a time index can hold: its declared values, else the whole numbers within its
    bounds (None without bounds)."""
    if spec.values is not None:
        return len(spec.values)
    return int(math.floor(spec.upper) - math.ceil(spec.lower)) + 1 if spec.has_bounds else None


def _position(spec: ColumnSpec, t: np.ndarray) -> np.ndarray:
    """Times as their place among the values the time index can hold (0: the first; missing kept):
    consecutive times are consecutive places (1980, 1982, 1984 where those are its values)."""
    values = spec.written_values()
    if values is not None:
        return np.where(np.isnan(t), np.nan, np.searchsorted(values, spec.snap(t)))
    return t - math.ceil(spec.lower) if spec.lower is not None else t


def _time_at(spec: ColumnSpec, place: np.ndarray) -> np.ndarray:
    """The inverse of `_position`."""
    values = spec.written_values()
    if values is not None:
        return values[place.astype(int)]
    return place + math.ceil(spec.lower) if spec.lower is not None else place


def _most_elapsed(spec: ColumnSpec, consecutive: bool, rows: int) -> float | None:
    """The most time a person's rows can span: `rows` consecutive values of the time index, or its
    whole range (None where unknown)."""
    values = spec.written_values()
    if values is None:
        return rows - 1 if consecutive else (_count(spec) - 1 if spec.has_bounds else None)
    if consecutive and rows <= len(values):
        return float(np.max(values[rows - 1:] - values[:len(values) - rows + 1]))
    return float(values[-1] - values[0])


def _lattice(spec: ColumnSpec) -> tuple[float, float | None, float, float]:
    """(base, unit, least, most): the values a change column takes are base + k·unit between least
    and most (unit None: any number; a value set not evenly spaced has no unit)."""
    values = spec.written_values()
    if values is not None:
        gaps = np.diff(values)
        unit = float(gaps[0]) if np.allclose(gaps, gaps[0]) else None
        return float(values[0]), unit, float(values[0]), float(values[-1])
    return (0.0, spec.step, -np.inf if spec.lower is None else spec.lower,
            np.inf if spec.upper is None else spec.upper)


def _multiple(step: float, unit: float) -> bool:
    return abs(step / unit - round(step / unit)) <= 1e-9


def check_panel(child: Schema, order: str | None, time_index: dict | None, changes,
                max_children: int) -> None:
    """SchemaError in one line unless the time index is the order column, an integer column that
    can hold max_children times, and every change is a finite step of a numeric child column, on
    the values it takes, whose range holds a whole person's sequence (sampling builds that)."""
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
    count = _count(spec)
    if count is not None and count < max_children:
        raise SchemaError(f"the time index {order!r} takes {count} values ({spec.lower:g} to "
                          f"{spec.upper:g}), fewer than the {max_children} rows a person may "
                          "have; widen its range or lower max_children")
    elapsed = _most_elapsed(spec, time_index["consecutive"], max_children)
    for name, step in changes.items():
        problem = change_problem(child, order, name, step, elapsed)
        if problem:
            raise SchemaError(problem)


def change_problem(child: Schema, order: str, name, step, elapsed: float | None) -> str | None:
    """Why `name` cannot change by `step` per step of the time index `order` over a person's rows
    spanning up to `elapsed` of it, in one line; None where it can."""
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
    _, unit, least, most = _lattice(spec)
    if spec.values is not None and step != 0 and (unit is None or not _multiple(step, unit)):
        return (f"{name!r} takes only its declared values: a change of {step:+g} a step needs them "
                "evenly spaced, by a whole share of the step")
    if unit is not None and not _multiple(step, unit):
        return (f"{name!r} is written in steps of {unit:g}: its change per step must be too, not "
                f"{step!r}")
    if elapsed is not None and abs(step) * elapsed > most - least + 1e-9:
        return (f"{name!r} runs from {least:g} to {most:g}: a change of {step:+g} a step over up "
                f"to {elapsed:g} steps needs a range of {abs(step) * elapsed:g}; widen its range")
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
    declares none. A missing time breaks the time index; without gaps is judged among the values it
    can hold (`_position`); a change is judged between the rows where the column is present."""
    if schema.time_index is None:
        return None
    times = pd.to_numeric(children[schema.order], errors="coerce").to_numpy(dtype=float)
    frame = pd.DataFrame({"owner": np.asarray(owner), "t": times,
                          "place": _position(schema.child[schema.order], times)})
    for name in schema.changes:
        frame[name] = pd.to_numeric(children[name], errors="coerce").to_numpy(dtype=float)
    frame = frame.sort_values(["owner", "t"], kind="stable").reset_index(drop=True)
    by = frame.groupby("owner")
    size = by.size()
    elapsed, first, present = by["t"].diff(), by.cumcount() == 0, frame["t"].notna()
    names = fact_names(schema)
    rows = [present & (elapsed != 0)]
    if schema.time_index["consecutive"]:
        rows.append(present & (first | (by["place"].diff() == 1)))
    out = pd.DataFrame({name: ok.groupby(frame["owner"]).all() for name, ok in zip(names, rows)})
    for fact, (name, step) in zip(names[len(rows):], schema.changes.items()):
        kept = frame.dropna(subset=[name, "t"])
        moved, took = kept.groupby("owner")[name].diff(), kept.groupby("owner")["t"].diff()
        close = np.isclose(moved, step * took, rtol=1e-9, atol=1e-6 * max(1.0, abs(step)))
        out[fact] = (moved.isna() | close).groupby(kept["owner"]).all()
    return out.reindex(size.index[size >= 2]).astype("boolean").fillna(True).astype(bool)


def _on_lattice(spec: ColumnSpec, x: np.ndarray, side: int = 0) -> np.ndarray:
    """Numbers put on the values a change column takes (`_lattice`): the nearest (side 0), the
    nearest above (1) or below (-1); as they are where it takes any number."""
    base, unit, _, _ = _lattice(spec)
    if unit is None:
        return spec.snap(x) if spec.values is not None else x
    steps = (x - base) / unit
    steps = np.round(steps) if side == 0 else (np.ceil(steps - 1e-9) if side > 0
                                                else np.floor(steps + 1e-9))
    return base + steps * unit


def _written(spec: ColumnSpec, x: np.ndarray) -> np.ndarray:
    """Values on the lattice written exactly: a declared value, a whole number, its decimals."""
    if spec.values is not None:
        return spec.snap(x)
    if spec.kind == "integer":
        return np.round(x)
    return np.round(x, spec.decimals) if spec.decimals is not None else x


def hold_panel(children: pd.DataFrame, person: np.ndarray, schema) -> tuple:
    """(children, person): sampled child rows (`person[i]`: row i's person) in each person's time
    order, built to obey the declared time index and changes; unchanged where none is declared.
    Post-processing of the model's own rows: it reads no private value, so it costs no ε.

    Time index, among the values it can hold (`_position`): the model's times in order, less each
    row's rank in its person, are made non-decreasing (a running maximum) and the rank added back:
    each time as near the model's as can be, none repeated; consecutive: the person's first time
    and the next values after it. The start is clipped so that the whole sequence fits (a person of
    n rows starts at most n − 1 values before the last): the model's count of rows is kept, its
    start moved. A missing time takes the person's previous one.
    Changes: the person's start value is the median of what each row's value implies for it (the
    value less the step times the time elapsed), put on the values the column takes and clipped so
    that the whole sequence stays within them (check_panel makes sure it can); every present value
    then follows by the step; a missing one stays missing."""
    if schema.time_index is None or children.empty:
        return children, person
    spec = schema.child[schema.order]
    t = pd.to_numeric(children[schema.order], errors="coerce").to_numpy(dtype=float)
    ordered = np.lexsort((np.where(np.isnan(t), np.inf, t), person))
    children = children.iloc[ordered].reset_index(drop=True)
    person, t = np.asarray(person)[ordered], t[ordered]
    place = pd.Series(_position(spec, t)).groupby(person).ffill().fillna(0).to_numpy()
    rank = pd.Series(person).groupby(person).cumcount().to_numpy()
    start = pd.Series(np.round(place) - rank).groupby(person)
    start = start.transform("first") if schema.time_index["consecutive"] else start.cummax()
    count, least = _count(spec), 0 if spec.values is not None or spec.lower is not None else -np.inf
    last = (count if count is not None else np.inf) - np.bincount(person)[person]
    times = _time_at(spec, np.minimum(np.maximum(start.to_numpy(), least), last) + rank)
    children[schema.order] = spec.as_written(times)
    elapsed = times - pd.Series(times).groupby(person).transform("first").to_numpy()
    for name, step in schema.changes.items():
        column = schema.child[name]
        x = pd.to_numeric(children[name], errors="coerce").to_numpy(dtype=float)
        offset = step * elapsed
        first = pd.Series(x - offset).groupby(person).transform("median").to_numpy()
        spread = pd.Series(offset).groupby(person)
        _, _, lo, hi = _lattice(column)
        lo = _on_lattice(column, lo - spread.transform("min").to_numpy(), 1)
        hi = _on_lattice(column, hi - spread.transform("max").to_numpy(), -1)
        first = np.minimum(np.maximum(_on_lattice(column, first), lo), hi)
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
    steps = _most_elapsed(child[order], time_index["consecutive"], max_children)
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
