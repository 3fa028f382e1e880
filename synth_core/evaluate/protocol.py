"""The one comparison behind every k-way TVD: the review, `evaluate`, the benchmarks and the
forecast. (Its sizes and words: benchmark_model, which the forecast reads.)

A model trained on n real rows is judged by n of its synthetic rows against n/4 real rows, each
number cut in 20 quantile bins of the n training rows; a figure is the mean over every set of k
columns (at most 1,000 sets, a seeded sample beyond). The benchmarks split a table 80/20, so their
n/4 compared rows are rows the model never saw; a steward's run trained on all its rows, so the
review and `evaluate` draw the n/4 from the training rows (a seeded sample). Under DP the model
cannot tell those from unseen rows. Both read the same sampling noise, so the forecast (fitted on
the benchmarks) predicts the review's figure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from ..benchmark_model import BINS, MAX_COMBINATIONS, MAX_ROWS, compared_rows, compares
from .fidelity import kway_tvd_report
from .inputs import sample_rows


@dataclass(frozen=True)
class Comparison:
    """The rows one figure reads: the training rows (for the bins), the real rows compared, the
    synthetic rows; `rest`: the training rows not compared, where the compared ones were drawn from
    them (the review: `floor` compares them), else None (the benchmarks: their training split is the
    rest)."""

    training: pd.DataFrame
    compared: pd.DataFrame
    synthetic: pd.DataFrame
    rest: pd.DataFrame | None = None

    @property
    def drawn(self) -> bool:
        return self.rest is not None

    @property
    def sizes(self) -> dict[str, int]:
        return {"training": len(self.training), "real compared": len(self.compared),
                "synthetic": len(self.synthetic)}

    def words(self) -> str:
        """What the figure compares, in a sentence a steward reads."""
        return compares(len(self.training), len(self.synthetic), len(self.compared), self.drawn)


def comparison(training: pd.DataFrame, synthetic: pd.DataFrame,
               compared: pd.DataFrame | None = None, seed: int = 0) -> Comparison:
    """The comparison of `synthetic` with a model's `training` rows; `compared`: real rows it
    never saw (the benchmarks' test split), else `compared_rows` of the training rows, drawn with
    `seed`."""
    training = sample_rows(training, MAX_ROWS, seed)
    synthetic = sample_rows(synthetic, len(training), seed + 1)
    if compared is not None:
        kept = sample_rows(compared, compared_rows(MAX_ROWS), seed + 2)
        return Comparison(training, kept, synthetic)
    picked = np.zeros(len(training), dtype=bool)
    picked[np.random.default_rng(seed + 2).choice(len(training), compared_rows(len(training)),
                                                  replace=False)] = True
    return Comparison(training, training[picked].reset_index(drop=True), synthetic,
                      training[~picked].reset_index(drop=True))


def tvd(made: Comparison, numeric_columns: Iterable | None, ks: Iterable[int] = (1, 2, 3),
        seed: int = 0) -> dict[int, float]:
    """{k: the mean k-way TVD} of a comparison (0 = the same, 1 = nothing in common)."""
    return kway_tvd_report(made.compared, made.synthetic, numeric_columns, ks=tuple(ks),
                           bin_reference=made.training, n_bins=BINS,
                           max_combinations=MAX_COMBINATIONS, seed=seed)


def floor(made: Comparison, numeric_columns: Iterable | None, ks: Iterable[int] = (1, 2, 3),
          seed: int = 0) -> dict[int, float]:
    """{k: the k-way TVD of the real rows not compared against the compared ones}: what a second
    real sample of the table scores, where no synthetic table can be expected to do better (the
    review's comparisons; a benchmark's floor is its training split against its test split)."""
    if made.rest is None or not len(made.rest):
        return {}
    return tvd(Comparison(made.training, made.compared, made.rest), numeric_columns, ks, seed)
