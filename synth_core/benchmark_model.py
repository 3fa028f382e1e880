"""The model of the project's benchmark results (issue 44): what `evaluate` would report for a run,
from public facts.

`benchmarks/fit_forecast.py` fits it on the result files kept in `benchmarks/results/` (ridge least
squares of log 1-way and 2-way TVD and the logit of the train-on-synthetic AUC's lift, on each run's
public facts and the family it trained) and writes `forecast_model.json` beside this module:
coefficients only, no data. The forecast (`forecast.py`) shows its figures; `auto`
(`models/recommend.py`) ranks its candidate families by them. A row of the model: an intercept, the
facts (`features`), one indicator per family after the first, and for the families the model lets
vary with the table (`interacting`) their indicator times each fact (`design_row`).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .schema import Schema

# the figure the model forecasts, as evaluate/protocol.py measures it for the review and the
# benchmarks
BINS = 20                # quantile bins of a numeric column, fitted on the training rows
# real rows compared per training row: the benchmarks' 20% test split of a table
COMPARED_SHARE = 0.25
MAX_COMBINATIONS = 1000  # sets of k columns a figure averages over, at most
MAX_ROWS = 50000         # training rows a comparison reads at most (the rest in proportion)

# a numeric column counts as at most this many values (the bins the families cut it in)
MOST_VALUES = 100


def features(schema: Schema, rows: int, epsilon: float, rule_pick: str | None = None) -> dict[str, float]:
    """The public facts a forecast of fidelity rests on: the signal (rows × ε), the rows (a smaller
    table is further from its own population, whatever ε), the columns, their values (the mean of
    log10 of each column's categories or public values, at most MOST_VALUES), the numeric share and,
    where given, the family `auto`'s hand-set rule picks for these facts (models.recommend.by_rule:
    what the earlier benchmarks taught, which the model weighs against the paired runs since)."""
    columns = schema.modelled().columns
    sizes = [min(c.n_values() or MOST_VALUES, MOST_VALUES) if c.is_numeric else len(c.vocabulary()) + c.nullable
             for c in columns]
    return {"log_signal": math.log10(max(rows * epsilon, 1.0)), "log_rows": math.log10(rows),
            "log_columns": math.log10(len(columns)),
            "log_values": sum(math.log10(max(s, 2)) for s in sizes) / len(sizes),
            "numeric_share": sum(c.is_numeric for c in columns) / len(columns),
            **({"rule_dp_tbart": float(rule_pick == "dp-tbart")} if rule_pick is not None else {})}


def compared_rows(training_rows: int) -> int:
    """How many real rows a model trained on `training_rows` rows is compared with."""
    return max(1, round(min(training_rows, MAX_ROWS) * COMPARED_SHARE))


def compares(training: int, synthetic: int | None = None, compared: int | None = None,
             drawn: bool = True) -> str:
    """What a k-way TVD compares, in words: `synthetic` rows (default: as many as the model's
    `training` rows) against `compared` real rows (default: `compared_rows`), binned on the
    training rows; `drawn`: the compared rows come from the training rows (the review)."""
    synthetic = min(training, MAX_ROWS) if synthetic is None else synthetic
    compared = compared_rows(training) if compared is None else compared
    which = "drawn from the rows it trained on" if drawn else "it never saw"
    return (f"{synthetic:,} synthetic rows against {compared:,} real rows {which}, numbers in "
            f"{BINS} quantile bins of {min(training, MAX_ROWS):,} training rows")


MODEL_FILE = Path(__file__).with_name("forecast_model.json")
Z80 = 1.2815515655446004  # ± this many deviations hold 80% of a normal's draws
FIGURES = {"tvd1": "1-way TVD", "tvd2": "2-way TVD", "tstr": "train-on-synthetic ROC-AUC"}


def to_scale(what: str, values):
    """A figure on the scale the model is fitted on: log TVD; the AUC's lift over chance on a logit
    scale."""
    values = np.asarray(values, dtype=float)
    if what == "tstr":
        p = np.clip(values, 0.51, 0.99)
        return np.log(p - 0.5) - np.log(1.0 - p)
    return np.log(values)


def from_scale(what: str, y):
    y = np.asarray(y, dtype=float)
    return 0.5 + 0.5 * np.exp(y) / (1.0 + np.exp(y)) if what == "tstr" else np.exp(y)


@dataclass(frozen=True)
class Interval:
    expected: float
    low: float
    high: float  # the 80% interval

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def installed() -> dict | None:
    """The fitted model shipped with the package (None where it is missing or unreadable); read once
    per version of the file."""
    try:
        return _read(MODEL_FILE, MODEL_FILE.stat().st_mtime_ns)
    except OSError:
        return None


@functools.lru_cache(maxsize=4)
def _read(path: Path, version: int) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def design_row(model: dict, facts: dict[str, float], family: str) -> list[float]:
    """The model's row for a run of `family` with these public facts (`features`)."""
    values = [facts[name] for name in model["features"]]
    varying = [facts[name] for name in model.get("interacting_features", model["features"])]
    return [1.0, *values, *(float(family == f) for f in model["families"][1:]),
            *(float(family == f) * v for f in model.get("interacting", ()) for v in varying)]


