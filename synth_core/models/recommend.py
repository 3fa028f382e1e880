"""`auto`: the family, size and calibration share a run should use, from public facts only.

The choice reads the public schema (its columns and their domain sizes), the row count as the run
releases it (declared public, or the noisy count) and ε; never the table's values, so two tables
with the same schema and row count get the same choice. Each candidate family is configured as below
(`candidates`: AIM's shares, compression and bins, DP-TBART's calibration and bins); `recommend`
then takes the one the model of the project's benchmark results (`benchmark_model`, the forecast's,
issue 44) expects to give the lowest 2-way TVD, and the hand-set rule below (`by_rule`) picks only
where that model cannot rank them. The rule and the settings were fitted on the benchmarks of
`benchmarks/history/2026-11-27.md` (issue 15).
A table whose numbers all have at most 100 values at their declared precision (`narrow_numbers`:
categories, counts, ages, years), AIM at any size: above 5,000 rows × ε its 2-way TVD was lower than
DP-TBART's on each such table measured there (GSSvocab and Fertility2 at ε = 1 and 0.25, SmokeBan at
1, WVS at 2; two of them new to the rule), and level on Arrests with its count of checks as the
target; checked afterwards on four more such tables (GSS7402, HealthInsurance, monica, Vocab), level
or a little ahead (2-way 0.057 against 0.059, two seeds). Timed alone on the 2 cores the two fits
take about as long (GSS7402 15 s against 12 s, SmokeBan 11 s against 9 s).
At ε ≤ 0.25 from 5,000 to 10,000 rows × ε, without a number as the target, AIM with MST's domain
compression (see COMPRESSED_BELOW). From 5,000 rows × ε otherwise, DP-TBART with calibration: the
best or near-best 2-way TVD and detection on Adult, King, CPS1988 at ε = 1, SLID at 1 and Computers
at 2, and calibration helped more, the fewer rows per unit of ε; half of ε measures the marginals,
at any size. On nine tables of three to five columns the rule had not seen, AIM's 2-way TVD was
level (within 0.002) or behind on eight at ε = 1 and DP-TBART's TSTR better on eight, so the column
count does not enter the rule. Below 1,000, AIM: its 2-way TVD was lower on each table measured
there (HMDA, Wages1 and the demo table at ε = 0.25, two seeds), with four fifths of its ρ measuring
every column alone first (`aim_one_way_share`, up to 2,000 rows × ε; half from there). In between,
AIM too unless the declared target is a number: over 11 table × ε cells there, five of the tables
new to the rule (NMES1988, Benefits, DoctorVisits, Males, Arrests; two or three seeds), AIM's 2-way
and 3-way TVD were level with DP-TBART's (mean 2-way 0.118 against 0.119), its 1-way and TSTR better
(0.048 against 0.050; 0.67 against 0.64); on King at ε = 0.25, whose target is a price, AIM's
regression R² fell to about 0 (a number modelled in coarse ranges, no triple of a numeric target
kept), so there DP-TBART stays (checked afterwards on five tables at ε = 0.25: its 2-way and 3-way
TVD lower than AIM's on all five, R² 0.01-0.38 against AIM's 0 or below), with half of ε measuring
marginals and numbers in at most 50 bins instead of 100 (2-way TVD better on average on HMDA, Wages1
and the demo table at ε = 1 and 0.25). AIM's own numeric bins follow the signal per column
(`aim_bins`): 100 public bins from 250 rows × ε per column of the table (AIM's rounds, and so the
measurements that share its ρ, grow with the columns), 32 below.
"""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

from .. import benchmark_model
from ..privacy.budget import DEFAULT_CALIBRATION_SHARE
from ..schema import Schema
from ..schema.linked import LinkedSchema

