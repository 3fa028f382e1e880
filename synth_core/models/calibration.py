"""Calibration of a model's samples to the run's noisy marginals: post-processing, no privacy cost.

A run that measured marginals (`privacy.measurements.measure_marginals`) samples a pool of candidate
rows from its model, weights the pool so that its marginals move towards the measured ones, and
resamples the rows asked for. The weights are found by mirror descent (multiplicative updates) from
the uniform weights, on the noise-scaled squared error between the pool's weighted marginals and the
measurements, and stop as soon as that error reaches what the measurements' own noise leaves (its
expectation at the true table, one noise variance per cell): the pool is moved as far as the noise
warrants and no further, which keeps it close to the model's own distribution (an information
projection with early stopping, after Wang et al., NeurIPS 2023, "Post-processing private synthetic
data for improving utility on selected measures"). mbi's `ReweightedDatasetEstimator` on the same
pool has no such stop and fits the measurements' noise: level on large tables at ε = 1, behind
wherever the noise is large (benchmarks/bench_reweight.py, benchmarks/history).

The weights should hold as many effective rows (1 / Σ weight²) as the rows asked for, or the sample
repeats a few candidates many times: where the model rarely draws what the measurements show, the
pool is doubled with fresh rows and calibrated again, up to POOL_GROWTH times its first size
(`grow_and_calibrate`; on King County at ε = 0.25 this took 2-way TVD from 0.178 to 0.171 on a fit
it was not set on, benchmarks/history/2026-11-27.md).

With conditions, the pool holds only rows that meet them; a measured marginal then calibrates it
only if it includes every conditioned column (its slice at the conditioned values), and only where
that slice stands out of the noise.

The schema's declared rules (schema/rules.py) hold in every pool row; a measured cell that a rule
forbids (a marginal over categorical columns that include all the rule reads: a husband never
married) is set to 0 before calibrating (`forbidden`), so the weights do not chase noise no row can
meet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..encoding.tokens import NULL_LABEL
from ..privacy.measurements import Marginals
from ..privacy.person_marginals import child_weights
from ..schema import Schema
from ..schema.rules import obeying
from .resampling import balance_matrix

POOL_FACTOR = 3          # candidate rows per row asked for
# at least this many candidates (or 50 per row asked for, if fewer), so that small requests are
# calibrated too, without a slow sampler drawing thousands for ten rows
MIN_POOL = 5_000
SMALL_REQUEST_FACTOR = 50
MAX_ITERATIONS = 300
POOL_GROWTH = 4          # the pool may double, while its weights hold fewer effective rows than
                         # asked for, up to this many times its first size


@dataclass
class _Target:
    cells: np.ndarray     # each pool row's cell (or each entry's: see owner)
    counts: np.ndarray    # the noisy counts to reach
    total: float          # the rows the counts stand for
    var: float            # the noise's variance on each count
    # each entry's pool row, where a row has several (a person's child rows)
    owner: np.ndarray | None = None
    share: np.ndarray | None = None  # each entry's weight within its row

    def counted(self, q: np.ndarray) -> np.ndarray:
        """The pool's counts in the target's cells under the weights q."""
        weights = q if self.owner is None else q[self.owner] * self.share
        return self.total * np.bincount(self.cells, weights=weights, minlength=self.counts.size)

    def gradient(self, residual: np.ndarray, rows: int) -> np.ndarray:
        """The noise-scaled squared error's gradient in each pool row's weight."""
        if self.owner is None:
            return self.total * residual[self.cells] / self.var
        return self.total * np.bincount(self.owner, weights=self.share * residual[self.cells], minlength=rows) / self.var


# a pool of persons (linked tables) holds their child rows too, and a person's sequence is long (a
# wide table's 276 tokens: 5 ms a person on 2 cores, 25 s for 5,000): 1,000 persons calibrated a
# small request as well as 5,000 (pbcseq and Males at ε = 1, 100 and 300 persons, three samples
# each: persons' 1-way, children's 1-way and parent × child 2-way TVD within 0.013 of each other
# either way) in a fifth of the time
MIN_PERSON_POOL = 1_000


def pool_size(n: int, floor: int = MIN_POOL) -> int:
    """The candidates a calibrated sample of n rows draws first: POOL_FACTOR per row, and for a
    small request at least `floor` (a family's min_pool) or SMALL_REQUEST_FACTOR per row, whichever
    is fewer."""
    return max(POOL_FACTOR * int(n), min(int(floor), SMALL_REQUEST_FACTOR * int(n)))


def forbidden(encoder, columns: tuple, shape: tuple, rules: list) -> np.ndarray | None:
    """The cells of a marginal over `columns` (flat, C order) that no row obeying the rules can fall
    in: judged by each rule that reads only categorical columns of the marginal (a numeric bin holds
    values a rule may treat apart); None where no rule is judged."""
    categorical = {c for c in columns if not encoder.codecs[encoder.column_index(c)].spec.is_numeric}
    judged = [r for r in rules if r.columns and set(r.columns) <= categorical]
    if not judged:
        return None
    local = np.unravel_index(np.arange(int(np.prod(shape))), shape)
    cells = {}
    for name, index in zip(columns, local):
        if name in categorical:
            labels = np.array([None if label == NULL_LABEL else label
                               for label in encoder.codecs[encoder.column_index(name)].labels], dtype=object)
            cells[name] = labels[index]
    return ~obeying(judged, pd.DataFrame(cells))


def _targets(pool: pd.DataFrame, marginals: Marginals, schema: Schema, conditions: dict,
             rules: list) -> list[_Target]:
    encoders: dict[int, tuple] = {}

    def encoder_for(m):  # the marginal's discretisation, and the conditioned values' cells in it
        bins = marginals.bins(m)
        if bins not in encoders:
            encoder = marginals.encoder(schema, m)
            encoders[bins] = encoder, {name: int(encoder.cells(pd.DataFrame({name: [value]}), [name])[0][0])
                                       for name, value in conditions.items()}
        return encoders[bins]

    out = []
    for m in marginals.marginals:
        encoder, fixed = encoder_for(m)
        cells, shape = encoder.cells(pool, m.columns)
        counts = m.counts
        zero = forbidden(encoder, m.columns, shape, rules)
        if zero is not None and zero.any():
            counts = np.where(zero, 0.0, counts)
        if fixed:
            if not set(fixed) <= set(m.columns):
                continue  # says nothing about the rows meeting the conditions
            grid = counts.reshape(shape)
            index = tuple(fixed[c] if c in fixed else slice(None) for c in m.columns)
            counts = grid[index].ravel()
            free = [c for c in m.columns if c not in fixed]
            cells, _ = encoder.cells(pool, free) if free else (np.zeros(len(pool), np.int64), ())
            total = float(counts.sum())
            if total < 3 * marginals.std(m) * np.sqrt(counts.size):
                continue  # the slice is lost in the noise
        else:
            total = marginals.total_rows
        out.append(_Target(cells=cells, counts=counts, total=total, var=marginals.std(m) ** 2))
    return out


def calibrate_weights(pool: pd.DataFrame, marginals: Marginals, schema: Schema,
                      conditions: dict | None = None, rules: list | None = None) -> tuple[np.ndarray, dict]:
    """Weights (summing to 1) over the pool's rows, and what calibration did (for
    `last_sample_info`); `rules`: the declared rules the pool obeys (schema.rule_checks), whose
    forbidden cells are zero."""
    targets = _targets(pool, marginals, schema, dict(conditions or {}), list(rules or []))
    return _solve(targets, len(pool))


def balance_rows(pool: pd.DataFrame, marginals: Marginals, schema: Schema) -> np.ndarray:
    """The counts a calibrated sample of the pool's rows is balanced on (models.resampling): each
    column's values alone, on the measured marginals' bins."""
    return balance_matrix(_one_way(pool, marginals, schema), len(pool))


def balance_persons(persons: pd.DataFrame, children: pd.DataFrame, person: np.ndarray, marginals,
                    schema) -> np.ndarray:
    """The counts a calibrated sample of persons is balanced on: each of the persons' columns'
    values (their count of child rows included), then their child rows' in each child column's
    values, counted per person (arguments as `calibrate_persons`'s)."""
    blocks = _one_way(persons, marginals.persons, schema.persons())
    blocks += [(cells, size, person) for cells, size, _ in _one_way(children, marginals.children, schema.child)]
    return balance_matrix(blocks, len(persons))


def _one_way(table: pd.DataFrame, marginals: Marginals, schema: Schema) -> list[tuple]:
    """(each row's cell, the cells, None) of every one-column marginal measured on the marginals'
    own bins."""
    encoder = marginals.encoder(schema)  # the marginals' own bins: one encoder for them all
    out = []
    for m in marginals.marginals:
        if len(m.columns) == 1 and m.n_bins is None:
            cells, shape = encoder.cells(table, m.columns)
            out.append((cells, int(np.prod(shape)), None))
    return out


def calibrate_persons(persons: pd.DataFrame, children: pd.DataFrame, person: np.ndarray, marginals,
                      schema, conditions: dict | None = None) -> tuple[np.ndarray, dict]:
    """Weights (summing to 1) over a pool of synthetic persons (linked tables): `persons`, their
    rows with their count of child rows (schema.linked.LinkedSchema.persons), `children` their child
    rows and `person` each child row's person; `marginals` the run's
    privacy.person_marginals.PersonMarginals. A person's child rows count 1/k each in the children's
    marginals, as they were measured."""
    conditions = dict(conditions or {})
    targets = _targets(persons, marginals.persons, schema.persons(), conditions, [])
    if not conditions:  # a child row's marginal says nothing about the persons meeting conditions
        share = child_weights(person, len(persons))
        for m in marginals.children.marginals:
            cells, _ = marginals.children.encoder(schema.child, m).cells(children, m.columns)
            targets.append(_Target(cells=cells, counts=m.counts, total=marginals.children.total_rows,
                                   var=marginals.children.std(m) ** 2, owner=person, share=share))
    return _solve(targets, len(persons))


def _solve(targets: list[_Target], m: int) -> tuple[np.ndarray, dict]:
    """Mirror descent from the uniform weights over m pool rows until the error reaches the noise's
    level."""
    q = np.full(m, 1.0 / m)
    info = {"pool_rows": m, "marginals": len(targets), "iterations": 0}
    if not targets or m == 0:
        info["note"] = "no measured marginal bears on these rows; the model's own rows are returned"
        return q, info
    noise_level = float(sum(t.counts.size for t in targets))  # E[error] at the true table

    def error(q: np.ndarray) -> tuple[float, list[np.ndarray]]:
        residuals = [t.counted(q) - t.counts for t in targets]
        return float(sum((r ** 2).sum() / t.var for t, r in zip(targets, residuals))), residuals

    err, residuals = error(q)
    info["error_before"] = err
    info["noise_level"] = noise_level
    log_q = np.log(q)
    step = None
    for it in range(MAX_ITERATIONS):
        if err <= noise_level:
            break
        grad = sum(t.gradient(r, m) for t, r in zip(targets, residuals))
        if step is None:
            step = 0.5 / max(float(np.abs(grad).max()), 1e-12)
        while True:
            trial = log_q - step * grad
            trial -= trial.max()
            q_new = np.exp(trial)
            q_new /= q_new.sum()
            err_new, res_new = error(q_new)
            if err_new < err or step < 1e-12:
                break
            step *= 0.5
        if err_new >= err:
            break
        improvement = (err - err_new) / err
        log_q, q, err, residuals = trial, q_new, err_new, res_new
        step *= 1.5
        info["iterations"] = it + 1
        if improvement < 1e-5:
            break
    info["error_after"] = err
    info["effective_rows"] = float(1.0 / (q ** 2).sum())
    return q, info


def grow_and_calibrate(pool: pd.DataFrame, n: int, more: Callable[[int, int], pd.DataFrame | None],
                       marginals: Marginals, schema: Schema, conditions: dict | None = None,
                       growth: int = POOL_GROWTH, rules: list | None = None) -> tuple[pd.DataFrame, np.ndarray, dict]:
    """The pool, its weights and what calibration did, for a sample of n rows. While the weights
    hold fewer effective rows than n, `more(rows, k)` draws `rows` fresh candidates (its k-th draw;
    None when it cannot) and the doubled pool is calibrated again, up to `growth` times the first
    pool (1: never grows)."""
    return grow_pool(pool, n, more, lambda rows: calibrate_weights(rows, marginals, schema, conditions, rules),
                     lambda a, b: pd.concat([a, b], ignore_index=True), growth)


def grow_pool(pool, n: int, more: Callable, weigh: Callable, join: Callable, growth: int = POOL_GROWTH):
    """`grow_and_calibrate` for any pool: `weigh(pool)` gives its weights and what calibration did,
    `join(pool, extra)` the pool grown by `more`'s rows (linked tables: persons with their child
    rows)."""
    first = len(pool)
    weights, info = weigh(pool)
    draws = 1
    while info.get("effective_rows", n) < n and len(pool) < growth * first:
        extra = more(min(len(pool), growth * first - len(pool)), draws)
        if extra is None or len(extra) == 0:
            break
        pool = join(pool, extra)
        weights, info = weigh(pool)
        draws += 1
    info["pool_draws"] = draws
    return pool, weights, info


def summary(info: dict | None, rows: int) -> str | None:
    """What calibration did to a sample of `rows` rows, in one clause for the CLI and the generate
    page (None when the sample was not calibrated): to how many measured marginals, from how large a
    pool, and whether its weights rest on fewer rows than the sample holds (some rows then
    repeat)."""
    if not info:
        return None
    if not info.get("marginals"):
        return info.get("note")
    unit = info.get("unit", "rows")  # persons, on linked tables
    text = (f"calibrated to {info['marginals']} measured statistics (noisy counts of the columns' values, alone and "
            f"in pairs) from a pool of {info['pool_rows']:,} {unit} the model drew")
    if info.get("effective_rows", rows) < rows:
        text += (f"; the model seldom draws what the statistics show: the weights rest on about "
                 f"{info['effective_rows']:,.0f} {unit}, so some {unit} repeat")
    return text