def fidelity(schema: Schema, rows: int, epsilon: float, family: str, *, rule_pick: str
             ) -> tuple[dict[str, Interval], str | None]:
    """The figures `evaluate` would report for a run of `family`, each expected with its 80%
    interval, from the model of the project's benchmark results (benchmarks/fit_forecast.py), and a
    note where there is none; `rule_pick`: the family auto's hand-set rule picks for these facts
    (`features`)."""
    model = installed()
    if model is None:
        return {}, "no model of benchmark results is installed"
    if family not in model["families"]:
        return {}, f"the benchmarks that fit the forecast have no runs of {family} yet"
    facts = features(schema, rows, epsilon, rule_pick)
    x = design_row(model, facts, family)
    widen = WIDEN if extrapolation(schema, rows, epsilon) else 1.0
    out = {}
    for what in FIGURES:
        if what in model and not (what == "tstr" and not _categorical_target(schema)):
            out[what] = _interval(model[what], x, what, widen)
    for k in ("1", "2"):  # no run comes closer to unseen rows than the table's own rows do
        floor, what = model.get(f"floor{k}"), f"tvd{k}"
        if floor is not None and what in out:
            bottom = _interval(floor, [1.0, *(facts[name] for name in model["floor_features"])], what)
            out[what] = Interval(*(max(a, b) for a, b in zip(dataclasses.astuple(out[what]),
                                                             dataclasses.astuple(bottom))))
    return out, None


def _interval(fitted: dict, x: list[float], what: str, widen: float = 1.0) -> Interval:
    """A figure expected with its 80% interval (`widen` times as wide on the fitted scale); a TVD
    (each end of its interval too) within [0, 1], where a straight line on the log scale, far from
    the benchmark runs, would leave it (5.4 at 100 rows and ε 0.05)."""
    centre = sum(b * v for b, v in zip(fitted["coefficients"], x))
    spread = Z80 * fitted["spread"] * widen
    values = from_scale(what, [centre - spread, centre, centre + spread])
    if what != "tstr":  # the AUC's scale keeps it within (0.5, 1) already
        values = np.clip(values, 0.0, 1.0)
    low, expected, high = values
    return Interval(float(expected), float(low), float(high))


# a public fact as the note says it
FACTS = {"epsilon": "ε {}", "rows": "{} rows", "columns": "{} columns",
         "values": "{} values per column (geometric mean)"}
# how much wider (on the fitted scale) an interval is where the facts lie beyond the benchmark runs'
WIDEN = 2.0


def extrapolation(schema: Schema, rows: int, epsilon: float) -> str | None:
    """Words where a forecast's public facts (ε, rows, columns) lie outside those of the benchmark
    runs the model was fitted on (forecast_model.json's `ranges`): there its figures extrapolate
    and may be far off. None within them, or where the installed model does not say its span."""
    known = (installed() or {}).get("ranges")
    if not known:
        return None
    facts = {"epsilon": float(epsilon), "rows": int(rows),
             "columns": len(schema.modelled().columns),
             "values": round(10 ** features(schema, rows, epsilon)["log_values"], 1)}
    outside = [f"{FACTS[what].format(_number(value))} "
               f"{'below' if value < known[what][0] else 'above'} them"
               for what, value in facts.items()
               if what in known and not known[what][0] <= value <= known[what][1]]
    if not outside:
        return None
    spans = ", ".join(FACTS[w].format(f"{_number(lo)} to {_number(hi)}")
                      for w, (lo, hi) in known.items() if w in FACTS)
    return (f"an extrapolation beyond the benchmark runs the forecast is fitted on ({spans}): "
            f"{', '.join(outside)}; its intervals are {WIDEN:g} times as wide, and may still miss")


def _number(x: float) -> str:
    return f"{x:,}" if float(x).is_integer() and abs(x) >= 1000 else f"{x:g}"


def floor(schema: Schema, rows: int) -> dict[str, Interval]:
    """How far the table's own rows would be from unseen rows of it (1-way and 2-way TVD): where
    more ε stops buying fidelity."""
    model = installed() or {}
    facts = features(schema, rows, 1.0)
    return {f"tvd{k}": _interval(model[f"floor{k}"], [1.0, *(facts[n] for n in model["floor_features"])], f"tvd{k}")
            for k in ("1", "2") if f"floor{k}" in model}


def _categorical_target(schema: Schema) -> bool:
    return any(c.role == "target" and not c.is_numeric for c in schema.columns)


def rank(schema: Schema, rows: int, epsilon: float, families, *, rule_pick: str) -> list[tuple[str, Interval]]:
    """`families` with an expected 2-way TVD, best (lowest) first; empty where the model cannot rank
    them table by table (none installed, a family without runs, or one whose figures the model does
    not let vary with the table's facts: its order would be the same on every table; or a tie for
    the best, as where the table's own floor or the TVD's top, 1, bounds them all), so the caller
    falls back on its own rule."""
    model = installed()
    if model is None or any(f != model["families"][0] and f not in model.get("interacting", ()) for f in families):
        return []
    expected = []
    for family in families:
        figures, _ = fidelity(schema, rows, epsilon, family, rule_pick=rule_pick)
        if "tvd2" not in figures:
            return []
        expected.append((family, figures["tvd2"]))
    ranked = sorted(expected, key=lambda pair: pair[1].expected)
    return [] if len(ranked) > 1 and ranked[0][1].expected == ranked[1][1].expected else ranked