AUTO = "auto"
# auto on linked tables: the family that models them, at its standard size
LINKED_AUTO, LINKED_PRESET = "dp-tbart", "cpu"
# the families `recommend` may choose (every size of one is a size of the other)
CANDIDATES = ("dp-tbart", "aim")
TITLES = {"aim": "AIM", "dp-tbart": "DP-TBART"}
# where `auto` picks DP-TBART, half of ε measures the marginals its rows are calibrated to: against
# 0.3 (the share for a family picked by hand) 1-way / 2-way TVD fell on SLID at 1 (0.053 / 0.145 →
# 0.047 / 0.133), CPS1988 at 0.25 (0.026 / 0.071 → 0.024 / 0.064), Adult at 0.25, King, Computers
# and diamonds at 1, and was level on Adult at 1 (benchmarks/history, issue 15; 0.3 had been fitted
# when only the target's pairs were measured)
DP_TBART_SHARE = 0.5
# below this many rows × ε, DP-SGD learns little: numbers in at most this many bins, fewer cells for
# its noise to spread over (benchmarks/history, issue 15)
SMALL_SIGNAL = 5_000
SMALL_TABLE_BINS = 50
# below this many rows × ε, AIM (marginals chosen and measured, a graphical model) beats DP-SGD
# (benchmarks/history) ...
AIM_BELOW = 1_000
# AIM's widest table (AIM.check_schema): its rounds grow with the columns (16 each) and each with
# the pairs; 120 three-category columns took ~7 min at the quick size on 2 cores, 250 ~36 min.
# Wider: DP-TBART
AIM_MAX_COLUMNS = 150
# ... and below SMALL_SIGNAL too, unless the declared target is a number (benchmarks/history: level
# TVD, better 1-way and TSTR, on tables the rule was not fitted on; King's price fell to R² ≈ 0
# under AIM) AIM's numbers: in 100 public bins from this many rows × ε per column, in 32 below (the
# noise of a measurement spread over fine bins cost more than their resolution gave on HMDA, Wages1,
# the demo table and King at the lower signals; the fine bins won on SLID, Wages1 and Adult above
# it: benchmarks/history, 11 table × ε cells)
AIM_FINE_FROM, AIM_FINE_BINS, AIM_COARSE_BINS = 250, 100, 32
# where `auto` picks AIM, half of its ρ measures every column alone first (AIM's own rule gives them
# about a twentieth): mean 2-way TVD 0.236 → 0.190 on HMDA, 0.144 → 0.138 on the demo table, 0.183 →
# 0.182 on Wages1 at ε = 0.25 (four runs each; benchmarks/history), 1-way nearer independent DP
# marginals'; HMDA's TSTR fell (0.61 → 0.53)
AIM_ONE_WAY_SHARE = 0.5
# ... and four fifths of it below AIM_LOW_SIGNAL rows × ε, where the pairs are mostly below the
# noise: mean 1-way / 2-way TVD 0.076 / 0.167 → 0.067 / 0.155 over six tables at ε = 0.25 below
# 1,000, two seeds each, and 0.066 / 0.158 → 0.060 / 0.153 over six table × ε cells from 1,000 to
# 2,000 (HMDA, SLID twice, DoctorVisits, Arrests better, CreditCard a little worse; three draws
# each; benchmarks/history); from 2,000 on level (seven cells), and above 5,000 on narrow tables
# worse (GSSvocab, Fertility2)
AIM_LOW_SIGNAL_ONE_WAY_SHARE, AIM_LOW_SIGNAL = 0.8, 2_000
# At a small ε, from SMALL_SIGNAL up to COMPRESSED_BELOW rows × ε and without a number as the
# target, AIM with MST's domain compression (`compress`: the cells its first measurement finds below
# 3σ pooled): against DP-TBART with calibration its 2-way TVD was lower on Adult, CPS1988 and
# credit_cards at 0.25 (by 0.004-0.009), and on four tables new to the rule lower or level: VietNamI
# at 0.25 0.057 against 0.066, diamonds by `cut` at 0.2 0.247 against 0.250, CPSSW8 at 0.15 0.068
# against 0.067, nycflights13's weather at 0.25 0.1375 against 0.1365 (two draws each); 1-way lower
# on six of the seven, TSTR level or better on five, fits faster; at ε = 1 in the same band DP-TBART
# stayed ahead (SLID, ISLR's Default), so the rule stops at COMPRESSED_MAX_EPSILON
# (benchmarks/history, issue 15)
COMPRESSED_BELOW, COMPRESSED_MAX_EPSILON = 10_000, 0.25


def aim_one_way_share(rows: int, epsilon: float) -> float:
    """The share of AIM's ρ that `auto` gives to measuring every column alone first, for a table of
    `rows` rows (public or noisy) at this ε."""
    return AIM_LOW_SIGNAL_ONE_WAY_SHARE if max(int(rows), 0) * float(epsilon) < AIM_LOW_SIGNAL else AIM_ONE_WAY_SHARE


# AIM at any rows × ε when every number has at most this many values at its precision (each its own
# bin in AIM's fine bins): its 2-way TVD was lower than DP-TBART's above 5,000 rows × ε on GSSvocab,
# Fertility2, SmokeBan and WVS; DP-TBART won on tables with a number of many values (Adult, King,
# SLID, CPS1988 at 1, Computers: benchmarks/history)
AIM_NARROW_VALUES = AIM_FINE_BINS


def narrow_numbers(schema: Schema, limit: int = AIM_NARROW_VALUES) -> bool:
    """Whether every number the table models can take at most `limit` values at its declared
    precision between its public bounds (a table of categories, counts, ages, years...): AIM's fine
    bins then hold one value each, and a number loses nothing to them. A number without declared
    bounds or precision is not narrow."""
    return all((n := c.n_values()) is not None and n <= limit
               for c in schema.modelled().columns if c.is_numeric)


def aim_bins(rows: int, epsilon: float, columns: int) -> int:
    """The public bins per number AIM uses for a table of `rows` rows (public or noisy) and
    `columns` columns at this ε."""
    per_column = max(int(rows), 0) * float(epsilon) / max(int(columns), 1)
    return AIM_FINE_BINS if per_column >= AIM_FINE_FROM else AIM_COARSE_BINS


def aim_numbers(schema: Schema, bins: int) -> str:
    """How AIM would model the table's numbers in `bins` public bins, as the end of a sentence."""
    if not schema.modelled().numeric_columns:
        return ""
    if narrow_numbers(schema, bins):
        return ", and every value of a number is modelled as its own"
    return f", and numbers are modelled in {bins} ranges"


@dataclass(frozen=True)
class Recommendation:
    family: str
    preset: str
    calibration_share: float
    reason: str               # one sentence, for the steward
    max_bins: int | None = None  # numeric columns in at most this many bins (None: the preset's)
    quantile_share: float = 0.0  # of ε, for the numeric columns' quantiles (their bins follow them)
    options: dict = field(default_factory=dict)  # family options the choice sets, whatever the size
    # how auto runs the family, the end of a sentence ("half of ε measures ...")
    how: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def options_for(self, preset: str) -> dict:
        """The family options the choice sets for a preset: its numeric bins capped at `max_bins` (a
        preset with fewer keeps its own)."""
        from . import get_model_class  # every family registered
        bins = getattr(get_model_class(self.family).configure(preset)[0], "n_bins", None)
        if self.max_bins is None or bins is None or bins <= self.max_bins:
            return dict(self.options)
        return {**self.options, "n_bins": self.max_bins}


def _aim_reason(schema: Schema, rows: int, epsilon: float) -> str:
    """Why the rule picks AIM for these facts (the end of its reason sentence), or None where it
    would not."""
    numeric_target = any(c.role == "target" and c.is_numeric for c in schema.columns)
    if rows * epsilon < AIM_BELOW:
        return ("a neural model learns too little, and a model built from the table's overall statistics, each "
                "measured where it is most wrong, gave the more faithful tables")
    if narrow_numbers(schema):
        what = (f"no number with more than {AIM_NARROW_VALUES} possible values" if schema.modelled().numeric_columns
                else "only categories")
        return (f"and {what}, a model built from the table's overall statistics, each measured where it is most "
                "wrong, gave tables as faithful as a neural model's or more")
    if _compressed(schema, rows, epsilon):
        return ("and no number as the target, a model built from the table's overall statistics, each measured "
                "where it is most wrong, with the values too rare to measure pooled, gave tables as faithful as a "
                "neural model's or more")
    if rows * epsilon < SMALL_SIGNAL and not numeric_target:
        return ("and no number as the target, a model built from the table's overall statistics, each measured "
                "where it is most wrong, gave tables as faithful as a neural model's and better for prediction")
    return None


def _compressed(schema: Schema, rows: int, epsilon: float) -> bool:
    """Whether AIM, where auto picks it, pools the values too rare to measure (MST's domain
    compression)."""
    numeric_target = any(c.role == "target" and c.is_numeric for c in schema.columns)
    return (not narrow_numbers(schema) and not numeric_target and epsilon <= COMPRESSED_MAX_EPSILON
            and SMALL_SIGNAL <= rows * epsilon < COMPRESSED_BELOW)


def candidates(schema: Schema, rows: int, epsilon: float) -> dict[str, Recommendation]:
    """Each family `auto` may pick (CANDIDATES), configured as `auto` would run it for a table of
    `rows` rows (public or noisy) with this public schema at this ε: its size, options and shares.
    AIM only where it fits (AIM_MAX_COLUMNS). The reasons are the rule's (`recommend`); a choice by
    forecast writes its own."""
    rows, epsilon = max(int(rows), 0), float(epsilon)
    out = {}
    if len(schema.modelled().columns) <= AIM_MAX_COLUMNS:
        one_way = aim_one_way_share(rows, epsilon)
        share_words = {AIM_ONE_WAY_SHARE: "half", AIM_LOW_SIGNAL_ONE_WAY_SHARE: "four fifths"}[one_way]
        why = _aim_reason(schema, rows, epsilon) or "it gave the most faithful tables"
        compressed = _compressed(schema, rows, epsilon)
        how = (f"{share_words} of ε measures each column alone"
               f"{', the values too rare to measure pooled' if compressed else ''}"
               f"{aim_numbers(schema, aim_bins(rows, epsilon, len(schema.columns)))}")
        out["aim"] = Recommendation(
            family="aim", preset="cpu", calibration_share=0.0, how=how,
            options={"one_way_share": one_way, **({"compress": True} if compressed else {})},
            reason=f"AIM: with {rows:,} rows at ε = {epsilon:g} {why} in our benchmarks; {how}.")
    max_bins = None
    if rows * epsilon < SMALL_SIGNAL:
        max_bins = SMALL_TABLE_BINS
        target = " and a number as the target" if any(c.role == "target" and c.is_numeric for c in schema.columns) else ""
        why = (f"with {rows:,} rows at ε = {epsilon:g}{target}, the training alone learns little, so half of ε "
               "measures the "
               f"table's overall statistics and the rows are matched to them, and numbers are learned in at most "
               f"{max_bins} ranges")
    else:
        why = (f"for {rows:,} rows and {len(schema.columns)} columns it gave the most faithful tables in our "
               "benchmarks, with half of ε measuring the table's overall statistics to match the rows to them")
    how = ("half of ε measures the table's overall statistics and the rows are matched to them"
           + (f", and numbers are learned in at most {max_bins} ranges" if max_bins else ""))
    out["dp-tbart"] = Recommendation(family="dp-tbart", preset="cpu", calibration_share=DP_TBART_SHARE,
                                     max_bins=max_bins, how=how, reason=f"DP-TBART: {why}.")
    return out


def by_rule(schema: Schema, rows: int, epsilon: float) -> Recommendation:
    """The candidate the hand-set rule (this module's thresholds, fitted on the benchmarks of issue
    15) picks for a table of `rows` rows (public or noisy) with this public schema, at this ε:
    auto's choice where the forecast cannot rank the candidates (no model of benchmark results
    installed)."""
    rows, epsilon = max(int(rows), 0), float(epsilon)
    return _by_rule(candidates(schema, rows, epsilon), schema, rows, epsilon)


def _by_rule(options: dict[str, Recommendation], schema: Schema, rows: int, epsilon: float) -> Recommendation:
    if "aim" in options and _aim_reason(schema, rows, epsilon) is not None:
        return options["aim"]
    return options["dp-tbart"]


def recommend(schema: Schema, rows: int, epsilon: float, among: tuple[str, ...] | None = None
              ) -> Recommendation:
    """The family, preset and shares `auto` runs for a table of `rows` rows (public or noisy) with
    this public schema at this ε: of its candidates, each configured as `auto` runs it, the one with
    the lowest expected 2-way TVD by the model of the project's benchmark results
    (`benchmark_model.rank`, issue 44), its reason quoting the forecast; the rule (`by_rule`) where
    the model cannot rank them. Linked tables: the one family that models them (the benchmark runs
    are single tables). `among`: only these families (a table an engine holds: those that take
    one, `from_engine`)."""
    if isinstance(schema, LinkedSchema):
        return Recommendation(LINKED_AUTO, LINKED_PRESET, DEFAULT_CALIBRATION_SHARE,
                              reason=f"{TITLES[LINKED_AUTO]}: the family that models linked "
                                     "tables, a person written as one sequence.")
    rows, epsilon = max(int(rows), 0), float(epsilon)
    options = candidates(schema, rows, epsilon)
    if among is not None:
        options = {family: r for family, r in options.items() if family in among}
        if not options:
            raise ValueError(f"auto has no family among {', '.join(among)} for this table")
    rule = (_by_rule(options, schema, rows, epsilon) if len(options) > 1
            else next(iter(options.values())))
    ranked = benchmark_model.rank(schema, rows, epsilon, list(options), rule_pick=rule.family)
    if not ranked:
        return rule
    (family, best), others = ranked[0], ranked[1:]
    against = "; ".join(f"{TITLES[f]} {i.expected:.3f}" for f, i in others)
    reason = (f"{TITLES[family]}: for {rows:,} rows at ε = {epsilon:g}, of the families auto weighs "
              f"it has the lowest expected 2-way TVD by our benchmarks, {best.expected:.3f} (80% interval "
              f"{best.low:.3f} to {best.high:.3f}{', against ' + against if against else ''}); {options[family].how}.")
    return dataclasses.replace(options[family], reason=reason)
